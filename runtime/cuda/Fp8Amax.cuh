//===- Fp8Amax.cuh - amax outputs found inside producing kernels -*- CUDA -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A kernel that writes a tensor and its amax (loom/runtime/Fp8Amax.h)
// keeps each thread's maximum of |stored value| bits in a register while it
// stores, then one lane per warp atomicMaxes the warp's maximum into the
// amax buffer, which the launch zeroed first (launchWithFusedAmax). Integer
// max of magnitude bits is exact and order-free, so the result equals
// Fp8Amax's and the CPU's bit for bit.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_FP8AMAX_CUH
#define LOOM_RUNTIME_CUDA_FP8AMAX_CUH

#include "cuda/CudaCommon.cuh"

namespace loom::rt::cuda {

/// |v| as `y` stores it (rounded to bf16 for a bf16 output), as bits.
__device__ inline uint32_t storedAbsBits(FloatOut y, float v) {
  uint32_t u = y.bf16 ? uint32_t(floatToBf16(v)) << 16 : __float_as_uint(v);
  return u & 0x7fffffffu;
}

/// m = max(m, storedAbsBits(y, v)) when an amax is wanted (`want`, the
/// kernel's amax argument, non-null), else nothing: the test is the same
/// in every thread, and a bf16 step without fp8 wants none, so its
/// kernels skip the rounding and the max (ALU work that bounded the
/// certified SwiGLU kernels).
__device__ inline void maxStored(const uint32_t *want, uint32_t &m, FloatOut y, float v) {
  if (want)
    m = max(m, storedAbsBits(y, v));
}

/// Adds this thread's maximum `m` to `*bits` (null: no amax wanted), one
/// atomicMax per block. Every thread of the block must call it (at the end
/// of the kernel, past its loops); blockDim.x is a multiple of 32.
__device__ inline void flushAmax(uint32_t *bits, uint32_t m) {
  __shared__ uint32_t warps[32];
  if (!bits) // a kernel argument: the whole block returns, or none of it
    return;
  m = __reduce_max_sync(0xffffffffu, m);
  __syncthreads(); // thread 0 may still be reading `warps` from a previous call
  if ((threadIdx.x & 31) == 0)
    warps[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x >> 5; ++w) m = max(m, warps[w]);
    atomicMax(bits, m);
  }
}

/// |bf16| or |f32| bits of raw storage words (a copy that does not convert).
__device__ inline uint32_t bf16AbsBits(uint32_t half) { return (half << 16) & 0x7fffffffu; }

} // namespace loom::rt::cuda

#endif
