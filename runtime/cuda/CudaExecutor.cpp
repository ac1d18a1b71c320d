//===- CudaExecutor.cpp - The CUDA backend --------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Memory: everything is allocated when the executor is created, never
// during a run: one device arena of Program::arenaBytes (Input, Output and
// Temp buffers at their planned offsets, filled with 0xff bytes so an
// element a kernel forgets to write reads as NaN, as on the CPU backend),
// the constant blob copied once, one scratch block sized for the hungriest
// instruction, and cuBLASLt's workspace.
//
// Running: the first run() records every launch on the executor's stream
// into a CUDA graph; every run replays it, so a step costs one graph launch
// instead of hundreds of kernel launches. LOOM_CUDA_GRAPH=0 launches
// directly (for debugging a kernel). LOOM_CUDA_PROFILE=1 launches directly
// with a pair of CUDA events around every instruction and, when the
// executor goes away, prints to stderr the time per opcode, its share, the
// GEMMs' achieved TFLOP/s, and the device memory loom allocated;
// LOOM_CUDA_PROFILE_FROM=K leaves the first K runs out of the sums (a late
// step's kernels, not the average from the first). LOOM_CUDA_GRAPH_TIMING=1
// keeps the graph and puts a CUDA event on each side of its launch; at exit
// it prints the device time per replay and the GPU's idle time between one
// replay's end and the next one's start (the host's share of a step: the
// batch upload, the loss readback, the next launch), from the same
// LOOM_CUDA_PROFILE_FROM run on. After each run the DeviceError slot is
// read back; a data error (an id out of range) fails the run with the same
// one-line message shape as the CPU backend.
//===----------------------------------------------------------------------===//
#include "cuda/CudaExecutor.h"
#include "cuda/CudaKernels.h"
#include "cuda/CudnnAttention.h"
#include "cuda/Fp8Cuda.h"
#include "cuda/StreamCommunicator.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/AdamWGroups.h"
#include "loom/runtime/GemmStaging.h"
#include "loom/runtime/RoundedCopies.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace loom::rt {

using namespace cuda;

namespace {

constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

/// One scratch block serves every instruction: the hungriest one's size.
size_t scratchBytesOf(const Program &p) {
  size_t scratch = 256;
  for (const Instr &I : p.instrs) {
    scratch = std::max<size_t>({scratch, lossScratchBytes(p, I), attentionScratchBytes(p, I),
                                normScratchBytes(p, I), cudnnAttentionScratchEstimate(p, I),
                                size_t(planGemmStaging(p, I).scratchBytes())});
    if (I.op == OpCode::MatMul && matMulSumsB(I)) // a bias gradient's partial sums
      scratch = std::max(scratch, columnSumsScratchBytes(p.buffers[I.in[1]].shape[0],
                                                         p.buffers[I.in[1]].shape[1]));
  }
  return scratch;
}

std::string cudaErr(const char *what, cudaError_t e) {
  return cat(what, ": ", cudaGetErrorString(e));
}

bool isOneOf(DType t, std::initializer_list<DType> ts) {
  for (DType u : ts)
    if (t == u) return true;
  return false;
}

void launch(const CudaCall &c, CudaContext &ctx, void *gemmWorkspace) {
  FusedAmaxScope amax(c, ctx); // fp8 amax outputs (Fp8Cuda.h), if the instruction has any
  switch (c.instr->op) {
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::Pow: case OpCode::Max: case OpCode::Min:
    return launchBinary(c, ctx);
  case OpCode::Neg: case OpCode::Sqrt: case OpCode::Rsqrt: case OpCode::Reciprocal:
  case OpCode::Exp: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Silu:
  case OpCode::GeluTanh: case OpCode::GeluErf: case OpCode::Cos: case OpCode::Sin:
  case OpCode::Log: case OpCode::Relu: case OpCode::Erf: case OpCode::Softplus:
    return launchUnary(c, ctx);
  case OpCode::Where: return launchWhere(c, ctx);
  case OpCode::Cast: return launchCast(c, ctx);
  case OpCode::MatMul: return ctx.gemms->launch(c, ctx, gemmWorkspace);
  case OpCode::Reduce: return launchReduce(c, ctx);
  case OpCode::SumSquares: return launchSumSquares(c, ctx);
  case OpCode::GlobalSumSquares: return launchGlobalSumSquares(c, ctx);
  case OpCode::Softmax: return launchSoftmax(c, ctx);
  case OpCode::RmsNorm: return launchRmsNorm(c, ctx);
  case OpCode::AddRmsNorm: return launchAddRmsNorm(c, ctx);
  case OpCode::LayerNorm: return launchLayerNorm(c, ctx);
  case OpCode::Attention: return launchAttention(c, ctx);
  case OpCode::Embedding: return launchEmbedding(c, ctx);
  case OpCode::Rotary: return launchRotary(c, ctx);
  case OpCode::Transpose: return launchTranspose(c, ctx);
  case OpCode::Slice: return launchSlice(c, ctx);
  case OpCode::Concat: return launchConcat(c, ctx);
  case OpCode::Split: return launchSplit(c, ctx);
  case OpCode::Expand: return launchExpand(c, ctx);
  case OpCode::CrossEntropy: return launchCrossEntropy(c, ctx);
  case OpCode::EmbeddingGrad: return launchEmbeddingGrad(c, ctx);
  case OpCode::RmsNormGrad: return launchRmsNormGrad(c, ctx);
  case OpCode::LayerNormGrad: return launchLayerNormGrad(c, ctx);
  case OpCode::AttentionGrad: return launchAttentionGrad(c, ctx);
  case OpCode::RotaryGrad: return launchRotaryGrad(c, ctx);
  case OpCode::ActivationGrad: return launchActivationGrad(c, ctx);
  case OpCode::SwiGlu: return launchSwiGlu(c, ctx);
  case OpCode::SwiGluGrad: return launchSwiGluGrad(c, ctx);
  case OpCode::SoftmaxGrad: return launchSoftmaxGrad(c, ctx);
  case OpCode::CrossEntropyGrad: return launchCrossEntropyGrad(c, ctx);
  case OpCode::SliceGrad: return launchSliceGrad(c, ctx);
  case OpCode::AdamW: return launchAdamW(c, ctx);
  case OpCode::ShardSlice: return launchShardSlice(c, ctx);
  case OpCode::VocabShardEmbedding: return launchVocabShardEmbedding(c, ctx);
  case OpCode::VocabShardEmbeddingGrad: return launchVocabShardEmbeddingGrad(c, ctx);
  case OpCode::VocabShardCrossEntropy: return launchVocabShardCrossEntropy(c, ctx);
  case OpCode::VocabShardCrossEntropyGrad: return launchVocabShardCrossEntropyGrad(c, ctx);
  case OpCode::AllReduce: case OpCode::AllGather: case OpCode::ReduceScatter:
  case OpCode::AllToAll: case OpCode::CollectivePermute:
    return; // CudaExecutor::run enqueues these through its communicator
  case OpCode::Fp8Scale: return launchFp8Scale(c, ctx);
  case OpCode::Fp8Amax: return launchFp8Amax(c, ctx);
  case OpCode::Fp8Cast: return launchFp8Cast(c, ctx);
  case OpCode::ScaledMatMul: return ctx.fp8Gemms->launch(c, ctx);
  }
}

class CudaExecutor : public Executor {
public:
  CudaExecutor(std::shared_ptr<const Program> p, StreamCommunicator *comm, int rank)
      : Executor(std::move(p)), comm_(comm), rank_(rank) {
    ctx_.rank = rank;
  }

  ~CudaExecutor() override {
    printGraphTiming();
    for (cudaEvent_t e : graphEvents_)
      if (e) cudaEventDestroy(e);
    if (profile_)
      printProfile();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (graphExec_) cudaGraphExecDestroy(graphExec_);
    if (graph_) cudaGraphDestroy(graph_);
    gemms_.reset();
    fp8Gemms_.reset();
    cudnn_.reset();
    for (void *ptr : {arena_, constants_, scratch_, workspace_, snapshot_,
                      static_cast<void *>(error_)})
      if (ptr) cudaFree(ptr);
    if (snapshotDone_) cudaEventDestroy(snapshotDone_);
    if (snapshotStream_) cudaStreamDestroy(snapshotStream_);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  }

  bool init(std::string &err) {
    const Program &p = *program_;
    cudaError_t e;
    if ((e = cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking)) != cudaSuccess)
      return fail(err, cudaErr("cannot create a CUDA stream", e));
    size_t arenaBytes = std::max<size_t>(p.arenaBytes, 1);
    if ((e = cudaMalloc(&arena_, arenaBytes)) != cudaSuccess)
      return fail(err, cat("cannot allocate the ", p.arenaBytes, "-byte arena on the GPU: ",
                           cudaGetErrorString(e)));
    cudaMemset(arena_, 0xff, arenaBytes);
    if (!p.constants.empty()) {
      if ((e = cudaMalloc(&constants_, p.constants.size())) != cudaSuccess)
        return fail(err, cudaErr("cannot allocate the constants on the GPU", e));
      cudaMemcpy(constants_, p.constants.data(), p.constants.size(), cudaMemcpyHostToDevice);
    }
    size_t scratch = scratchBytesOf(p);
    // Attention on cuDNN's fused engines where it can run: plans (and
    // their kernels) are built now, so the graph capture only enqueues.
    cudnnPlans_.assign(p.instrs.size(), -1);
    bool attention = std::any_of(p.instrs.begin(), p.instrs.end(), [](const Instr &I) {
      return I.op == OpCode::Attention || I.op == OpCode::AttentionGrad;
    });
    std::string noCudnn;
    if (attention && (cudnn_ = CudnnAttention::create(noCudnn))) {
      std::set<std::string> said; // once per reason, not once per layer
      for (size_t i = 0; i < p.instrs.size(); ++i) {
        size_t bytes = 0;
        std::string refused;
        cudnnPlans_[i] = planCudnnAttention(p, int(i), *cudnn_, bytes, refused);
        scratch = std::max(scratch, bytes);
        // Not an error: loom's kernels run it; a user timing attention
        // should know which implementation ran.
        if (!refused.empty() && said.insert(refused).second)
          std::fprintf(stderr, "loom: %s keeps loom's attention kernels: %s\n",
                       opcodeName(p.instrs[i].op), refused.c_str());
      }
      ctx_.cudnn = cudnn_.get();
    } else if (attention && noCudnn != "LOOM_CUDNN=0") {
      // Not an error (loom's kernels run attention), but a user timing it
      // should know: cuDNN's engines are several times faster on Hopper.
      std::fprintf(stderr, "loom: attention runs on loom's kernels, not cuDNN: %s\n",
                   noCudnn.c_str());
    }
    ctx_.cudnnPlans = &cudnnPlans_;
    if ((e = cudaMalloc(&scratch_, scratch)) != cudaSuccess)
      return fail(err, cudaErr("cannot allocate GPU scratch", e));
    ctx_.scratch = scratch_;
    ctx_.scratchBytes = scratch;
    if ((e = cudaMalloc(&workspace_, kGemmWorkspaceBytes)) != cudaSuccess ||
        (e = cudaMalloc(&error_, sizeof(DeviceError))) != cudaSuccess)
      return fail(err, cudaErr("cannot allocate GPU workspace", e));
    clearError();
    ctx_.error = error_;
    // The empty arena holds the operands cuBLASLt's candidate algorithms
    // are timed on (MatMul.cpp), so choosing them costs no memory; it is
    // 0xff-filled again once planning ends, below.
    gemms_ = GemmCache::create(p, kGemmWorkspaceBytes, err, arena_, arenaBytes);
    if (!gemms_)
      return false;
    ctx_.gemms = gemms_.get();
    ctx_.workspace = workspace_;
    subGemms_.resize(p.instrs.size());
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (!planAttentionGemms(p, int(i), *gemms_, subGemms_[i], err)) {
        err = cat("instr ", i, " (", opcodeName(p.instrs[i].op), "): ", err);
        return false;
      }
    ctx_.subGemms = &subGemms_;
    gemms_->finishPlanning();
    cudaMemset(arena_, 0xff, arenaBytes);
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      CudaCall call;
      call.instr = &p.instrs[i];
      call.index = int(i);
      for (uint32_t id : p.instrs[i].in) call.in.push_back(tensor(id));
      for (uint32_t id : p.instrs[i].out) call.out.push_back(tensor(id));
      calls_.push_back(std::move(call));
    }
    // fp8 GEMMs are planned on the buffers' addresses (scale pointers).
    fp8Gemms_ = Fp8Gemms::create(p, calls_, ctx_, kGemmWorkspaceBytes, err);
    if (!fp8Gemms_)
      return false;
    ctx_.fp8Gemms = fp8Gemms_.get();
    if (comm_) {
      if (!comm_->prepare(p, rank_, arena_, err))
        return false;
      planCollectiveJoins();
    }
    if (!planAdamWGroups(err))
      return false;
    const char *g = std::getenv("LOOM_CUDA_GRAPH");
    const char *prof = std::getenv("LOOM_CUDA_PROFILE");
    profile_ = prof && std::strcmp(prof, "1") == 0;
    if (const char *from = std::getenv("LOOM_CUDA_PROFILE_FROM"))
      profileFrom_ = std::max(0, std::atoi(from));
    // Collectives launch directly: NCCL calls on a non-blocking
    // communicator may return before they are enqueued, which a graph
    // capture cannot wait for (and capture of them is untested).
    useGraph_ = !(g && std::strcmp(g, "0") == 0) && !profile_ && !comm_;
    const char *gt = std::getenv("LOOM_CUDA_GRAPH_TIMING");
    if (useGraph_ && gt && std::strcmp(gt, "1") == 0)
      for (cudaEvent_t &ev : graphEvents_) cudaEventCreate(&ev);
    if (profile_) {
      events_.resize(2 * calls_.size());
      for (cudaEvent_t &ev : events_) cudaEventCreate(&ev);
      opMs_.assign(calls_.size(), 0.0);
    }
    allocated_.arena = arenaBytes;
    allocated_.constants = p.constants.size();
    allocated_.workspace = scratch + kGemmWorkspaceBytes + adamwGroupBytes_;
    allocated_.communication = comm_ ? comm_->deviceBytes(rank_) : 0;
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
      return fail(err, cudaErr("setting up the CUDA executor", e));
    return true;
  }

  DeviceMemory deviceMemory() const override { return allocated_; }
  std::string deviceName() const override {
    cudaDeviceProp prop{};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
      return "cuda";
    return prop.name;
  }

  bool setInput(size_t index, const void *data, size_t bytes, std::string &err) override {
    if (!checkIo(program_->inputs, "input", index, bytes, err))
      return false;
    if (!bytes) return true;
    // Default, not HostToDevice: a pipeline stage passes activations that
    // are already on the device (PipelineBuffers.h); UVA tells them apart.
    cudaError_t e = cudaMemcpyAsync(tensor(program_->inputs[index]).data, data, bytes,
                                    cudaMemcpyDefault, ctx_.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx_.stream);
    staleCopies_.inputSet(index);
    return e == cudaSuccess || fail(err, cudaErr("copying an input to the GPU", e));
  }

  bool getOutput(size_t index, void *data, size_t bytes, std::string &err) override {
    if (!checkIo(program_->outputs, "output", index, bytes, err))
      return false;
    if (!bytes) return true;
    cudaError_t e = cudaMemcpyAsync(data, tensor(program_->outputs[index]).data, bytes,
                                    cudaMemcpyDefault, ctx_.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx_.stream);
    return e == cudaSuccess || fail(err, cudaErr("copying an output from the GPU", e));
  }

  // The state copy for a checkpoint written in the background: device to
  // device on the executor's stream (HBM bandwidth: ~10 ms for a 1B
  // model's 15 GB of fp32 weights and moments), queued before the next
  // run, which may then overwrite the originals; the host copy goes over
  // PCIe on a stream of its own, from the checkpoint writer's thread,
  // while the next steps run.
  bool snapshotOutputs(const std::vector<size_t> &indices, std::string &err) override {
    std::vector<std::pair<uint64_t, uint64_t>> entries; // offset, bytes
    uint64_t total = 0;
    for (size_t idx : indices) {
      if (idx >= program_->outputs.size())
        return fail(err, cat("snapshot of output ", idx, ", but the program has ",
                             program_->outputs.size()));
      uint64_t bytes = program_->buffers[program_->outputs[idx]].bytes;
      entries.push_back({total, bytes});
      total += (bytes + 255) / 256 * 256;
    }
    cudaError_t e = cudaSuccess;
    if (total > snapshotCapacity_) {
      if (snapshot_ && (e = cudaFree(snapshot_)) != cudaSuccess)
        return fail(err, cudaErr("freeing the checkpoint snapshot", e));
      snapshot_ = nullptr;
      snapshotCapacity_ = 0;
      if ((e = cudaMalloc(&snapshot_, total)) != cudaSuccess) {
        snapshot_ = nullptr;
        cudaGetLastError();
        return fail(err, cat("no room on the GPU for a ", double(total) / double(1ull << 30),
                             " GiB copy of the training state (", cudaGetErrorString(e), ")"));
      }
      snapshotCapacity_ = total;
    }
    if (!snapshotStream_ &&
        ((e = cudaStreamCreateWithFlags(&snapshotStream_, cudaStreamNonBlocking)) != cudaSuccess ||
         (e = cudaEventCreateWithFlags(&snapshotDone_, cudaEventDisableTiming)) != cudaSuccess))
      return fail(err, cudaErr("creating the snapshot stream", e));
    cudaGetDevice(&snapshotDevice_);
    for (size_t k = 0; k < indices.size() && e == cudaSuccess; ++k)
      e = cudaMemcpyAsync(static_cast<uint8_t *>(snapshot_) + entries[k].first,
                          tensor(program_->outputs[indices[k]]).data, entries[k].second,
                          cudaMemcpyDeviceToDevice, ctx_.stream);
    if (e == cudaSuccess)
      e = cudaEventRecord(snapshotDone_, ctx_.stream);
    if (e != cudaSuccess)
      return fail(err, cudaErr("copying the training state aside", e));
    snapshotEntries_ = std::move(entries);
    snapshotBytes_ = total;
    return true;
  }

  bool readSnapshot(size_t k, void *data, size_t bytes, std::string &err) override {
    if (k >= snapshotEntries_.size() || snapshotEntries_[k].second != bytes)
      return fail(err, cat("snapshot entry ", k, " does not hold ", bytes, " bytes"));
    cudaError_t e = cudaSetDevice(snapshotDevice_); // the writer's thread
    if (e == cudaSuccess) e = cudaStreamWaitEvent(snapshotStream_, snapshotDone_, 0);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(data, static_cast<uint8_t *>(snapshot_) + snapshotEntries_[k].first,
                          bytes, cudaMemcpyDeviceToHost, snapshotStream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(snapshotStream_);
    return e == cudaSuccess || fail(err, cudaErr("copying the state snapshot to the host", e));
  }

  bool run(std::string &err) override {
    cudaError_t e = cudaSuccess;
    // Outside the captured graph: only after the caller set a parameter.
    for (const RoundedCopy &r : staleCopies_.take()) {
      if (r.kind == RoundedCopy::Amax)
        launchTensorAmax(tensor(r.input), tensor(r.copy), ctx_);
      else
        launchRoundedCopy(tensor(r.input), tensor(r.copy), ctx_);
    }
    if (!useGraph_) {
      for (const CudaCall &c : calls_) {
        std::string why;
        size_t i = size_t(c.index);
        // A collective still in flight whose input or output this
        // instruction touches must have finished first.
        if (comm_ && joinBefore_[i] >= 0 && !comm_->join(rank_, joinBefore_[i], ctx_.stream, why))
          return fail(err, cat("instr ", c.index, " (", opcodeName(c.instr->op), "): ", why));
        if (profile_) cudaEventRecord(events_[2 * i], ctx_.stream);
        if (isCollectiveOp(c.instr->op) &&
            !comm_->enqueue(rank_, collectiveIndex_[i], *c.instr, c.in[0].shape(),
                            c.out[0].shape(), c.in[0].as<float>(), c.out[0].as<float>(),
                            ctx_.stream, why))
          return fail(err, cat("instr ", c.index, " (", opcodeName(c.instr->op), "): ", why));
        issue(c);
        if (profile_) cudaEventRecord(events_[2 * size_t(c.index) + 1], ctx_.stream);
        if ((e = cudaGetLastError()) != cudaSuccess)
          return fail(err, cat("instr ", c.index, " (", opcodeName(c.instr->op), "): ",
                               cudaGetErrorString(e)));
      }
    } else {
      if (!graphExec_ && !capture(err))
        return false;
      // The start event of this replay; last replay's end is the other
      // slot of the pair, so the idle gap reads as end -> start.
      cudaEvent_t *ev = graphEvents_[0] ? &graphEvents_[2 * (graphRuns_ & 1)] : nullptr;
      if (ev) cudaEventRecord(ev[0], ctx_.stream);
      e = cudaGraphLaunch(graphExec_, ctx_.stream);
      if (ev) cudaEventRecord(ev[1], ctx_.stream);
    }
    // With collectives in flight, wait through the communicator: it
    // notices a dead or hung peer where a stream synchronize never returns.
    if (e == cudaSuccess && comm_ && !comm_->wait(rank_, ctx_.stream, err))
      return false;
    DeviceError de{};
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(&de, error_, sizeof de, cudaMemcpyDeviceToHost, ctx_.stream);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(ctx_.stream);
    if (e != cudaSuccess)
      return fail(err, cudaErr("running the program on the GPU", e));
    if (useGraph_ && graphEvents_[0]) {
      const cudaEvent_t *ev = &graphEvents_[2 * (graphRuns_ & 1)];
      const cudaEvent_t *last = &graphEvents_[2 * ((graphRuns_ + 1) & 1)];
      float ms = 0, gap = 0;
      cudaEventElapsedTime(&ms, ev[0], ev[1]);
      if (graphRuns_ >= std::max(1, profileFrom_)) { // run 0 has no gap before it
        cudaEventElapsedTime(&gap, last[1], ev[0]);
        graphMs_ += ms;
        graphGapMs_ += gap;
        ++graphTimedRuns_;
      }
      ++graphRuns_;
    }
    if (profile_ && runsSeen_++ >= profileFrom_) {
      for (size_t i = 0; i < calls_.size(); ++i) {
        float ms = 0;
        cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]);
        opMs_[i] += ms;
      }
      ++profiledRuns_;
    }
    if (de.instr >= 0) {
      clearError();
      const char *what = de.what == 0 ? "id" : "target";
      const char *where = de.what == 0 ? "position" : "row";
      return fail(err, cat("instr ", de.instr, " (", opcodeName(program_->instrs[size_t(de.instr)].op),
                           "): ", what, " ", de.value, " at ", where, " ", de.at,
                           " out of range [0, ", de.bound, ")"));
    }
    return true;
  }

private:
  static bool fail(std::string &err, std::string msg) {
    err = std::move(msg);
    return false;
  }

  /// Small AdamWs as one launch per group (AdamWGroups.h). Not with
  /// collectives (smallAdamWGroups leaves those programs alone: their joins
  /// are planned per instruction). LOOM_GROUP_ADAMW=0 launches each AdamW
  /// on its own: the A/B switch.
  bool planAdamWGroups(std::string &err) {
    adamwGroupOf_.assign(calls_.size(), kUngrouped);
    const char *env = std::getenv("LOOM_GROUP_ADAMW");
    if (env && std::strcmp(env, "0") == 0)
      return true;
    for (const AdamWGroup &g : smallAdamWGroups(*program_)) {
      std::vector<const CudaCall *> members;
      for (size_t i : g.members) {
        members.push_back(&calls_[i]);
        adamwGroupOf_[i] = kLaunchedWithGroup;
      }
      auto launch = AdamWGroupLaunch::create(members, err);
      if (!launch)
        return false;
      adamwGroupBytes_ += launch->deviceBytes();
      adamwGroupOf_[g.members.front()] = int(adamwGroups_.size());
      adamwGroupedInstrs_ += int(g.members.size());
      adamwGroups_.push_back(std::move(launch));
    }
    return true;
  }

  /// Launches call `c`: a group's launch at its first member, nothing at
  /// the others, else its own kernels.
  void issue(const CudaCall &c) {
    int g = adamwGroupOf_.empty() ? kUngrouped : adamwGroupOf_[size_t(c.index)];
    if (g == kLaunchedWithGroup)
      return;
    if (g >= 0)
      return adamwGroups_[size_t(g)]->launch(ctx_);
    launch(c, ctx_, workspace_);
  }

  bool capture(std::string &err) {
    cudaError_t e = cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
      return fail(err, cudaErr("starting the CUDA graph capture", e));
    for (const CudaCall &c : calls_) issue(c);
    e = cudaStreamEndCapture(ctx_.stream, &graph_);
    if (e == cudaSuccess)
      e = cudaGraphInstantiate(&graphExec_, graph_, 0);
    if (e != cudaSuccess) {
      cudaGetLastError(); // clear the sticky launch error, if any
      return fail(err, cudaErr("capturing the program into a CUDA graph", e));
    }
    return true;
  }

  /// LOOM_CUDA_GRAPH_TIMING: device time per replay and the idle time
  /// between replays (runs after the first, from LOOM_CUDA_PROFILE_FROM on).
  void printGraphTiming() const {
    if (graphTimedRuns_ == 0) return;
    double n = double(graphTimedRuns_);
    std::fprintf(stderr, "loom cuda graph timing: %d replays (from run %d), %.3f ms per replay on the device, "
                 "%.3f ms idle before each\n", graphTimedRuns_, std::max(1, profileFrom_),
                 graphMs_ / n, graphGapMs_ / n);
  }

  /// Time per opcode over the profiled runs, largest first; GEMM FLOPs are
  /// 2 M N K per product, from the buffer shapes.
  void printProfile() const {
    if (profiledRuns_ == 0) return;
    std::map<std::string, std::pair<double, int>> byOp; // ms, instructions
    double total = 0, gemmFlops = 0, gemmMs = 0;
    for (size_t i = 0; i < calls_.size(); ++i) {
      const Instr &I = *calls_[i].instr;
      bool gemm = I.op == OpCode::MatMul || I.op == OpCode::ScaledMatMul;
      auto &slot = byOp[std::string(opcodeName(I.op)) +
                        (gemm ? std::string(" ") + dtypeName(program_->buffers[I.out[0]].dtype) : "")];
      slot.first += opMs_[i];
      slot.second += 1;
      total += opMs_[i];
      if (gemm) {
        const BufferDesc &a = program_->buffers[I.in[0]], &o = program_->buffers[I.out[0]];
        int64_t k = I.ints[0] ? a.shape[a.shape.size() - 2] : a.shape.back();
        gemmFlops += 2.0 * double(o.numElements()) * double(k);
        gemmMs += opMs_[i];
      }
    }
    std::vector<std::pair<double, std::string>> rows;
    for (const auto &[name, v] : byOp) rows.push_back({v.first, name});
    std::sort(rows.rbegin(), rows.rend());
    double runs = double(profiledRuns_);
    std::fprintf(stderr, "loom cuda profile: %d runs (from run %d), %.3f ms per run in kernels, device memory %.2f GiB\n",
                 profiledRuns_, profileFrom_, total / runs, double(allocated_.total()) / double(1ull << 30));
    if (cudnn_)
      std::fprintf(stderr, "  attention: %d instructions on cuDNN %zu's fused engines, the rest on loom's\n",
                   int(std::count_if(cudnnPlans_.begin(), cudnnPlans_.end(), [](int id) { return id >= 0; })),
                   cudnn_->version());
    if (!adamwGroups_.empty())
      std::fprintf(stderr, "  adamw: %d small instructions in %zu grouped launches, timed at each group's first\n",
                   adamwGroupedInstrs_, adamwGroups_.size());
    std::fprintf(stderr, "  %-22s %6s %12s %7s\n", "opcode", "instrs", "ms/run", "share");
    for (const auto &[ms, name] : rows)
      std::fprintf(stderr, "  %-22s %6d %12.3f %6.1f%%\n", name.c_str(), byOp.at(name).second,
                   ms / runs, total > 0 ? 100.0 * ms / total : 0.0);
    if (gemmMs > 0)
      std::fprintf(stderr, "  GEMMs: %.1f TFLOP/s achieved (%.2f TFLOP per run)\n",
                   gemmFlops / (gemmMs / runs * 1e-3) / 1e12, gemmFlops / 1e12);
    printGemmShapes(runs);
    printKernelShapes(runs);
  }

  /// The other instructions grouped by opcode and operand shapes and
  /// dtypes, costliest first, with the bandwidth their operands' bytes
  /// imply (each read and written once): the opcode table's slow class is
  /// often one shape (a per-head norm, a bias of few columns) among fast
  /// ones, which only this view tells apart.
  void printKernelShapes(double runs) const {
    struct Group { double ms = 0, bytes = 0; int n = 0; };
    std::map<std::string, Group> byShape;
    for (size_t i = 0; i < calls_.size(); ++i) {
      const Instr &I = *calls_[i].instr;
      if (I.op == OpCode::MatMul || I.op == OpCode::ScaledMatMul)
        continue;
      double bytes = 0;
      auto operands = [&](const std::vector<uint32_t> &ids) { // "bf16[8,1024], f32[1024]"
        std::string list;
        for (uint32_t id : ids) {
          const BufferDesc &b = program_->buffers[id];
          list += cat(list.empty() ? "" : ", ", dtypeName(b.dtype), shapeStr(b.shape));
          bytes += double(b.bytes);
        }
        return list;
      };
      std::string key = cat(opcodeName(I.op), " ", operands(I.in), " -> ", operands(I.out));
      Group &g = byShape[key];
      g.ms += opMs_[i];
      g.bytes += bytes;
      g.n += 1;
    }
    std::vector<std::pair<double, std::string>> rows;
    for (const auto &[key, g] : byShape) rows.push_back({g.ms, key});
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "  %6s %10s %8s  %s\n", "instrs", "ms/run", "GB/s", "other kernels by operands");
    for (size_t r = 0; r < rows.size() && r < 40; ++r) {
      const Group &g = byShape.at(rows[r].second);
      std::fprintf(stderr, "  %6d %10.3f %8.0f  %s\n", g.n, g.ms / runs,
                   g.ms > 0 ? g.bytes / (g.ms / runs * 1e-3) / 1e9 : 0.0,
                   rows[r].second.c_str());
    }
  }

  /// The GEMMs grouped by problem (M x N x K, transposes, operand and
  /// result dtypes, a bias), costliest first: which shapes run below the
  /// tensor cores' rate (an unaligned leading dimension, a thin K) is
  /// what the opcode table cannot say.
  void printGemmShapes(double runs) const {
    struct Shape { double ms = 0, flops = 0; int n = 0; };
    std::map<std::string, Shape> byShape;
    for (size_t i = 0; i < calls_.size(); ++i) {
      const Instr &I = *calls_[i].instr;
      if (I.op != OpCode::MatMul && I.op != OpCode::ScaledMatMul)
        continue;
      const BufferDesc &a = program_->buffers[I.in[0]], &b = program_->buffers[I.in[1]],
                       &o = program_->buffers[I.out[0]];
      int64_t k = I.ints[0] ? a.shape[a.shape.size() - 2] : a.shape.back();
      int64_t n = o.shape.back(), m = o.numElements() / std::max<int64_t>(n, 1);
      std::string third = matMulThirdInput(*program_, I);
      std::string key = cat(m, "x", n, "x", k, I.ints[0] ? " tA" : "", I.ints[1] ? " tB" : "",
                            " ", dtypeName(a.dtype), ",", dtypeName(b.dtype), "->",
                            dtypeName(o.dtype), third.empty() ? "" : " +" + third);
      Shape &s = byShape[key];
      s.ms += opMs_[i];
      s.flops += 2.0 * double(o.numElements()) * double(k); // per run
      s.n += 1;
    }
    std::vector<std::pair<double, std::string>> rows;
    for (const auto &[key, s] : byShape) rows.push_back({s.ms, key});
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "  %-44s %6s %10s %9s\n", "GEMM (M x N x K)", "instrs", "ms/run", "TFLOP/s");
    for (size_t r = 0; r < rows.size() && r < 16; ++r) {
      const Shape &s = byShape.at(rows[r].second);
      std::fprintf(stderr, "  %-44s %6d %10.3f %9.1f\n", rows[r].second.c_str(), s.n, s.ms / runs,
                   s.ms > 0 ? s.flops / (s.ms / runs * 1e-3) / 1e12 : 0.0);
    }
  }

  void clearError() {
    DeviceError none{-1, 0, 0, 0, 0};
    cudaMemcpy(error_, &none, sizeof none, cudaMemcpyHostToDevice);
  }

  DevTensor tensor(uint32_t id) const {
    const BufferDesc &b = program_->buffers[id];
    auto *base = static_cast<uint8_t *>(b.kind == BufferKind::Constant ? constants_ : arena_);
    return DevTensor{base + b.offset, &b};
  }

  bool checkIo(const std::vector<uint32_t> &ids, const char *what, size_t index, size_t bytes,
               std::string &err) const {
    if (index >= ids.size())
      return fail(err, cat(what, " index ", index, " out of range (the program has ", ids.size(),
                           " ", what, "s)"));
    const BufferDesc &b = program_->buffers[ids[index]];
    if (bytes != b.bytes)
      return fail(err, cat(what, " ", index, " '", b.name, "' ", shapeStr(b.shape), " ",
                           dtypeName(b.dtype), " has ", b.bytes, " bytes, not ", bytes));
    return true;
  }

  /// For every instruction, the last collective that must have finished
  /// before it runs (-1: none more than already joined): the first
  /// instruction after a collective that reads its output or writes its
  /// input or output (arena byte ranges, so reuse by a later buffer
  /// counts), and a later collective that stages through the same
  /// buffer. Joins are cumulative, so the list only grows.
  void planCollectiveJoins() {
    const Program &p = *program_;
    std::vector<uint32_t> base = viewBases(p);
    struct Range {
      uint64_t from, to;
    };
    auto range = [&](uint32_t id) -> Range {
      const BufferDesc &b = p.buffers[base[id]];
      if (b.kind == BufferKind::Constant) return {0, 0};
      return {b.offset, b.offset + p.buffers[id].bytes};
    };
    auto overlaps = [](Range a, Range b) { return a.from < b.to && b.from < a.to; };
    size_t n = p.instrs.size();
    joinBefore_.assign(n, -1);
    collectiveIndex_.assign(n, -1);
    int k = 0;
    for (size_t i = 0; i < n; ++i)
      if (isCollectiveOp(p.instrs[i].op)) collectiveIndex_[i] = k++;
    for (size_t c = 0; c < n; ++c) {
      const Instr &C = p.instrs[c];
      if (!isCollectiveOp(C.op)) continue;
      Range in = range(C.in[0]), out = range(C.out[0]);
      bool staged = collectiveNeedsStaging(p, C);
      size_t at = n; // the end of the run (wait() joins the rest)
      for (size_t i = c + 1; i < n && at == n; ++i) {
        const Instr &I = p.instrs[i];
        bool touch = staged && isCollectiveOp(I.op) && collectiveNeedsStaging(p, I);
        for (uint32_t id : I.in) touch |= overlaps(range(id), out);
        for (uint32_t id : I.out) touch |= overlaps(range(id), in) || overlaps(range(id), out);
        if (touch) at = i;
      }
      if (at < n) joinBefore_[at] = std::max(joinBefore_[at], collectiveIndex_[c]);
    }
    // Joins are cumulative: drop those an earlier one already covers.
    int joined = -1;
    for (size_t i = 0; i < n; ++i) {
      if (joinBefore_[i] <= joined) joinBefore_[i] = -1;
      else joined = joinBefore_[i];
    }
  }

  StreamCommunicator *comm_ = nullptr; // collectives (null: a one-GPU program)
  int rank_ = 0;
  std::vector<int> joinBefore_, collectiveIndex_; // per instruction
  CudaContext ctx_;
  void *arena_ = nullptr, *constants_ = nullptr, *scratch_ = nullptr, *workspace_ = nullptr;
  DeviceError *error_ = nullptr;
  std::unique_ptr<GemmCache> gemms_;
  std::unique_ptr<Fp8Gemms> fp8Gemms_;
  std::vector<std::vector<int>> subGemms_; // per instruction: GEMMs it runs inside
  std::vector<CudaCall> calls_;
  bool useGraph_ = true;
  StaleRoundedCopies staleCopies_{*program_}; // AdamW's bf16 copies and amaxes to refresh
  // Per instruction: its small-AdamW group's index where the group
  // launches, kLaunchedWithGroup at the group's other members.
  static constexpr int kUngrouped = -1, kLaunchedWithGroup = -2;
  std::vector<int> adamwGroupOf_;
  std::vector<std::unique_ptr<AdamWGroupLaunch>> adamwGroups_;
  int adamwGroupedInstrs_ = 0;
  size_t adamwGroupBytes_ = 0; // their device tables
  std::unique_ptr<CudnnAttention> cudnn_;
  std::vector<int> cudnnPlans_;
  bool profile_ = false;
  std::vector<cudaEvent_t> events_; // start/stop per instruction (profiling)
  std::vector<double> opMs_;        // summed over profiled runs
  // LOOM_CUDA_GRAPH_TIMING: start/end events of the last two replays.
  cudaEvent_t graphEvents_[4] = {};
  int graphRuns_ = 0, graphTimedRuns_ = 0;
  double graphMs_ = 0, graphGapMs_ = 0;
  int profiledRuns_ = 0;
  int profileFrom_ = 0, runsSeen_ = 0; // LOOM_CUDA_PROFILE_FROM
  DeviceMemory allocated_;
  // snapshotOutputs(): one allocation, grown on demand and kept for the
  // next checkpoint; each entry's offset and bytes.
  void *snapshot_ = nullptr;
  uint64_t snapshotCapacity_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> snapshotEntries_;
  cudaStream_t snapshotStream_ = nullptr;
  cudaEvent_t snapshotDone_ = nullptr;
  int snapshotDevice_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graphExec_ = nullptr;
};

} // namespace

std::string cuda::cudaSupports(const Program &p, const Instr &I) {
  auto dt = [&](uint32_t id) { return p.buffers[id].dtype; };
  auto need = [&](uint32_t id, std::initializer_list<DType> ts, const char *which) -> std::string {
    if (isOneOf(dt(id), ts)) return "";
    std::string names;
    for (DType t : ts) names += std::string(names.empty() ? "" : "/") + dtypeName(t);
    return cat("the cuda backend supports ", which, " of ", names, ", not ", dtypeName(dt(id)));
  };
  for (uint32_t id : I.out)
    if (p.buffers[id].shape.size() > size_t(8))
      return cat("the cuda backend supports tensors of rank <= 8, not ", p.buffers[id].shape.size());
  for (uint32_t id : I.in)
    if (p.buffers[id].shape.size() > size_t(8))
      return cat("the cuda backend supports tensors of rank <= 8, not ", p.buffers[id].shape.size());
  if (I.op == OpCode::Attention || I.op == OpCode::AttentionGrad) {
    const BufferDesc &q = p.buffers[I.in[0]], &v = p.buffers[I.in[2]];
    if (q.shape[3] > 256 || v.shape[3] > 256)
      return cat("the cuda attention kernels support head dims <= 256, not ", q.shape[3]);
  }
  // bf16 storage of an f32 computation (FloatIn/FloatOut in the kernels;
  // attention's in AttentionKernels.cu); validate() checked that the other
  // float operands are f32.
  if (usesBf16Storage(p, I))
    return "";
  switch (I.op) {
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::Pow: case OpCode::Max: case OpCode::Min:
    return need(I.out[0], {DType::F32, DType::F64, DType::I64, DType::I32}, "operands");
  case OpCode::MatMul:
    return need(I.out[0], {DType::F32, DType::F64, DType::BF16}, "operands");
  case OpCode::Attention: case OpCode::AttentionGrad:
    return need(I.in[0], {DType::F32}, "operands");
  case OpCode::Neg: case OpCode::Sqrt: case OpCode::Rsqrt: case OpCode::Reciprocal:
  case OpCode::Exp: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Silu:
  case OpCode::GeluTanh: case OpCode::GeluErf: case OpCode::Cos: case OpCode::Sin:
  case OpCode::Log: case OpCode::Reduce: case OpCode::SumSquares: case OpCode::Softmax:
  case OpCode::GlobalSumSquares:
  case OpCode::Relu: case OpCode::Erf: case OpCode::Softplus:
  case OpCode::RmsNorm: case OpCode::LayerNorm: case OpCode::Rotary: case OpCode::RmsNormGrad:
  case OpCode::AddRmsNorm:
  case OpCode::LayerNormGrad: case OpCode::RotaryGrad: case OpCode::ActivationGrad:
  case OpCode::SoftmaxGrad: case OpCode::AdamW: case OpCode::EmbeddingGrad:
  case OpCode::SwiGlu: case OpCode::SwiGluGrad:
    return need(I.in[0], {DType::F32}, "operands");
  case OpCode::CrossEntropy:
    if (std::string e = need(I.in[0], {DType::F32}, "logits"); !e.empty()) return e;
    return need(I.out[0], {DType::F32}, "the loss");
  case OpCode::CrossEntropyGrad:
    if (std::string e = need(I.in[0], {DType::F32}, "logits"); !e.empty()) return e;
    if (I.out.size() == 2)
      if (std::string e = need(I.out[1], {DType::F32}, "the loss"); !e.empty()) return e;
    return need(I.in[2], {DType::F32}, "the loss gradient");
  case OpCode::Where: case OpCode::Cast: case OpCode::Embedding: case OpCode::Transpose:
  case OpCode::Slice: case OpCode::Concat: case OpCode::Split: case OpCode::Expand:
  case OpCode::SliceGrad:
    return "";
  case OpCode::AllReduce: case OpCode::AllGather: case OpCode::ReduceScatter:
  case OpCode::AllToAll: case OpCode::CollectivePermute:
    return need(I.in[0], {DType::F32}, "operands"); // through a StreamCommunicator
  case OpCode::ShardSlice: // data movement of any dtype, from the rank's own start
    return "";
  case OpCode::VocabShardEmbedding: case OpCode::VocabShardEmbeddingGrad:
    return need(I.in[0], {DType::F32}, "operands");
  case OpCode::VocabShardCrossEntropy: case OpCode::VocabShardCrossEntropyGrad:
    return need(I.in[0], {DType::F32}, "logits");
  case OpCode::Fp8Scale: case OpCode::Fp8Cast: case OpCode::Fp8Amax:
    return ""; // validate() checked every dtype (Fp8OpShapes.cpp)
  case OpCode::ScaledMatMul:
    return ""; // Fp8Gemms refuses what cuBLASLt cannot run, naming the instruction
  }
  return cat("unknown opcode ", int(I.op));
}

uint64_t cudaWorkspaceBytes(const Program &p) { return scratchBytesOf(p) + kGemmWorkspaceBytes; }

uint64_t cudaRankDeviceBytes(const Program &p) {
  bool collectives = std::any_of(p.instrs.begin(), p.instrs.end(),
                                 [](const Instr &I) { return isCollectiveOp(I.op); });
  return std::max<uint64_t>(p.arenaBytes, 1) + p.constants.size() + cudaWorkspaceBytes(p) +
         (collectives ? collectiveStagingBytes(p) : 0);
}

bool cudaMemoryInfo(uint64_t &freeBytes, uint64_t &totalBytes, std::string &why) {
  size_t f = 0, t = 0;
  cudaError_t e = cudaMemGetInfo(&f, &t);
  if (e != cudaSuccess) {
    why = cudaErr("cannot read the GPU's free memory", e);
    cudaGetLastError();
    return false;
  }
  freeBytes = f, totalBytes = t;
  return true;
}

bool cudaDeviceAvailable(std::string &why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    why = cat("no usable CUDA device (", cudaGetErrorString(e), ")");
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    why = "no CUDA device";
    return false;
  }
  return true;
}

std::unique_ptr<Executor> createCudaExecutor(std::shared_ptr<const Program> p, std::string &err) {
  return createCudaRankExecutor(std::move(p), nullptr, 0, err);
}

std::unique_ptr<Executor> createCudaRankExecutor(std::shared_ptr<const Program> p,
                                                 Communicator *comm, int rank, std::string &err) {
  if (std::string invalid = p->validate(); !invalid.empty()) {
    err = "invalid program: " + invalid;
    return nullptr;
  }
  for (size_t i = 0; i < p->instrs.size(); ++i)
    if (std::string why = cudaSupports(*p, p->instrs[i]); !why.empty()) {
      err = cat("instr ", i, " (", opcodeName(p->instrs[i].op), "): ", why);
      return nullptr;
    }
  StreamCommunicator *streamComm = nullptr;
  for (size_t i = 0; i < p->instrs.size(); ++i) {
    const Instr &I = p->instrs[i];
    if (!needsMeshRank(I.op))
      continue;
    int64_t world = Communicator::meshSize(I.ints);
    if (!comm) {
      err = cat("instr ", i, " (", opcodeName(I.op), ") is a collective over a ", world,
                "-rank mesh; run its ranks on one GPU (loom train --plan ...: simulated ranks) "
                "or one process per GPU (loom train --nproc ", world, " --backend cuda)");
      return nullptr;
    }
    if (std::strcmp(comm->transport(), "nccl") != 0 &&
        std::strcmp(comm->transport(), "device-memory") != 0) {
      err = cat("the cuda backend runs collectives through NCCL or the device-memory "
                "communicator, not a ",
                comm->transport(), " communicator");
      return nullptr;
    }
    if (world != comm->worldSize()) {
      err = cat("instr ", i, " (", opcodeName(I.op), "): the program's mesh has ", world,
                " ranks; this executor is rank ", rank, " of ", comm->worldSize());
      return nullptr;
    }
    streamComm = static_cast<StreamCommunicator *>(comm);
  }
  // A rank's program without collectives (a pipeline stage's forward with
  // no dp/tp) still runs as that rank, through its communicator, and so
  // without a CUDA graph: the other ranks' threads free stage buffers
  // meanwhile (cudaFree synchronizes the device), and a device
  // synchronization in another thread can invalidate a capture in progress.
  if (!streamComm && comm &&
      (std::strcmp(comm->transport(), "nccl") == 0 ||
       std::strcmp(comm->transport(), "device-memory") == 0))
    streamComm = static_cast<StreamCommunicator *>(comm);
  if (!cudaDeviceAvailable(err))
    return nullptr;
  auto exec = std::make_unique<CudaExecutor>(std::move(p), streamComm, rank);
  if (!exec->init(err))
    return nullptr;
  return exec;
}

} // namespace loom::rt
