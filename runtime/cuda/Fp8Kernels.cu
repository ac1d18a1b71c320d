//===- Fp8Kernels.cu - fp8 scales and casts on the GPU ---------*- CUDA -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Fp8Scale and Fp8Cast (Program.h, opcodes 120 and 121) with the CPU
// backend's results bit for bit (cpu/Fp8Kernels.cpp):
//   - amax is an unsigned max of the magnitudes' bit patterns
//     (loom/runtime/Fp8.h: they order like the values, NaN above all), so
//     the order of the reduction cannot matter, and partial results of
//     many blocks combine with atomicMax (exact; no float atomics);
//   - the scale and its inverse come from Fp8.h's formula, compiled here
//     with IEEE division and reciprocal (__fdiv_rn, __frcp_rn);
//   - the cast multiplies in f32 and converts with the hardware's
//     round-to-nearest-even, saturating conversion (cvt.rn.satfinite,
//     sm_89+), which the unit tests compare with Fp8.h's floatToFp8.
// Kernels:
//   Fp8Scale, one scale per row: a warp per row, one pass, no atomics.
//   Fp8Scale, per tensor or per column: atomicMax of block partials into
//     the scale buffer (zeroed first), then a small kernel turns each amax
//     into scale and inverse in place.
//   Fp8Cast: 64 x 64 tiles; each thread converts 8 consecutive elements of
//     a row (one 16-byte load of bf16, two of f32) and stores 8 fp8 bytes;
//     the transposed copy goes through shared memory and leaves as 8-byte
//     stores along its rows. Both layouts come from one read of x.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "cuda/Fp8Cuda.h"
#include "loom/runtime/Fp8.h"
#include "loom/runtime/Fp8Amax.h"

#include <cuda_fp8.h>

namespace loom::rt::cuda {
namespace {

constexpr int kTile = 64;

__device__ inline uint32_t warpMaxBits(uint32_t v) { return __reduce_max_sync(0xffffffffu, v); }

/// Per-row amax, scale and inverse: warp w of the grid takes row w.
__global__ void rowScaleKernel(FloatIn x, int64_t rows, int64_t cols, bool packed, Fp8Format f,
                               bool pow2, float *scale, float *inverse) {
  int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  if (warp >= rows)
    return;
  int64_t base = warp * cols;
  uint32_t m = 0;
  if (packed) {
    for (int64_t k = int64_t(lane) * kPack; k < cols; k += 32 * kPack) {
      Pack p = load8(x, base + k);
      for (int j = 0; j < kPack; ++j) m = max(m, fp8AbsBits(p.v[j]));
    }
  } else {
    for (int64_t k = lane; k < cols; k += 32) m = max(m, fp8AbsBits(x[base + k]));
  }
  m = warpMaxBits(m);
  if (lane == 0) {
    float s = fp8ScaleFromAmax(__uint_as_float(m), f, pow2);
    scale[warp] = s;
    inverse[warp] = fp8Inverse(s);
  }
}

/// Tensorwise amax: block partials atomically maxed into amaxBits[0].
__global__ void tensorAmaxKernel(FloatIn x, int64_t n, bool packed, uint32_t *amaxBits) {
  __shared__ uint32_t warps[32];
  uint32_t m = 0;
  if (packed) {
    LOOM_PACK_STRIDE(i, n) {
      Pack p = load8(x, i);
      for (int j = 0; j < kPack; ++j) m = max(m, fp8AbsBits(p.v[j]));
    }
  } else {
    LOOM_GRID_STRIDE(i, n) m = max(m, fp8AbsBits(x[i]));
  }
  m = warpMaxBits(m);
  if ((threadIdx.x & 31) == 0)
    warps[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = int(threadIdx.x) < int(blockDim.x >> 5) ? warps[threadIdx.x] : 0u;
    m = warpMaxBits(m);
    if (threadIdx.x == 0)
      atomicMax(amaxBits, m);
  }
}

/// Per-column amax: a 32 x 8 block covers 32 columns and a chunk of rows;
/// its partial maxima go to amaxBits[col] with atomicMax.
__global__ void columnAmaxKernel(FloatIn x, int64_t rows, int64_t cols, int64_t rowsPerChunk,
                                 uint32_t *amaxBits) {
  __shared__ uint32_t partial[8][33];
  int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  int64_t r0 = int64_t(blockIdx.y) * rowsPerChunk;
  int64_t r1 = min(rows, r0 + rowsPerChunk);
  uint32_t m = 0;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) m = max(m, fp8AbsBits(x[r * cols + c]));
  partial[threadIdx.y][threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < 8; ++k) m = max(m, partial[k][threadIdx.x]);
    atomicMax(amaxBits + c, m);
  }
}

/// amax bits (stored in `scale`) -> scale and inverse, per group.
/// With `amax` (one group): from |amax[0]| instead, a [1, 1] x being its own amax.
__global__ void finishScaleKernel(int64_t groups, Fp8Format f, bool pow2, FloatIn amax,
                                  float *scale, float *inverse) {
  LOOM_GRID_STRIDE(g, groups) {
    uint32_t bits = amax.p ? fp8AbsBits(amax[0]) : reinterpret_cast<uint32_t *>(scale)[g];
    float s = fp8ScaleFromAmax(__uint_as_float(bits), f, pow2);
    scale[g] = s;
    inverse[g] = fp8Inverse(s);
  }
}

/// x * scale rounded to fp8 by the hardware (nearest even, saturating).
__device__ inline uint8_t toFp8(float v, Fp8Format f) {
  return uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, f == Fp8Format::E5M2 ? __NV_E5M2 : __NV_E4M3));
}

/// Two at once (one cvt instruction), `lo` in the low byte.
__device__ inline uint16_t toFp8x2(float lo, float hi, Fp8Format f) {
  return uint16_t(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE,
                                            f == Fp8Format::E5M2 ? __NV_E5M2 : __NV_E4M3));
}

/// The scale of element (r, c): per tensor, row or column.
struct ScaleAt {
  const float *p;
  int64_t rowStride, colStride;
  __device__ float operator()(int64_t r, int64_t c) const { return p[r * rowStride + c * colStride]; }
};

/// One 64 x 64 tile of x -> q (row-major, if wanted) and q^T (if wanted).
/// Interior tiles of rows whose length is a multiple of 8 move 8 elements
/// per access; edge tiles go element by element (same arithmetic).
__global__ void castTileKernel(FloatIn x, int64_t rows, int64_t cols, ScaleAt scale, Fp8Format f,
                               bool aligned, uint8_t *q, uint8_t *qt) {
  __shared__ uint8_t tile[kTile][kTile + 4]; // 68-byte rows: the column gathers spread over banks
  int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  bool full = r0 + kTile <= rows && c0 + kTile <= cols;
  // With 8 | rows, cols every 8-element group of x, q and q^T starts 16
  // (x) or 8 (q, q^T) bytes past an aligned base.
  bool packed = aligned && full && cols % kPack == 0 && rows % kPack == 0;
  if (packed) {
    for (int p = threadIdx.x; p < kTile * kTile / kPack; p += blockDim.x) {
      int row = p / (kTile / kPack), c = (p % (kTile / kPack)) * kPack;
      int64_t at = (r0 + row) * cols + c0 + c;
      Pack v = load8(x, at);
      uint32_t words[2];
      for (int w = 0; w < 2; ++w) {
        uint16_t lo = toFp8x2(v.v[4 * w] * scale(r0 + row, c0 + c + 4 * w),
                              v.v[4 * w + 1] * scale(r0 + row, c0 + c + 4 * w + 1), f);
        uint16_t hi = toFp8x2(v.v[4 * w + 2] * scale(r0 + row, c0 + c + 4 * w + 2),
                              v.v[4 * w + 3] * scale(r0 + row, c0 + c + 4 * w + 3), f);
        words[w] = uint32_t(lo) | (uint32_t(hi) << 16);
      }
      if (q)
        *reinterpret_cast<uint2 *>(q + at) = make_uint2(words[0], words[1]);
      if (qt)
        for (int j = 0; j < kPack; ++j) tile[row][c + j] = uint8_t(words[j / 4] >> (8 * (j % 4)));
    }
  } else {
    for (int p = threadIdx.x; p < kTile * kTile; p += blockDim.x) {
      int row = p / kTile, c = p % kTile;
      if (r0 + row >= rows || c0 + c >= cols)
        continue;
      int64_t at = (r0 + row) * cols + c0 + c;
      uint8_t b = toFp8(x[at] * scale(r0 + row, c0 + c), f);
      if (q)
        q[at] = b;
      tile[row][c] = b;
    }
  }
  if (!qt)
    return;
  __syncthreads();
  // q^T is [cols, rows]: its row c0 + c holds the tile's column c.
  if (packed) {
    for (int p = threadIdx.x; p < kTile * kTile / kPack; p += blockDim.x) {
      int c = p / (kTile / kPack), row = (p % (kTile / kPack)) * kPack;
      uint32_t words[2] = {0, 0};
      for (int j = 0; j < kPack; ++j) words[j / 4] |= uint32_t(tile[row + j][c]) << (8 * (j % 4));
      *reinterpret_cast<uint2 *>(qt + (c0 + c) * rows + r0 + row) = make_uint2(words[0], words[1]);
    }
  } else {
    for (int p = threadIdx.x; p < kTile * kTile; p += blockDim.x) {
      int c = p / kTile, row = p % kTile;
      if (r0 + row >= rows || c0 + c >= cols)
        continue;
      qt[(c0 + c) * rows + r0 + row] = tile[row][c];
    }
  }
}

Fp8Format formatOf(DType t) { return t == DType::F8E5M2 ? Fp8Format::E5M2 : Fp8Format::E4M3; }

/// out[m, n] = f32(out[m, n] * da[m]) * db[n], in place, rounded once to
/// out's dtype.
__global__ void scaleRowsColumnsKernel(FloatIn in, FloatOut out, int64_t m, int64_t n,
                                       const float *da, bool daPerRow, const float *db,
                                       bool dbPerCol) {
  LOOM_GRID_STRIDE(i, m * n) {
    int64_t r = i / n, c = i % n;
    float v = in[i] * da[daPerRow ? r : 0];
    out.store(i, v * db[dbPerCol ? c : 0]);
  }
}

} // namespace

void scaleRowsAndColumns(const DevTensor &out, const float *da, bool daPerRow, const float *db,
                         bool dbPerCol, CudaContext &ctx) {
  int64_t n = out.shape().back(), m = n ? out.numel() / n : 0;
  if (m * n == 0)
    return;
  scaleRowsColumnsKernel<<<gridFor(m * n), kThreads, 0, ctx.stream>>>(
      floatIn(out), floatOut(out), m, n, da, daPerRow, db, dbPerCol);
}

/// Tensorwise amax bits of x into *bits (zeroed by the caller).
void tensorAmax(const DevTensor &x, uint32_t *bits, CudaContext &ctx) {
  int64_t n = x.numel();
  if (n == 0)
    return;
  bool packed = packable(n, {&x});
  tensorAmaxKernel<<<packed ? packGrid(n) : gridFor(n), kThreads, 0, ctx.stream>>>(floatIn(x), n,
                                                                                   packed, bits);
}

void launchFp8Scale(const CudaCall &c, CudaContext &ctx) {
  const DevTensor &x = c.in[0], &s = c.out[0], &inv = c.out[1];
  int64_t rows = x.shape()[0], cols = x.shape()[1];
  Fp8Format f = c.instr->ints[0] ? Fp8Format::E5M2 : Fp8Format::E4M3;
  bool pow2 = c.instr->ints[1] != 0;
  bool perRow = s.shape()[0] == rows && rows != 1, perCol = s.shape()[1] == cols && cols != 1;
  FloatIn xin = floatIn(x);
  if (perRow) {
    bool packed = rowsPackable(cols, {&x});
    int64_t threads = rows * 32;
    rowScaleKernel<<<unsigned((threads + kThreads - 1) / kThreads), kThreads, 0, ctx.stream>>>(
        xin, rows, cols, packed, f, pow2, s.as<float>(), inv.as<float>());
    return;
  }
  if (x.numel() == 1) { // an amax already found (Fp8Amax, or a producer's): one thread
    finishScaleKernel<<<1, 1, 0, ctx.stream>>>(1, f, pow2, xin, s.as<float>(), inv.as<float>());
    return;
  }
  // The amax accumulates in the scale buffer, as bits, from zero.
  cudaMemsetAsync(s.data, 0, size_t(s.numel()) * sizeof(float), ctx.stream);
  auto *bits = static_cast<uint32_t *>(s.data);
  if (perCol) {
    int64_t chunks = std::min<int64_t>((rows + 255) / 256, 4096);
    int64_t perChunk = (rows + chunks - 1) / chunks;
    dim3 grid(unsigned((cols + 31) / 32), unsigned(chunks));
    columnAmaxKernel<<<grid, dim3(32, 8), 0, ctx.stream>>>(xin, rows, cols, perChunk, bits);
  } else {
    tensorAmax(x, bits, ctx);
  }
  finishScaleKernel<<<gridFor(s.numel()), kThreads, 0, ctx.stream>>>(
      s.numel(), f, pow2, FloatIn{}, s.as<float>(), inv.as<float>());
}

void launchFp8Amax(const CudaCall &c, CudaContext &ctx) { launchTensorAmax(c.in[0], c.out[0], ctx); }

void launchTensorAmax(const DevTensor &x, const DevTensor &amax, CudaContext &ctx) {
  cudaMemsetAsync(amax.data, 0, sizeof(float), ctx.stream);
  tensorAmax(x, static_cast<uint32_t *>(amax.data), ctx);
}

bool kernelFindsAmax(OpCode op) {
  switch (op) {
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::RmsNorm: case OpCode::RmsNormGrad: case OpCode::SwiGlu: case OpCode::SwiGluGrad:
  case OpCode::Transpose:
    return true;
  default:
    return false;
  }
}

void amaxAfterKernel(const CudaCall &c, CudaContext &ctx) {
  for (size_t k = 0; k < fusedAmaxCount(*c.instr); ++k)
    tensorAmax(c.out[k], fusedAmaxBits(c, k), ctx);
}

uint32_t *fusedAmaxBits(const CudaCall &c, size_t k) {
  if (k >= fusedAmaxCount(*c.instr))
    return nullptr;
  return static_cast<uint32_t *>(c.out[fusedAmaxRegularOutputs(c.instr->op) + k].data);
}

FusedAmaxScope::FusedAmaxScope(const CudaCall &c, CudaContext &ctx) : c_(c), ctx_(ctx) {
  for (size_t k = 0; k < fusedAmaxCount(*c.instr); ++k)
    cudaMemsetAsync(fusedAmaxBits(c, k), 0, sizeof(uint32_t), ctx.stream);
}

FusedAmaxScope::~FusedAmaxScope() {
  if (!kernelFindsAmax(c_.instr->op))
    amaxAfterKernel(c_, ctx_);
}

void launchFp8Cast(const CudaCall &c, CudaContext &ctx) {
  const DevTensor &x = c.in[0], &s = c.in[1];
  int64_t rows = x.shape()[0], cols = x.shape()[1];
  int64_t layout = c.instr->ints[0];
  uint8_t *q = layout == 1 ? nullptr : c.out[0].as<uint8_t>();
  uint8_t *qt = layout == 0 ? nullptr : c.out[layout == 1 ? 0 : 1].as<uint8_t>();
  ScaleAt scale{s.as<float>(), s.shape()[0] == 1 ? 0 : 1, s.shape()[1] == 1 ? 0 : 1};
  if (rows == 0 || cols == 0)
    return;
  // 16-byte loads of x and 8-byte stores of q and q^T need aligned bases.
  FloatIn xin = floatIn(x);
  bool aligned = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
                 (!q || reinterpret_cast<uintptr_t>(q) % 8 == 0) &&
                 (!qt || reinterpret_cast<uintptr_t>(qt) % 8 == 0);
  dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((rows + kTile - 1) / kTile));
  castTileKernel<<<grid, kThreads, 0, ctx.stream>>>(xin, rows, cols, scale,
                                                    formatOf(c.out[0].dtype()), aligned, q, qt);
}

} // namespace loom::rt::cuda
