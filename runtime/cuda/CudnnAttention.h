//===- CudnnAttention.h - Causal attention through cuDNN's SDPA -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Causal grouped-query attention forward and backward run by cuDNN 9's
// fused flash-attention engines (the same engines PyTorch's SDPA picks on
// Hopper), described to cuDNN through its backend graph API. The library
// is opened at first use (dlopen of libcudnn.so.9), so loom neither links
// nor ships it: where it is missing, or its engines refuse a shape, the
// attention instructions keep loom's own kernels (FlashAttention.cu).
//
// Layouts: q [B, Hq, T, D], k and v [B, Hkv, T, D], o and dq like q, dk and
// dv like k, all bf16, contiguous or, tokens-major (AttentionLayout.h), as
// [B, T, H, D] memory that the graph reads in place through its strides;
// lse [B, Hq, T] f32 contiguous either way, the natural-log logsumexp of
// each query row's scaled scores (the IR's attention lse).
// Query head h reads kv head h / (Hq / Hkv); key j is visible to query i
// when j <= i (causal, S == T).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_CUDNNATTENTION_H
#define LOOM_RUNTIME_CUDA_CUDNNATTENTION_H

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace loom::rt::cuda {

struct SdpaShape {
  int64_t B = 0, Hq = 0, Hkv = 0, T = 0, D = 0;
  float scale = 1.f;
  bool tokensMajor = false; // q, k, v, o and their gradients stored [B, T, H, D]
};

/// One cuDNN handle and the execution plans built for it. Plans are built
/// once, before any launch (building compiles kernels and may allocate), so
/// launches only enqueue work and can be captured into a CUDA graph.
class CudnnAttention {
public:
  /// A handle on the current device, or null with `why` set (no library,
  /// disabled by LOOM_CUDNN=0, or no device).
  static std::unique_ptr<CudnnAttention> create(std::string &why);
  virtual ~CudnnAttention() = default;

  /// Builds the forward (or backward) plan of `s`. Returns its id, or -1
  /// with `why` set when cuDNN cannot run it. `workspaceBytes` is the
  /// device scratch (256-byte aligned) a launch of the plan needs.
  virtual int plan(const SdpaShape &s, bool backward, size_t &workspaceBytes,
                   std::string &why) = 0;

  /// The part of a launch's workspace that does not depend on the engine
  /// cuDNN picks (the backward's delta and f32 dQ accumulator), known
  /// without a GPU: what the planner counts.
  static size_t auxiliaryBytes(const SdpaShape &s, bool backward);

  /// The workspace bytes plan `id` needs (as plan() returned them).
  virtual size_t workspaceBytes(int id) const = 0;

  /// Enqueues forward plan `id`: o and lse from q, k, v.
  virtual bool forward(int id, const void *q, const void *k, const void *v, void *o, float *lse,
                       void *workspace, cudaStream_t stream, std::string &err) = 0;

  /// Enqueues backward plan `id`: dq, dk, dv from q, k, v, the forward's o
  /// and lse, and the output gradient dy.
  virtual bool backward(int id, const void *q, const void *k, const void *v, const void *o,
                        const float *lse, const void *dy, void *dq, void *dk, void *dv,
                        void *workspace, cudaStream_t stream, std::string &err) = 0;

  /// The loaded library's version (e.g. 91400).
  virtual size_t version() const = 0;
};

} // namespace loom::rt::cuda

#endif // LOOM_RUNTIME_CUDA_CUDNNATTENTION_H
