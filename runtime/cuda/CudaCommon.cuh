//===- CudaCommon.cuh - Helpers shared by the CUDA kernels -----*- CUDA -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// - StridedMap: the CPU backend's StridedLoop (cpu/Strided.h) collapsed on
//   the host and passed by value, so a kernel turns a flat output index into
//   one offset per operand with a few divisions.
// - Block reductions (sum, max) over warps with shuffles. Their order is a
//   fixed tree for a given block size, so results are bitwise reproducible
//   run to run: no kernel in this backend uses floating-point atomics.
//   Memory-bound kernels accumulate in double like the CPU reference: on
//   Hopper fp64 arithmetic is far from the bottleneck of a kernel that
//   streams its operands once.
// - bf16 conversion written out bit by bit so it matches the CPU backend
//   exactly (round to nearest even, NaN kept quiet); FloatIn/FloatOut let
//   an f32 kernel read or write bf16 storage with that conversion.
// - reportError: the first data error of a run wins the DeviceError slot.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_CUDACOMMON_CUH
#define LOOM_RUNTIME_CUDA_CUDACOMMON_CUH

#include "cpu/Strided.h"
#include "cuda/CudaKernels.h"
#include "loom/runtime/RowDivision.h"

#include <cstdint>
#include <initializer_list>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace loom::rt::cuda {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;

/// Row-major walk of an output shape with K operands' element strides.
template <int K> struct StridedMap {
  int ndim = 0;
  bool narrow = false; // every index fits 32 bits: divide in 32 bits
  int64_t shape[kMaxDims] = {};
  int64_t strides[K][kMaxDims] = {};

  /// Offsets of flat output index `i` in each operand.
  __device__ void offsets(int64_t i, int64_t (&off)[K]) const {
    // One dim left after collapsing (same-shape operands, a scalar
    // broadcast, a whole-tensor reduction) is the common case: no 64-bit
    // division per element, which would make these memory-bound kernels
    // instruction-bound. Same offsets either way.
    if (ndim == 1) {
      for (int k = 0; k < K; ++k) off[k] = i * strides[k][0];
      return;
    }
    for (int k = 0; k < K; ++k) off[k] = 0;
    if (narrow) {
      uint32_t j = uint32_t(i);
      for (int d = ndim - 1; d >= 0; --d) {
        uint32_t n = uint32_t(shape[d]), coord = j % n;
        j /= n;
        for (int k = 0; k < K; ++k) off[k] += int64_t(coord) * strides[k][d];
      }
      return;
    }
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t coord = i % shape[d];
      i /= shape[d];
      for (int k = 0; k < K; ++k) off[k] += coord * strides[k][d];
    }
  }
};

/// Collapses (shape, per-operand strides) with StridedLoop's rule and packs
/// it. Collapsing never leaves more dims than the output has, and programs
/// have rank <= kMaxDims (cudaSupports checks it).
template <int K>
StridedMap<K> makeStridedMap(const Shape &shape, const std::vector<Shape> &strides) {
  StridedLoop loop(shape, strides);
  StridedMap<K> m;
  m.ndim = int(loop.shape().size());
  int64_t total = 1;
  for (int64_t n : loop.shape()) total *= n;
  m.narrow = total < (int64_t(1) << 32);
  for (int d = 0; d < m.ndim; ++d) {
    m.shape[d] = loop.shape()[size_t(d)];
    for (int k = 0; k < K; ++k) m.strides[k][d] = loop.strides(size_t(k))[size_t(d)];
  }
  return m;
}

/// A grid for a grid-stride loop over n items: enough blocks to fill the
/// GPU several times, never more than needed.
inline unsigned gridFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 132 * 16) blocks = 132 * 16;
  return unsigned(blocks < 1 ? 1 : blocks);
}

#define LOOM_GRID_STRIDE(i, n)                                                                   \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                      \
       i += int64_t(gridDim.x) * blockDim.x)

template <typename T> __device__ inline T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T> __device__ inline T warpMax(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = v != v || v > w ? v : w; // NaN propagates, like the CPU's max
  }
  return v;
}

/// Sum of v over the block (blockDim.x a multiple of 32, at most 1024);
/// every thread gets the result. `shared` holds 32 values.
template <typename T> __device__ inline T blockSum(T v, T *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warpSum(v);
  __syncthreads(); // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : T(0);
  return warpSum(v);
}

/// blockSum of a and b at once: each takes blockSum's tree (the same bits as
/// two calls) behind one pair of barriers. `shared` holds 64 values.
template <typename T> __device__ inline void blockSum2(T &a, T &b, T *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  a = warpSum(a);
  b = warpSum(b);
  __syncthreads();
  if (lane == 0) {
    shared[warp] = a;
    shared[32 + warp] = b;
  }
  __syncthreads();
  a = warpSum(lane < warps ? shared[lane] : T(0));
  b = warpSum(lane < warps ? shared[32 + lane] : T(0));
}

template <typename T> __device__ inline T blockMax(T v, T *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : T(-INFINITY);
  return warpMax(v);
}

/// A NaN's bf16: its top half, made quiet (the CPU backend's Cast keeps
/// the sign and payload bits this way; cvt would return the canonical NaN).
__device__ inline uint16_t nanToBf16(float f) { return uint16_t((__float_as_uint(f) >> 16) | 0x40u); }

/// bfloat16 is the top half of an IEEE f32; round to nearest even. cvt.rn
/// rounds every other value (subnormals, infinities and overflow to inf
/// included) exactly as adding 0x7fff plus the kept lsb and truncating
/// does, in one instruction; the integer form cost six or seven ALU
/// instructions per element, and Nsight Compute put the certified SwiGLU
/// kernels at 78% ALU-pipe utilization, compute-bound below half of the
/// HBM bandwidth, with these roundings among the largest shares.
__device__ inline uint16_t floatToBf16(float f) {
  return f != f ? nanToBf16(f) : __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

/// Two values rounded as floatToBf16 rounds each, a in the low half: one
/// cvt.rn.bf16x2 for the pair.
__device__ inline uint32_t floatsToBf16x2(float a, float b) {
  if (a != a || b != b)
    return uint32_t(floatToBf16(a)) | (uint32_t(floatToBf16(b)) << 16);
  __nv_bfloat162 r = __floats2bfloat162_rn(a, b);
  return uint32_t(__bfloat16_as_ushort(r.x)) | (uint32_t(__bfloat16_as_ushort(r.y)) << 16);
}

__device__ inline float bf16ToFloat(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

/// An f32 operand stored as f32 or as bf16 (Program.h: bf16 storage of an
/// f32 computation, where codegen folded autocast's casts into the kernel).
/// Reading widens exactly; the flag is the same for every thread, so the
/// branch costs nothing next to the memory access.
struct FloatIn {
  const void *p = nullptr;
  bool bf16 = false;
  __device__ float operator[](int64_t i) const {
    return bf16 ? bf16ToFloat(static_cast<const uint16_t *>(p)[i]) : static_cast<const float *>(p)[i];
  }
};

/// An f32 result stored as f32 or rounded to bf16 (as Cast rounds), in a
/// column block (BufferView) where `pitch` is set: element i of its rows
/// of `cols` lands at (i / cols) * pitch + i % cols.
struct FloatOut {
  void *p = nullptr;
  bool bf16 = false;
  int64_t pitch = 0;  // 0: contiguous
  RowDivision row{};  // by the block's columns (RowDivision.h)
  __device__ int64_t at(int64_t i) const {
    if (!pitch) return i;
    const int64_t r = divideRow(i, row);
    return r * pitch + (i - r * int64_t(row.d));
  }
  __device__ void store(int64_t i, float v) const {
    i = at(i);
    if (bf16) static_cast<uint16_t *>(p)[i] = floatToBf16(v);
    else static_cast<float *>(p)[i] = v;
  }
};

inline FloatIn floatIn(const DevTensor &t) { return {t.data, t.dtype() == DType::BF16}; }
inline FloatOut floatOut(const DevTensor &t) {
  const int64_t pitch = t.desc->rowPitch;
  return {t.data, t.dtype() == DType::BF16, pitch,
          pitch ? rowDivision(uint64_t(t.shape().back())) : RowDivision{}};
}

/// Records a data error unless an earlier one is already recorded.
__device__ inline void reportError(DeviceError *e, int instr, int what, long long value,
                                   long long at, long long bound) {
  if (atomicCAS(&e->instr, -1, instr) == -1) {
    e->what = what;
    e->value = value;
    e->at = at;
    e->bound = bound;
  }
}

/// Element i of an index tensor (i64 or i32).
__device__ inline int64_t indexAt(const void *p, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t *>(p)[i] : static_cast<const int32_t *>(p)[i];
}

//===--- Eight elements per access ----------------------------------------===//
//
// One-element loops move 2 or 4 bytes per thread per access and
// reach well under half of the memory bandwidth on [B T, F] activations.
// Where every operand is contiguous and covers the whole output (no
// broadcast), n % 8 == 0 and the pointers are 16-byte aligned (arena
// buffers are), kernels handle 8 consecutive elements per thread: one 16-byte load per bf16 operand, two per f32 operand. Each
// element's arithmetic is the scalar kernel's, so the results are the same
// bits (ElementwiseKernels.cu, MovementKernels.cu).

constexpr int kPack = 8;

struct Pack {
  float v[kPack];
};

__device__ inline Pack load8(FloatIn x, int64_t i) {
  Pack p;
  if (x.bf16) {
    uint4 w = *reinterpret_cast<const uint4 *>(static_cast<const uint16_t *>(x.p) + i);
    uint32_t words[4] = {w.x, w.y, w.z, w.w};
    for (int k = 0; k < 4; ++k) {
      p.v[2 * k] = bf16ToFloat(uint16_t(words[k] & 0xffffu));
      p.v[2 * k + 1] = bf16ToFloat(uint16_t(words[k] >> 16));
    }
  } else {
    const float4 *f = reinterpret_cast<const float4 *>(static_cast<const float *>(x.p) + i);
    float4 a = f[0], b = f[1];
    p = Pack{{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
  }
  return p;
}

__device__ inline void store8(FloatOut y, int64_t i, const Pack &p) {
  i = y.at(i); // a pack stays in one row of a column block (packable)
  if (y.bf16) {
    uint32_t words[4];
    for (int k = 0; k < 4; ++k) words[k] = floatsToBf16x2(p.v[2 * k], p.v[2 * k + 1]);
    *reinterpret_cast<uint4 *>(static_cast<uint16_t *>(y.p) + i) =
        make_uint4(words[0], words[1], words[2], words[3]);
  } else {
    float4 *f = reinterpret_cast<float4 *>(static_cast<float *>(y.p) + i);
    f[0] = make_float4(p.v[0], p.v[1], p.v[2], p.v[3]);
    f[1] = make_float4(p.v[4], p.v[5], p.v[6], p.v[7]);
  }
}

/// True when the packed kernels may run on these tensors of n elements.
inline bool packable(int64_t n, std::initializer_list<const DevTensor *> ts) {
  if (n % kPack)
    return false;
  for (const DevTensor *t : ts)
    if (t->numel() != n || reinterpret_cast<uintptr_t>(t->data) % 16 ||
        (t->desc->rowPitch && (t->shape().back() % kPack || t->desc->rowPitch % kPack)))
      return false;
  return true;
}

/// Rows of `len` elements (row-major tensors) that start 16-byte aligned
/// in every tensor, so a thread may move 8 consecutive ones per access:
/// len % 8 == 0 and aligned base pointers.
inline bool rowsPackable(int64_t len, std::initializer_list<const DevTensor *> ts) {
  if (len % kPack)
    return false;
  for (const DevTensor *t : ts)
    if (reinterpret_cast<uintptr_t>(t->data) % 16)
      return false;
  return true;
}

/// Grid for n / 8 threads' worth of packs.
inline unsigned packGrid(int64_t n) { return gridFor(n / kPack); }

#define LOOM_PACK_STRIDE(i, n)                                                                   \
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPack; i < (n);          \
       i += int64_t(gridDim.x) * blockDim.x * kPack)

} // namespace loom::rt::cuda

#endif
