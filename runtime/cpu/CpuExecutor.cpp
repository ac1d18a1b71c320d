//===- CpuExecutor.cpp - The CPU reference backend ------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Memory: one 64-byte aligned arena of Program::arenaBytes, allocated when
// the executor is created; Input, Output and Temp buffers sit at their
// planned offsets in it and Constant buffers point into the program's
// constant blob, so a run allocates no tensor memory. The arena starts
// filled with 0xff bytes (NaN as f32/f64/bf16, -1 as integers), so a kernel
// that leaves an output element unwritten produces NaN rather than a
// plausible zero.
//
// Every check that does not depend on data happens at creation (validate()
// and the dtype coverage below); run() then only fails on bad data such as
// an out-of-range token id.
//===----------------------------------------------------------------------===//
#include "cpu/CpuExecutor.h"
#include "cpu/Kernels.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/Communicator.h"
#include "loom/runtime/RoundedCopies.h"
#include "loom/runtime/Fp8Amax.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <cstring>

namespace loom::rt {

namespace {

bool isOneOf(DType t, std::initializer_list<DType> ts) {
  for (DType u : ts)
    if (t == u)
      return true;
  return false;
}

} // namespace

std::string cpuSupports(const Program &p, const Instr &I) {
  auto dt = [&](uint32_t id) { return p.buffers[id].dtype; };
  auto need = [&](uint32_t id, std::initializer_list<DType> ts, const char *which) -> std::string {
    if (isOneOf(dt(id), ts))
      return "";
    std::string names;
    for (DType t : ts) names += std::string(names.empty() ? "" : "/") + dtypeName(t);
    return cat("the cpu backend supports ", which, " of ", names, ", not ", dtypeName(dt(id)));
  };
  // bf16 storage of an f32 computation: staged through f32 (see below);
  // validate() checked that the instruction's other float operands are f32.
  if (usesBf16Storage(p, I))
    return "";
  switch (I.op) {
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::Pow: case OpCode::Max: case OpCode::Min:
    return need(I.out[0], {DType::F32, DType::F64, DType::I64, DType::I32}, "operands");
  case OpCode::Neg: case OpCode::Sqrt: case OpCode::Rsqrt: case OpCode::Reciprocal:
  case OpCode::Exp: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Silu:
  case OpCode::GeluTanh: case OpCode::GeluErf: case OpCode::Cos: case OpCode::Sin:
  case OpCode::Log: case OpCode::Relu: case OpCode::Erf: case OpCode::Softplus:
    return need(I.out[0], {DType::F32, DType::F64}, "operands");
  // bf16 products (autocast's matmuls) widen to f32 and round the result.
  case OpCode::MatMul:
    return need(I.in[0], {DType::F32, DType::F64, DType::BF16}, "operands");
  // The kernels below are templates over f32 and f64 (f64 serves gradient
  // checks); bf16 is not computed on directly, graphs cast it to f32.
  case OpCode::Reduce: case OpCode::Softmax: case OpCode::RmsNorm: case OpCode::AddRmsNorm:
  case OpCode::LayerNorm: case OpCode::Rotary: case OpCode::Attention: case OpCode::SumSquares:
  case OpCode::GlobalSumSquares:
  case OpCode::RmsNormGrad: case OpCode::LayerNormGrad: case OpCode::AttentionGrad:
  case OpCode::RotaryGrad: case OpCode::ActivationGrad: case OpCode::SoftmaxGrad:
  case OpCode::SwiGlu: case OpCode::SwiGluGrad:
    return need(I.in[0], {DType::F32, DType::F64}, "operands");
  case OpCode::CrossEntropy:
    return need(I.in[0], {DType::F32, DType::F64}, "logits");
  case OpCode::EmbeddingGrad:
    return need(I.in[0], {DType::F32, DType::F64}, "gradients");
  case OpCode::CrossEntropyGrad:
    if (std::string e = need(I.in[0], {DType::F32, DType::F64}, "logits"); !e.empty())
      return e;
    return need(I.in[2], {DType::F32, DType::F64}, "the loss gradient");
  case OpCode::AllReduce: case OpCode::AllGather: case OpCode::ReduceScatter:
  case OpCode::AllToAll: case OpCode::CollectivePermute:
    return ""; // validate() insists on f32; the communicator is checked at creation
  case OpCode::VocabShardEmbedding: case OpCode::VocabShardEmbeddingGrad:
    return need(I.in[0], {DType::F32, DType::F64}, "operands");
  case OpCode::VocabShardCrossEntropy: case OpCode::VocabShardCrossEntropyGrad:
    return need(I.in[0], {DType::F32, DType::F64}, "logits");
  case OpCode::ShardSlice: // data movement; the rank is checked at creation
    return "";
  case OpCode::AdamW: // validate() already insists on f32
    return need(I.in[0], {DType::F32}, "operands");
  // Data movement and conversion handle every dtype.
  case OpCode::Where: case OpCode::Cast: case OpCode::Embedding: case OpCode::Transpose:
  case OpCode::Slice: case OpCode::Concat: case OpCode::Split: case OpCode::Expand:
  case OpCode::SliceGrad:
    return "";
  case OpCode::Fp8Scale: case OpCode::Fp8Cast: case OpCode::ScaledMatMul:
  case OpCode::Fp8Amax:
    return ""; // validate() checked every dtype (Fp8OpShapes.cpp)
  }
  return cat("unknown opcode ", int(I.op));
}

namespace {

bool dispatch(const KernelCall &c, ThreadPool &pool, std::string &err) {
  switch (c.instr->op) {
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::Pow: case OpCode::Max: case OpCode::Min:
    return runBinary(c, pool, err);
  case OpCode::Neg: case OpCode::Sqrt: case OpCode::Rsqrt: case OpCode::Reciprocal:
  case OpCode::Exp: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Silu:
  case OpCode::GeluTanh: case OpCode::GeluErf: case OpCode::Cos: case OpCode::Sin:
  case OpCode::Log: case OpCode::Relu: case OpCode::Erf: case OpCode::Softplus:
    return runUnary(c, pool, err);
  case OpCode::Where: return runWhere(c, pool, err);
  case OpCode::Cast: return runCast(c, pool, err);
  case OpCode::MatMul: return runMatMul(c, pool, err);
  case OpCode::Reduce: return runReduce(c, pool, err);
  case OpCode::SumSquares: return runSumSquares(c, pool, err);
  case OpCode::GlobalSumSquares: return runGlobalSumSquares(c, pool, err);
  case OpCode::Softmax: return runSoftmax(c, pool, err);
  case OpCode::RmsNorm: return runRmsNorm(c, pool, err);
  case OpCode::AddRmsNorm: return runAddRmsNorm(c, pool, err);
  case OpCode::LayerNorm: return runLayerNorm(c, pool, err);
  case OpCode::Attention: return runAttention(c, pool, err);
  case OpCode::Embedding: return runEmbedding(c, pool, err);
  case OpCode::Rotary: return runRotary(c, pool, err);
  case OpCode::Transpose: return runTranspose(c, pool, err);
  case OpCode::Slice: return runSlice(c, pool, err);
  case OpCode::Concat: return runConcat(c, pool, err);
  case OpCode::Split: return runSplit(c, pool, err);
  case OpCode::Expand: return runExpand(c, pool, err);
  case OpCode::CrossEntropy: return runCrossEntropy(c, pool, err);
  case OpCode::EmbeddingGrad: return runEmbeddingGrad(c, pool, err);
  case OpCode::RmsNormGrad: return runRmsNormGrad(c, pool, err);
  case OpCode::LayerNormGrad: return runLayerNormGrad(c, pool, err);
  case OpCode::AttentionGrad: return runAttentionGrad(c, pool, err);
  case OpCode::RotaryGrad: return runRotaryGrad(c, pool, err);
  case OpCode::ActivationGrad: return runActivationGrad(c, pool, err);
  case OpCode::SwiGlu: return runSwiGlu(c, pool, err);
  case OpCode::SwiGluGrad: return runSwiGluGrad(c, pool, err);
  case OpCode::SoftmaxGrad: return runSoftmaxGrad(c, pool, err);
  case OpCode::CrossEntropyGrad: return runCrossEntropyGrad(c, pool, err);
  case OpCode::SliceGrad: return runSliceGrad(c, pool, err);
  case OpCode::AdamW: return runAdamW(c, pool, err);
  case OpCode::VocabShardEmbedding: return runVocabShardEmbedding(c, pool, err);
  case OpCode::VocabShardEmbeddingGrad: return runVocabShardEmbeddingGrad(c, pool, err);
  case OpCode::VocabShardCrossEntropy: return runVocabShardCrossEntropy(c, pool, err);
  case OpCode::VocabShardCrossEntropyGrad: return runVocabShardCrossEntropyGrad(c, pool, err);
  case OpCode::Fp8Scale: return runFp8Scale(c, pool, err);
  case OpCode::Fp8Amax: return runFp8Amax(c, pool, err);
  case OpCode::Fp8Cast: return runFp8Cast(c, pool, err);
  case OpCode::ScaledMatMul: return runScaledMatMul(c, pool, err);
  case OpCode::AllReduce: case OpCode::AllGather: case OpCode::ReduceScatter:
  case OpCode::AllToAll: case OpCode::CollectivePermute: case OpCode::ShardSlice:
    err = "a collective needs the communicator and ShardSlice the rank (CpuExecutor::run routes "
          "them)";
    return false;
  }
  err = cat("unknown opcode ", int(c.instr->op));
  return false;
}

/// An instruction that reads or writes bf16 storage of an f32 computation
/// (Program.h, bf16StorageAllowed). This backend is the reference, so it
/// runs exactly the definition: widen the bf16 inputs into f32 scratch, run
/// the f32 kernel, round its f32 outputs into the bf16 buffers with Cast's
/// rounding. The CUDA backend reads and writes bf16 inside its kernels.
struct Staging {
  std::vector<KernelCall> widen, narrow; // Casts around the f32 call
  // Column blocks (BufferView) the call reads or writes as contiguous
  // copies: each block and its copy, gathered before and scattered after.
  std::vector<std::pair<Tensor, Tensor>> gather, scatter;
};

/// Copies a column block's rows (desc->rowPitch apart) out of or into
/// contiguous bytes.
void moveColumnBlock(const Tensor &block, uint8_t *packed, bool intoBlock) {
  const BufferDesc &d = *block.desc;
  if (d.numElements() == 0)
    return;
  const size_t es = dtypeSize(d.dtype), row = size_t(d.shape.back()) * es;
  const size_t pitch = size_t(d.rowPitch) * es;
  const int64_t rows = d.numElements() / d.shape.back();
  auto *b = static_cast<uint8_t *>(block.data);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t *strided = b + size_t(r) * pitch, *dense = packed + size_t(r) * row;
    if (intoBlock)
      std::memcpy(strided, dense, row);
    else
      std::memcpy(dense, strided, row);
  }
}

/// Bytes of contiguous scratch for the column blocks `I` touches.
uint64_t blockBytes(const Program &p, const Instr &I) {
  uint64_t bytes = 0;
  for (const auto *ids : {&I.in, &I.out})
    for (uint32_t id : *ids)
      if (p.buffers[id].rowPitch)
        bytes += (p.buffers[id].bytes + 63) / 64 * 64;
  return bytes;
}

/// A transpose between equal dtypes moves raw words: nothing to stage.
bool needsStaging(const Program &p, const Instr &I) {
  if (I.op == OpCode::Transpose && p.buffers[I.in[0]].dtype == p.buffers[I.out[0]].dtype)
    return false;
  return usesBf16Storage(p, I);
}

/// Bytes of f32 scratch that staging `I` needs (64-byte aligned pieces).
uint64_t stagingBytes(const Program &p, const Instr &I) {
  if (!needsStaging(p, I))
    return 0;
  uint64_t bytes = 0;
  for (const auto *ids : {&I.in, &I.out})
    for (uint32_t id : *ids)
      if (p.buffers[id].dtype == DType::BF16)
        bytes += (uint64_t(p.buffers[id].numElements()) * 4 + 63) / 64 * 64;
  return bytes;
}

class CpuExecutor : public Executor {
public:
  CpuExecutor(std::shared_ptr<const Program> p, int threads, uint8_t *arena,
              Communicator *comm, int rank)
      : Executor(std::move(p)), pool_(threads), arena_(arena), comm_(comm), rank_(rank),
        staleCopies_(*program_) {
    uint64_t scratchBytes = 0;
    for (const Instr &I : program_->instrs)
      scratchBytes = std::max(scratchBytes, stagingBytes(*program_, I));
    scratch_.resize(scratchBytes / 4 + 16); // floats, plus room to align to 64 bytes
    uint64_t blocks = 0;
    for (const Instr &I : program_->instrs) blocks = std::max(blocks, blockBytes(*program_, I));
    for (const RoundedCopy &r : roundedCopies(*program_))
      blocks = std::max(blocks, program_->buffers[r.copy].bytes);
    blockScratch_.resize(blocks / 8 + 16); // words, plus room to align to 64 bytes
    // Each kept copy's refresh, round(input) or max |input| (a copy that is
    // a column block goes through contiguous scratch, scattered after).
    for (const RoundedCopy &r : roundedCopies(*program_)) {
      Refresh &f = refreshes_[r.copy];
      f.call.in = {tensor(r.input)};
      f.call.out = {tensor(r.copy)};
      stageColumnBlocks(f.call, f.blocks);
    }
    for (const Instr &I : program_->instrs) {
      KernelCall call;
      call.instr = &I;
      for (uint32_t id : I.in) call.in.push_back(tensor(id));
      for (uint32_t id : I.out) call.out.push_back(tensor(id));
      staging_.emplace_back();
      stageColumnBlocks(call, staging_.back());
      if (needsStaging(*program_, I))
        stage(call, staging_.back());
      calls_.push_back(std::move(call));
    }
  }
  ~CpuExecutor() override { std::free(arena_); }

  bool setInput(size_t index, const void *data, size_t bytes, std::string &err) override {
    if (!checkIo(program_->inputs, "input", index, bytes, err))
      return false;
    if (bytes) // an empty tensor may come with a null pointer
      std::memcpy(tensor(program_->inputs[index]).data, data, bytes);
    staleCopies_.inputSet(index);
    return true;
  }

  bool getOutput(size_t index, void *data, size_t bytes, std::string &err) override {
    if (!checkIo(program_->outputs, "output", index, bytes, err))
      return false;
    if (bytes)
      std::memcpy(data, tensor(program_->outputs[index]).data, bytes);
    return true;
  }

  bool run(std::string &err) override {
    for (const RoundedCopy &r : staleCopies_.take()) {
      const Refresh &f = refreshes_.at(r.copy);
      std::string why;
      if (r.kind == RoundedCopy::Amax)
        runFp8Amax(f.call, pool_, why);
      else
        runCast(f.call, pool_, why);
      for (const auto &[block, packed] : f.blocks.scatter)
        moveColumnBlock(block, packed.as<uint8_t>(), true);
    }
    for (size_t i = 0; i < calls_.size(); ++i) {
      std::string why;
      const KernelCall &c = calls_[i];
      for (const auto &[block, packed] : staging_[i].gather)
        moveColumnBlock(block, packed.as<uint8_t>(), false);
      for (const KernelCall &w : staging_[i].widen) runCast(w, pool_, why);
      bool ok = isCollectiveOp(c.instr->op)
                    ? comm_->collective(rank_, *c.instr, c.in[0].shape(), c.out[0].shape(),
                                        c.in[0].as<float>(), c.out[0].as<float>(), why)
                : c.instr->op == OpCode::ShardSlice ? runShardSlice(c, rank_, pool_, why)
                                                    : dispatch(c, pool_, why);
      if (ok)
        for (const KernelCall &n : staging_[i].narrow) runCast(n, pool_, why);
      if (ok && fusedAmaxCount(*c.instr)) // after the narrowing: the amax of what is stored
        runFusedAmax(c, staging_[i].narrow, pool_);
      if (ok)
        for (const auto &[block, packed] : staging_[i].scatter)
          moveColumnBlock(block, packed.as<uint8_t>(), true);
      if (!ok) {
        err = cat("instr ", i, " (", opcodeName(calls_[i].instr->op), "): ", why);
        return false;
      }
    }
    return true;
  }

private:
  Tensor tensor(uint32_t id) const {
    const BufferDesc &b = program_->buffers[id];
    // Constants are only ever inputs: kernels read them through this pointer.
    void *data = b.kind == BufferKind::Constant
                     ? const_cast<uint8_t *>(program_->constants.data()) + b.offset
                     : arena_ + b.offset;
    return Tensor{data, &b};
  }

  bool checkIo(const std::vector<uint32_t> &ids, const char *what, size_t index, size_t bytes,
               std::string &err) const {
    if (index >= ids.size()) {
      err = cat(what, " index ", index, " out of range (the program has ", ids.size(), " ", what,
                "s)");
      return false;
    }
    const BufferDesc &b = program_->buffers[ids[index]];
    if (bytes != b.bytes) {
      err = cat(what, " ", index, " '", b.name, "' ", shapeStr(b.shape), " ", dtypeName(b.dtype),
                " has ", b.bytes, " bytes, not ", bytes);
      return false;
    }
    return true;
  }

  /// Points the column-block operands of `call` at contiguous copies in
  /// blockScratch_ (shared by every call: one runs at a time) and records
  /// the gathers and scatters around it.
  void stageColumnBlocks(KernelCall &call, Staging &st) {
    auto *base = reinterpret_cast<uint8_t *>(blockScratch_.data());
    base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
    uint64_t at = 0;
    auto repoint = [&](Tensor &t, bool output) {
      if (!t.desc->rowPitch)
        return;
      BufferDesc &d = stagedDescs_.emplace_back(*t.desc);
      d.rowPitch = 0;
      Tensor packed{base + at, &d};
      at += (d.bytes + 63) / 64 * 64;
      (output ? st.scatter : st.gather).push_back({t, packed});
      t = packed;
    };
    for (Tensor &t : call.in) repoint(t, false);
    for (Tensor &t : call.out) repoint(t, true);
  }

  /// Points the bf16 operands of `call` at f32 scratch and records the
  /// Casts that fill (inputs) and drain (outputs) it.
  void stage(KernelCall &call, Staging &st) {
    auto *base = reinterpret_cast<uint8_t *>(scratch_.data());
    base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
    uint64_t at = 0;
    auto retype = [&](Tensor &t, bool output) {
      if (t.dtype() != DType::BF16)
        return;
      BufferDesc &d = stagedDescs_.emplace_back(*t.desc);
      d.dtype = DType::F32;
      d.bytes = uint64_t(d.numElements()) * 4;
      Tensor f32{base + at, &d};
      at += (d.bytes + 63) / 64 * 64;
      KernelCall conv;
      conv.instr = call.instr;
      conv.in = {output ? f32 : t};
      conv.out = {output ? t : f32};
      (output ? st.narrow : st.widen).push_back(std::move(conv));
      t = f32;
    };
    for (Tensor &t : call.in) retype(t, false);
    for (Tensor &t : call.out) retype(t, true);
  }

  ThreadPool pool_;
  std::vector<float> scratch_;           // f32 copies of staged bf16 operands
  std::vector<uint64_t> blockScratch_;   // contiguous copies of column blocks
  std::deque<BufferDesc> stagedDescs_;   // their descriptions (stable addresses)
  std::vector<Staging> staging_;         // per instruction
  uint8_t *arena_;
  Communicator *comm_;
  int rank_;
  std::vector<KernelCall> calls_;
  StaleRoundedCopies staleCopies_; // AdamW's bf16 copies and amaxes to refresh
  struct Refresh {
    KernelCall call;
    Staging blocks;
  };
  std::map<uint32_t, Refresh> refreshes_; // per kept copy's buffer id
};

} // namespace

std::unique_ptr<Executor> createCpuExecutor(std::shared_ptr<const Program> p, int threads,
                                            std::string &err) {
  return createCpuRankExecutor(std::move(p), threads, nullptr, 0, err);
}

std::unique_ptr<Executor> createCpuRankExecutor(std::shared_ptr<const Program> p, int threads,
                                                Communicator *comm, int rank,
                                                std::string &err) {
  if (std::string invalid = p->validate(); !invalid.empty()) {
    err = "invalid program: " + invalid;
    return nullptr;
  }
  for (size_t i = 0; i < p->instrs.size(); ++i)
    if (std::string why = cpuSupports(*p, p->instrs[i]); !why.empty()) {
      err = cat("instr ", i, " (", opcodeName(p->instrs[i].op), "): ", why);
      return nullptr;
    }
  for (size_t i = 0; i < p->instrs.size(); ++i) {
    const Instr &I = p->instrs[i];
    if (!needsMeshRank(I.op))
      continue;
    int64_t world = 1;
    for (int a = 0; a < kMeshAxes; ++a) world *= I.ints[2 + a];
    if (!comm) {
      err = cat("instr ", i, " (", opcodeName(I.op), ") is a collective over a ", world,
                "-rank mesh; run the program on a simulated world of ranks (loom train --plan)");
      return nullptr;
    }
    if (std::strcmp(comm->transport(), "nccl") == 0) {
      err = "the cpu backend cannot run collectives through NCCL (device memory)";
      return nullptr;
    }
    if (world != comm->worldSize() || rank < 0 || rank >= world) {
      err = cat("instr ", i, " (", opcodeName(I.op), "): the program's mesh has ", world,
                " ranks; this executor is rank ", rank, " of ", comm->worldSize());
      return nullptr;
    }
  }
  // aligned_alloc wants a size that is a multiple of the alignment.
  uint64_t bytes = (p->arenaBytes + 63) / 64 * 64;
  auto *arena = static_cast<uint8_t *>(std::aligned_alloc(64, bytes ? bytes : 64));
  if (!arena) {
    err = cat("cannot allocate the ", p->arenaBytes, "-byte arena");
    return nullptr;
  }
  std::memset(arena, 0xff, bytes);
  return std::make_unique<CpuExecutor>(std::move(p), threads, arena, comm, rank);
}

} // namespace loom::rt
