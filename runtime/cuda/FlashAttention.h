//===- FlashAttention.h - Tiled attention on bf16 tensor cores -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The autocast path of causal grouped-query attention (FlashAttention.cu):
// the score matrix never reaches memory; products run on bf16 tensor cores
// (mma.sync m16n8k16) with fp32 accumulation. AttentionKernels.cu picks it
// for attention instructions whose operands are bf16 values and whose head
// dim is kFlashHeadDim.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_FLASHATTENTION_H
#define LOOM_RUNTIME_CUDA_FLASHATTENTION_H

#include "cuda/CudaCommon.cuh"

#include <cstddef>
#include <cstdint>

namespace loom::rt::cuda {

constexpr int64_t kFlashHeadDim = 64;

/// q[B, Hq, T, D], k and v [B, Hkv, S, D]; query head h reads kv head
/// h / group; key j is visible to query i unless causal and j > i + offset.
struct FlashShape {
  int64_t B, Hq, Hkv, T, S, group, offset;
  bool causal;
  float scale;
};

// Operands are FloatIn / FloatOut (CudaCommon.cuh): an f32 input holding
// bf16 values is rounded into a bf16 scratch copy first (exact), a bf16
// storage input is read in place; an output is f32 or bf16 storage of the
// f32 result, rounded to nearest even as Cast rounds.

/// Bytes of device scratch a forward (or backward) call needs: bf16 copies
/// of the f32 inputs that enter products and, for the backward, per query
/// row (padded to whole tiles) the forward's lse in the log2 domain and
/// delta = <dy, o>. Bit k of `bf16Inputs` set says the instruction's input
/// k is bf16 storage, which needs no copy: forward 0 q, 1 k, 2 v; backward
/// 0 q, 1 k, 2 v, 3 o, 4 lse (always f32), 5 dy. o is only read into delta,
/// widened, so it never needs a copy.
size_t flashScratchBytes(const FlashShape &a, bool backward, unsigned bf16Inputs);

/// o = softmax(scale q k^T, masked) v, and per query row of [B, Hq, T] the
/// natural-log logsumexp `lse` of the visible scaled scores (+inf for a row
/// that sees no key). `scratch` is 256-byte aligned; every operand 16-byte
/// aligned.
void launchFlashForward(const FlashShape &a, FloatIn q, FloatIn k, FloatIn v, FloatOut o,
                        float *lse, void *scratch, cudaStream_t stream);

/// dq, dk, dv of the same attention for the output gradient dy, from the
/// forward's o and lse (no pass over the keys to recompute them).
void launchFlashBackward(const FlashShape &a, FloatIn q, FloatIn k, FloatIn v, FloatIn o,
                         const float *lse, FloatIn dy, FloatOut dq, FloatOut dk, FloatOut dv,
                         void *scratch, cudaStream_t stream);

} // namespace loom::rt::cuda

#endif // LOOM_RUNTIME_CUDA_FLASHATTENTION_H
