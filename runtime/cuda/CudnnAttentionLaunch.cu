//===- CudnnAttentionLaunch.cu - Attention instructions on cuDNN ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// Which attention instructions run on cuDNN's fused engines
// (CudnnAttention.h), and their launches. An instruction qualifies when
// checkFusedAttention says so (FusedAttentionEligibility.h: bf16 values,
// plain causal, as many keys as queries) and the engines accept the shape;
// a refusal in a program with bf16 values is said once per reason.
// Operands in f32 storage are staged: inputs are rounded into bf16 scratch
// copies (exact: they hold bf16 values), outputs come back as bf16 and are
// widened into the f32 buffers; bf16 ones off a 16-byte boundary are
// copied. lse is f32 either way. Tokens-major operands (AttentionLayout.h)
// are bound in place too, the graph reading them through their strides;
// staged copies keep their layout.
// Everything else keeps loom's own kernels (AttentionKernels.cu).
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "cuda/CudaKernels.h"
#include "cuda/CudnnAttention.h"
#include "loom/runtime/FusedAttentionEligibility.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace loom::rt::cuda {
namespace {

/// The bf16-sized operands of an attention instruction, in the order the
/// cuDNN launch binds them: forward q, k, v -> o; backward q, k, v, o, dy ->
/// dq, dk, dv. (lse, f32, is handled apart.)
struct Operands {
  std::vector<uint32_t> in, out;
};

Operands bf16Operands(const Instr &I) {
  if (I.op == OpCode::Attention)
    return {{I.in[0], I.in[1], I.in[2]}, {I.out[0]}};
  return {{I.in[0], I.in[1], I.in[2], I.in[3], I.in[5]}, {I.out[0], I.out[1], I.out[2]}};
}

/// The cuDNN shape of attention instruction `I`, or false when it does not
/// qualify (checkFusedAttention, FusedAttentionEligibility.h), with `why`
/// set when the refusal is worth saying: not when the user picked loom's
/// kernels (LOOM_CUDA_ATTENTION) or the whole program computes in f32.
bool cudnnShape(const Program &p, const Instr &I, SdpaShape &s, std::string *why = nullptr) {
  if (I.op != OpCode::Attention && I.op != OpCode::AttentionGrad)
    return false; // the executor asks about every instruction
  // LOOM_CUDA_ATTENTION=flash|gemm|chunked|plain picks one of loom's own
  // kernels (AttentionKernels.cu); unset or "cudnn" lets cuDNN run it.
  if (const char *force = std::getenv("LOOM_CUDA_ATTENTION");
      force && *force && std::string(force) != "cudnn")
    return false;
  FusedAttentionCheck c = checkFusedAttention(p, I);
  if (!c.eligible) {
    if (why && !c.f32Program)
      *why = c.why;
    return false;
  }
  const FusedAttentionShape &f = c.shape;
  s = {f.B, f.Hq, f.Hkv, f.T, f.D, f.scale, f.tokensMajor};
  return true;
}

/// Whether cuDNN can bind an operand as it is: bf16 storage, 16-byte
/// aligned (the tensor descriptors promise 16; the executor's blocks are
/// 256-byte aligned, so the buffer offset tells).
bool bindsInPlace(const BufferDesc &b) { return b.dtype == DType::BF16 && b.offset % 16 == 0; }

/// Scratch after cuDNN's workspace: a bf16 copy of each operand that does
/// not bind in place.
size_t stagingBytes(const Program &p, const Instr &I) {
  Operands ops = bf16Operands(I);
  size_t bytes = 0;
  for (const auto *ids : {&ops.in, &ops.out})
    for (uint32_t id : *ids)
      if (!bindsInPlace(p.buffers[id]))
        bytes += align256(size_t(p.buffers[id].numElements()) * 2);
  return bytes;
}

} // namespace

size_t cudnnAttentionScratchEstimate(const Program &p, const Instr &I) {
  SdpaShape s;
  if (!cudnnShape(p, I, s))
    return 0;
  return CudnnAttention::auxiliaryBytes(s, I.op == OpCode::AttentionGrad) + stagingBytes(p, I);
}

int planCudnnAttention(const Program &p, int index, CudnnAttention &cudnn, size_t &scratchBytes,
                       std::string &refused) {
  const Instr &I = p.instrs[size_t(index)];
  SdpaShape s;
  if (!cudnnShape(p, I, s, &refused))
    return -1;
  size_t workspace = 0;
  int id = cudnn.plan(s, I.op == OpCode::AttentionGrad, workspace, refused);
  if (id >= 0)
    scratchBytes = align256(workspace) + stagingBytes(p, I);
  return id;
}

bool launchCudnnAttention(const CudaCall &c, CudaContext &ctx) {
  if (!ctx.cudnn || !ctx.cudnnPlans || (*ctx.cudnnPlans)[size_t(c.index)] < 0)
    return false;
  const Instr &I = *c.instr;
  int plan = (*ctx.cudnnPlans)[size_t(c.index)];
  bool backward = I.op == OpCode::AttentionGrad;
  // Scratch: cuDNN's workspace, then the staged copies.
  void *workspace = ctx.scratch;
  char *next = static_cast<char *>(ctx.scratch) + align256(ctx.cudnn->workspaceBytes(plan));
  std::deque<BufferDesc> stagedDescs; // the copies' descriptions (stable addresses)
  std::vector<std::pair<DevTensor, DevTensor>> copyBack; // staged output -> its buffer
  // An operand cuDNN binds in place, or a bf16 copy in scratch through
  // Cast's kernels (rounded from f32 storage, or moved off an unaligned
  // address); outputs are copied back after the launch.
  auto bf16View = [&](const DevTensor &t, bool input) -> void * {
    if (bindsInPlace(*t.desc))
      return t.data;
    BufferDesc &d = stagedDescs.emplace_back(*t.desc);
    d.dtype = DType::BF16;
    d.bytes = uint64_t(d.numElements()) * 2;
    DevTensor copy{next, &d};
    next += align256(d.bytes);
    if (input)
      castTensor(t, copy, ctx);
    else
      copyBack.push_back({copy, t});
    return copy.data;
  };
  std::string err;
  bool ok;
  if (!backward) {
    void *q = bf16View(c.in[0], true), *k = bf16View(c.in[1], true), *v = bf16View(c.in[2], true);
    void *o = bf16View(c.out[0], false);
    ok = ctx.cudnn->forward(plan, q, k, v, o, c.out[1].as<float>(), workspace, ctx.stream, err);
  } else {
    void *q = bf16View(c.in[0], true), *k = bf16View(c.in[1], true), *v = bf16View(c.in[2], true),
         *o = bf16View(c.in[3], true), *dy = bf16View(c.in[5], true);
    void *dq = bf16View(c.out[0], false), *dk = bf16View(c.out[1], false),
         *dv = bf16View(c.out[2], false);
    ok = ctx.cudnn->backward(plan, q, k, v, o, c.in[4].as<float>(), dy, dq, dk, dv, workspace,
                             ctx.stream, err);
  }
  if (!ok) {
    // Planned but refused at launch: say so, and let loom's kernels run it.
    std::fprintf(stderr, "loom: instr %d (%s): cuDNN failed (%s); loom's kernels run it\n",
                 c.index, opcodeName(I.op), err.c_str());
    (*ctx.cudnnPlans)[size_t(c.index)] = -1;
    return false;
  }
  for (const auto &[staged, out] : copyBack) castTensor(staged, out, ctx);
  return true;
}

} // namespace loom::rt::cuda
