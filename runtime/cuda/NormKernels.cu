//===- NormKernels.cu - Norms, Softmax, Reduce, SumSquares and grads ------===//
//
// Part of loom, under the Apache License v2.0.
//
// Row kernels: one block per row (or per softmax line, or per reduced output
// element); the block's threads stride over the row and combine with a
// fixed-shape tree (blockSum/blockMax), accumulating in double as the CPU
// reference does. RmsNorm rows of 64, 128 and 256 elements (per-head q/k
// norms) take eight elements a lane, two to eight rows a warp (sumLanes);
// other rows of at most 256 one warp each (warpSum). The weight gradients of the norms are column sums over all
// rows; they run as two deterministic passes, partial sums over chunks of
// 16 to 64 rows (columnChunks; eight columns a thread where rows allow) and then each
// column's chunks in one block (strided, then the block's fixed tree), so
// no float atomics are needed and every run gives the same bits. The norms' backward keeps each
// row's statistics (mean, 1/std) in scratch for the column pass; the lane
// kernel adds its chunks' partials itself, as it writes dx.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "cuda/Fp8Amax.cuh"
#include "cuda/Fp8Cuda.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace loom::rt::cuda {
namespace {

constexpr int kRowThreads = 128;
constexpr int64_t kChunkRows = 64;

/// The column sums' first pass in chunks of kChunkRows rows, halved (to
/// 16 at least) while the pass would have fewer than two waves of (chunk,
/// eight columns) items on an H100. A bias of 1,280 columns over 8,192
/// rows had 80 blocks of 256 threads for 132 SMs (755 GB/s), the q/k
/// norms' 128 columns and the hidden norms' 2,048 had 128. The partials
/// of a chunk are still added in row order, and the chunks in order.
struct ColumnChunks {
  int64_t rows, count; // rows a chunk, chunks
};
ColumnChunks columnChunks(int64_t rows, int64_t D) {
  const int64_t groups = std::max<int64_t>(1, D / 8), enough = 2 * 132 * 256;
  int64_t chunk = kChunkRows;
  while (chunk > 16 && (rows + chunk - 1) / chunk * groups < enough) chunk /= 2;
  return {chunk, (rows + chunk - 1) / chunk};
}

/// A norm gradient's dx plus its optional addend (`a`, f32, dx's shape):
/// the f32 add a separate Add instruction did, rounded once
/// (loom-fuse-norm-grad-accumulate).
__device__ inline float plusAddend(float dx, const float *a, int64_t i) {
  return a ? dx + a[i] : dx;
}

int64_t rowsOf(const DevTensor &x) {
  int64_t d = x.shape().empty() ? 1 : x.shape().back();
  return d ? x.numel() / d : 0;
}

// y = x / sqrt(mean(x^2) + eps) * w; x and y may be bf16 storage. With
// `packed` (D % 8 == 0, 16-byte aligned rows) each thread moves eight
// consecutive elements per access.
// `amax`: a fused fp8 amax output (cuda/Fp8Amax.cuh), or null.
__global__ void rmsNormKernel(FloatIn x, const float *w, FloatOut y, int64_t D, double eps,
                              bool packed, uint32_t *amax) {
  __shared__ double red[32];
  int64_t row = int64_t(blockIdx.x) * D;
  double ss = 0;
  if (packed) {
    for (int64_t i = int64_t(threadIdx.x) * kPack; i < D; i += int64_t(blockDim.x) * kPack) {
      Pack p = load8(x, row + i);
#pragma unroll
      for (int k = 0; k < kPack; ++k) ss += double(p.v[k]) * p.v[k];
    }
  } else {
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += double(x[row + i]) * x[row + i];
  }
  ss = blockSum(ss, red);
  double inv = 1.0 / sqrt(ss / double(D) + eps);
  uint32_t m = 0;
  if (packed) {
    for (int64_t i = int64_t(threadIdx.x) * kPack; i < D; i += int64_t(blockDim.x) * kPack) {
      Pack p = load8(x, row + i);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        p.v[k] = float(p.v[k] * inv * w[i + k]);
        maxStored(amax, m, y, p.v[k]);
      }
      store8(y, row + i, p);
    }
  } else {
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      float v = float(x[row + i] * inv * w[i]);
      y.store(row + i, v);
      maxStored(amax, m, y, v);
    }
  }
  flushAmax(amax, m);
}

// y = (x - mean) / sqrt(var + eps) * w + b, var = mean((x - mean)^2); x
// and y may be bf16 storage (GPT-2's normed input to a bf16 GEMM). With
// `packed`, eight consecutive elements per thread and access, as
// rmsNormKernel (the three passes at 954 GB/s one element at a time).
__global__ void layerNormKernel(FloatIn x, const float *w, const float *b, FloatOut y, int64_t D,
                                double eps, bool packed) {
  __shared__ double red[32];
  int64_t row = int64_t(blockIdx.x) * D;
  const int64_t first = int64_t(threadIdx.x) * (packed ? kPack : 1);
  const int64_t step = int64_t(blockDim.x) * (packed ? kPack : 1);
  // body(column, x) over the thread's columns, in its order.
  auto each = [&](auto &&body) {
    for (int64_t i = first; i < D; i += step) {
      if (packed) {
        Pack p = load8(x, row + i);
#pragma unroll
        for (int k = 0; k < kPack; ++k) body(i + k, p.v[k]);
      } else {
        body(i, x[row + i]);
      }
    }
  };
  double sum = 0;
  each([&](int64_t, float v) { sum += v; });
  double mean = blockSum(sum, red) / double(D), sq = 0;
  each([&](int64_t, float v) { sq += (v - mean) * (v - mean); });
  double inv = 1.0 / sqrt(blockSum(sq, red) / double(D) + eps);
  auto value = [&](int64_t i, float v) {
    return float((v - mean) * inv * w[i] + (b ? b[i] : 0.0));
  };
  if (packed) {
    for (int64_t i = first; i < D; i += step) {
      Pack p = load8(x, row + i);
#pragma unroll
      for (int k = 0; k < kPack; ++k) p.v[k] = value(i + k, p.v[k]);
      store8(y, row + i, p);
    }
  } else {
    for (int64_t i = first; i < D; i += step) y.store(row + i, value(i, x[row + i]));
  }
}

/// The columns of one row of a norm's backward that this thread owns, with
/// x and dy beside each (either may be bf16 storage): with `packed` (D % 8
/// == 0, 16-byte aligned rows, as rmsNormKernel) eight consecutive columns
/// per step moved with 16-byte accesses, else columns t, t + blockDim.x, ...
struct GradRowColumns {
  FloatIn x, dy;
  int64_t row, D;
  bool packed;
  __device__ int64_t first() const { return int64_t(threadIdx.x) * (packed ? kPack : 1); }
  __device__ int64_t step() const { return int64_t(blockDim.x) * (packed ? kPack : 1); }
  /// body(column, x, dy) for each owned column, in the thread's order.
  template <typename Body> __device__ void each(Body &&body) const {
    for (int64_t i = first(); i < D; i += step()) {
      if (packed) {
        Pack xp = load8(x, row * D + i), gp = load8(dy, row * D + i);
#pragma unroll
        for (int k = 0; k < kPack; ++k) body(i + k, xp.v[k], gp.v[k]);
      } else {
        body(i, x[row * D + i], dy[row * D + i]);
      }
    }
  }
};

// RmsNormGrad, per row, r = 1/sqrt(mean(x^2) + eps), n = x r, g = dy w:
//   dx = r (g - n mean(g n)) (plus `addend`, if any); keeps r for the dw
//   pass. dy and dx may be bf16 storage.
__global__ void rmsNormGradRowKernel(FloatIn x, const float *w, FloatIn dy, FloatOut dx,
                                     const float *addend, double *rstd, int64_t D, double eps,
                                     bool packed, uint32_t *amax) {
  __shared__ double red[32];
  int64_t row = blockIdx.x;
  const GradRowColumns cols{x, dy, row, D, packed};
  const int64_t first = cols.first(), step = cols.step();
  double ss = 0;
  cols.each([&](int64_t, float xv, float) { ss += double(xv) * xv; });
  double r = 1.0 / sqrt(blockSum(ss, red) / double(D) + eps);
  double gn = 0;
  cols.each([&](int64_t i, float xv, float g) { gn += double(g) * w[i] * (xv * r); });
  double meanGn = blockSum(gn, red) / double(D);
  uint32_t m = 0; // dx's fused fp8 amax (cuda/Fp8Amax.cuh), if `amax`
  if (packed) {
    for (int64_t i = first; i < D; i += step) {
      Pack xp = load8(x, row * D + i), gp = load8(dy, row * D + i);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        xp.v[k] = plusAddend(float(r * (double(gp.v[k]) * w[i + k] - xp.v[k] * r * meanGn)),
                             addend, row * D + i + k);
        maxStored(amax, m, dx, xp.v[k]);
      }
      store8(dx, row * D + i, xp);
    }
  } else {
    for (int64_t i = first; i < D; i += step) {
      float v = plusAddend(float(r * (double(dy[row * D + i]) * w[i] - x[row * D + i] * r * meanGn)),
                           addend, row * D + i);
      dx.store(row * D + i, v);
      maxStored(amax, m, dx, v);
    }
  }
  flushAmax(amax, m);
  if (threadIdx.x == 0) rstd[row] = r;
}

// LayerNormGrad, per row, xhat = (x - mean) r, g = dy w:
//   dx = r (g - mean(g) - xhat mean(g xhat)); keeps mean and r. dy and dx
//   may be bf16 storage. With `packed` a thread owns eight consecutive
//   columns per step, as in rmsNormGradRowKernel.
__global__ void layerNormGradRowKernel(FloatIn x, const float *w, FloatIn dy, FloatOut dx,
                                       const float *addend, double *stats, int64_t D, double eps,
                                       bool packed) {
  __shared__ double red[32];
  int64_t row = blockIdx.x;
  const GradRowColumns cols{x, dy, row, D, packed};
  const int64_t first = cols.first(), step = cols.step();
  double sum = 0;
  cols.each([&](int64_t, float xv, float) { sum += xv; });
  double mu = blockSum(sum, red) / double(D), sq = 0;
  cols.each([&](int64_t, float xv, float) { sq += (xv - mu) * (xv - mu); });
  double r = 1.0 / sqrt(blockSum(sq, red) / double(D) + eps);
  double g = 0, gx = 0;
  cols.each([&](int64_t i, float xv, float dyv) {
    double gi = double(dyv) * w[i];
    g += gi;
    gx += gi * (xv - mu) * r;
  });
  double meanG = blockSum(g, red) / double(D);
  double meanGx = blockSum(gx, red) / double(D);
  if (packed) {
    for (int64_t i = first; i < D; i += step) {
      Pack xp = load8(x, row * D + i), gp = load8(dy, row * D + i);
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        xp.v[k] = plusAddend(
            float(r * (double(gp.v[k]) * w[i + k] - meanG - (xp.v[k] - mu) * r * meanGx)),
            addend, row * D + i + k);
      store8(dx, row * D + i, xp);
    }
  } else {
    for (int64_t i = first; i < D; i += step)
      dx.store(row * D + i,
               plusAddend(float(r * (double(dy[row * D + i]) * w[i] - meanG -
                                     (x[row * D + i] - mu) * r * meanGx)),
                          addend, row * D + i));
  }
  if (threadIdx.x == 0) {
    stats[2 * row] = mu;
    stats[2 * row + 1] = r;
  }
}

/// The terms of the norms' weight gradients, per (row, column):
///   kind 0: dy x rstd          (RmsNorm dw; stats = rstd per row)
///   kind 1: dy (x - mean) rstd (LayerNorm dw; stats = mean, rstd per row)
///   kind 2: dy                 (LayerNorm db)
/// The term from its values (x unused by kind 2), for the one-column and
/// the packed passes alike.
__device__ inline double normTermOf(int kind, double g, float x, const double *stats,
                                    int64_t row) {
  if (kind == 0) return g * x * stats[row];
  if (kind == 1) return g * (x - stats[2 * row]) * stats[2 * row + 1];
  return g;
}

/// normTermOf with the row's statistics in hand (mean, rstd) rather than
/// in `stats`: the same expression, so the same bits.
__device__ inline double normTermOf(int kind, double g, float x, double mean, double rstd) {
  if (kind == 0) return g * x * rstd;
  if (kind == 1) return g * (x - mean) * rstd;
  return g;
}

//===--- Rows held in registers -------------------------------------------===//
//
// The packed row kernels above read a row once per pass: RmsNorm twice,
// LayerNorm three times, their gradients three and four times (x and dy),
// from L2 at best, behind a block-wide reduction each. Rows of up to
// kRowThreads x 8 x kPacks elements (every suite shape's hidden size) are
// read once into registers instead: thread t holds packs t, t +
// blockDim.x, ..., the columns and order of the packed loops, and the
// arithmetic is theirs, so the results are the same bits. LayerNormGrad's
// two means share one pair of barriers (blockSum2, the same tree). The
// gradients' rows of 1,024 to 2,048 (eight whole columns a thread) take
// normGradStreamKernel below instead, which also adds the weight gradients'
// partial column sums; the cached kernel and the column pass remain for
// the rest and with LOOM_FUSED_NORM_GRAD=0. (Until 2026-11-28 rows of two
// packs a thread took the pass-by-pass row kernel: llama-1b's
// rms_norm_grad ran at 1,232 GB/s.)

/// The packs of one row that this thread owns, held in registers.
template <int kPacks> struct RowPacks {
  Pack v[kPacks];
  __device__ static int64_t col(int j) {
    return (int64_t(threadIdx.x) + int64_t(j) * blockDim.x) * kPack;
  }
  __device__ void load(FloatIn x, int64_t base, int64_t D) {
    // the dtype decided once, so that every pack's load issues first
    auto all = [&](FloatIn xc) {
#pragma unroll
      for (int j = 0; j < kPacks; ++j)
        if (col(j) < D) v[j] = load8(xc, base + col(j));
    };
    x.bf16 ? all(FloatIn{x.p, true}) : all(FloatIn{x.p, false});
  }
};

/// body(column, pack index, element) over the owned columns, in order.
template <int kPacks, typename Body> __device__ inline void eachCached(int64_t D, Body &&body) {
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    int64_t i = RowPacks<kPacks>::col(j);
    if (i < D)
#pragma unroll
      for (int k = 0; k < kPack; ++k) body(i + k, j, k);
  }
}

/// Whether the norm gradients take normGradStreamKernel (dx and the weight
/// gradients' partials in one pass) where it applies: on unless
/// LOOM_FUSED_NORM_GRAD=0, which keeps the row kernels and the separate
/// column pass, for timing the two forms in one run.
bool fusedNormGrad() {
  static const bool on = [] {
    const char *e = std::getenv("LOOM_FUSED_NORM_GRAD");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

/// The most packs a thread may hold, by row length: 0 when the row kernels
/// above must run (an unaligned row or one too long for registers).
int cachedPacks(int64_t D, bool packed) {
  if (!packed) return 0;
  if (D <= kRowThreads * kPack * 2) return 2;
  if (D <= kRowThreads * kPack * 4) return 4;
  return 0;
}

/// With kAdd (AddRmsNorm), x is a + b as Add rounds it: the sum is stored
/// to `sum` and normalized from the registers it was stored from, so the
/// bits are those of an Add and then this kernel on its output.
template <int kPacks, bool kAdd = false>
__global__ void __launch_bounds__(kRowThreads)
rmsNormCachedKernel(FloatIn x, const float *w, FloatOut y, int64_t D, double eps, uint32_t *amax,
                    FloatIn b, FloatOut sum) {
  __shared__ double red[32];
  const int64_t row = int64_t(blockIdx.x) * D;
  RowPacks<kPacks> xs;
  xs.load(x, row, D);
  if (kAdd) {
    RowPacks<kPacks> bs;
    bs.load(b, row, D);
    eachCached<kPacks>(D, [&](int64_t, int j, int k) { xs.v[j].v[k] += bs.v[j].v[k]; });
#pragma unroll
    for (int j = 0; j < kPacks; ++j)
      if (xs.col(j) < D) store8(sum, row + xs.col(j), xs.v[j]);
  }
  double ss = 0;
  eachCached<kPacks>(D, [&](int64_t, int j, int k) { ss += double(xs.v[j].v[k]) * xs.v[j].v[k]; });
  double inv = 1.0 / sqrt(blockSum(ss, red) / double(D) + eps);
  uint32_t m = 0;
  eachCached<kPacks>(D, [&](int64_t i, int j, int k) {
    float &v = xs.v[j].v[k];
    v = float(v * inv * w[i]);
    maxStored(amax, m, y, v);
  });
#pragma unroll
  for (int j = 0; j < kPacks; ++j)
    if (xs.col(j) < D) store8(y, row + xs.col(j), xs.v[j]);
  flushAmax(amax, m);
}

template <int kPacks>
__global__ void __launch_bounds__(kRowThreads)
layerNormCachedKernel(FloatIn x, const float *w, const float *b, FloatOut y, int64_t D, double eps) {
  __shared__ double red[32];
  const int64_t row = int64_t(blockIdx.x) * D;
  RowPacks<kPacks> xs;
  xs.load(x, row, D);
  double sum = 0;
  eachCached<kPacks>(D, [&](int64_t, int j, int k) { sum += xs.v[j].v[k]; });
  double mean = blockSum(sum, red) / double(D), sq = 0;
  eachCached<kPacks>(D, [&](int64_t, int j, int k) {
    float v = xs.v[j].v[k];
    sq += (v - mean) * (v - mean);
  });
  double inv = 1.0 / sqrt(blockSum(sq, red) / double(D) + eps);
  eachCached<kPacks>(D, [&](int64_t i, int j, int k) {
    float &v = xs.v[j].v[k];
    v = float((v - mean) * inv * w[i] + (b ? b[i] : 0.0));
  });
#pragma unroll
  for (int j = 0; j < kPacks; ++j)
    if (xs.col(j) < D) store8(y, row + xs.col(j), xs.v[j]);
}

/// One row of a norm's backward on the packs this thread holds (RmsNorm, or
/// LayerNorm with kLayerNorm): dx replaces x in `xs`, the row's mean (0 for
/// RmsNorm) and rstd come back, and term(j, k, dy, x, mean, rstd) sees each
/// element's dy and x before x is replaced (the fused kernel's partial
/// column sums); plus(v, j, k, i) returns the element's rounded dx plus
/// its addend, if any (plusAddend's f32 add), from wherever the kernel
/// holds the addend's row. `red` holds 64 values. RmsNorm:
///   r = 1/sqrt(mean(x^2) + eps), n = x r, g = dy w, dx = r (g - n mean(g n));
/// LayerNorm, xhat = (x - mean) r:
///   dx = r (g - mean(g) - xhat mean(g xhat)).
template <bool kLayerNorm, int kPacks, typename Plus, typename Term>
__device__ inline void normGradRow(RowPacks<kPacks> &xs, const RowPacks<kPacks> &gs, const float *w,
                                   FloatOut dx, Plus &&plus, int64_t D, double eps, double *red,
                                   const uint32_t *amax, uint32_t &m, double &mu, double &r,
                                   Term &&term) {
  mu = 0;
  if (kLayerNorm) {
    double sum = 0;
    eachCached<kPacks>(D, [&](int64_t, int j, int k) { sum += xs.v[j].v[k]; });
    mu = blockSum(sum, red) / double(D);
    double sq = 0;
    eachCached<kPacks>(D, [&](int64_t, int j, int k) {
      float xv = xs.v[j].v[k];
      sq += (xv - mu) * (xv - mu);
    });
    r = 1.0 / sqrt(blockSum(sq, red) / double(D) + eps);
    double g = 0, gx = 0;
    eachCached<kPacks>(D, [&](int64_t i, int j, int k) {
      double gi = double(gs.v[j].v[k]) * w[i];
      g += gi;
      gx += gi * (xs.v[j].v[k] - mu) * r;
    });
    blockSum2(g, gx, red);
    double meanG = g / double(D), meanGx = gx / double(D);
    eachCached<kPacks>(D, [&](int64_t i, int j, int k) {
      float &v = xs.v[j].v[k];
      double gv = gs.v[j].v[k];
      term(j, k, gv, v, mu, r);
      v = plus(float(r * (gv * w[i] - meanG - (v - mu) * r * meanGx)), j, k, i);
    });
  } else {
    double ss = 0;
    eachCached<kPacks>(D, [&](int64_t, int j, int k) { ss += double(xs.v[j].v[k]) * xs.v[j].v[k]; });
    r = 1.0 / sqrt(blockSum(ss, red) / double(D) + eps);
    double gn = 0;
    eachCached<kPacks>(D, [&](int64_t i, int j, int k) {
      gn += double(gs.v[j].v[k]) * w[i] * (xs.v[j].v[k] * r);
    });
    double meanGn = blockSum(gn, red) / double(D);
    eachCached<kPacks>(D, [&](int64_t i, int j, int k) {
      float &v = xs.v[j].v[k];
      double gv = gs.v[j].v[k];
      term(j, k, gv, v, mu, r);
      v = plus(float(r * (gv * w[i] - v * r * meanGn)), j, k, i);
      maxStored(amax, m, dx, v);
    });
  }
}

/// The norms' backward a row to a block, the row in registers; the row's
/// statistics go to `stats` (rstd; or mean, rstd for LayerNorm) for the
/// column pass. RmsNorm's dx may carry a fused fp8 amax. With copy.p, dx is
/// stored a second time from the same registers into `copy` (bf16: dx's
/// rounded copy, storesRoundedDx).
template <bool kLayerNorm, int kPacks>
__global__ void __launch_bounds__(kRowThreads)
normGradCachedKernel(FloatIn x, const float *w, FloatIn dy, FloatOut dx,
                     const float *addend, double *stats, int64_t D, double eps, uint32_t *amax,
                     FloatOut copy) {
  __shared__ double red[64];
  const int64_t row = blockIdx.x;
  RowPacks<kPacks> xs, gs, as;
  xs.load(x, row * D, D);
  gs.load(dy, row * D, D);
  // The addend's row loads with x and dy, eight elements an access, so its
  // latency overlaps theirs: read one element at a time after the row's
  // reductions, it held every block for a third memory round trip
  // (rms_norm_grad with an addend took 0.154 ms against 0.126 without in
  // llama-1b's step). Each element reads its own address before the
  // thread stores dx there, so an addend that dx overwrites in place is
  // still read first.
  if (addend) as.load(FloatIn{addend, false}, row * D, D);
  uint32_t m = 0;
  double mu, r;
  auto plus = [&](float v, int j, int k, int64_t) { return addend ? v + as.v[j].v[k] : v; };
  normGradRow<kLayerNorm>(xs, gs, w, dx, plus, D, eps, red, amax, m, mu, r,
                          [](int, int, double, float, double, double) {});
#pragma unroll
  for (int j = 0; j < kPacks; ++j)
    if (xs.col(j) < D) {
      store8(dx, row * D + xs.col(j), xs.v[j]);
      if (copy.p) store8(copy, row * D + xs.col(j), xs.v[j]);
    }
  if (!kLayerNorm) flushAmax(amax, m);
  if (threadIdx.x != 0) return;
  if (kLayerNorm) {
    stats[2 * row] = mu;
    stats[2 * row + 1] = r;
  } else {
    stats[row] = r;
  }
}

// The norms' backward with the weight gradients' partial column sums fused
// in, a pack of eight columns a thread (blockDim.x: D / 8 rounded up to
// whole warps): block b walks the rows of chunk b (streamChunks) in order,
// loading the next row's x, dy and addend while this row's reductions run,
// writes dx (and its rounded copy), and adds each owned column's term
// (normTermOf: kind 0 RmsNorm, 1 and 2 LayerNorm's dw and db) in row
// order; columnFinishKernel adds the chunks in order. x and dy are read
// once: the two-pass form reads them again for the column sums, 6 of the
// 16 bytes an element that llama-1b's residual RmsNorm gradients move (f32
// x, bf16 dy, f32 addend in; f32 dx, bf16 copy out); it ran at 1,613 GB/s
// in the H200 step.
//
// Timed alone on an H200 (bench/gpu/norm_bench.cu, 8,192 rows, 2026-11-29),
// the block's rows, each behind two or three block-wide reductions in
// double, are what bounds it, more than memory: the column partials kept
// in registers (118 of them, two blocks an SM) took 0.117 ms for
// llama-1b's residual operands, in shared memory with three blocks an SM
// 0.110 (two passes: 0.140); copying the rows ahead into shared memory
// with cp.async instead of registers was no faster (0.126 with three
// stages). Rows longer than 2,048 keep the two passes: at 4,096 (one block
// of 512 threads an SM) the streaming form was 2-5% slower without an
// addend.
//
// The first fused form (until 2026-11-29) held two packs a thread and two
// rows of them, 166 registers: three blocks of 128 threads an SM, and 512
// chunks of 16 rows for 396 resident blocks, so 1.3 waves of long blocks
// (0.135 ms against the two passes' 0.109 alone). Here there are as many
// chunks as blocks fit at once (one wave).
constexpr int kStreamMaxThreads = 256; // rows of up to 2,048

template <bool kLayerNorm, bool kAdd>
__global__ void __launch_bounds__(kStreamMaxThreads, 3)
normGradStreamKernel(FloatIn x, const float *w, FloatIn dy, FloatOut dx, const float *addend,
                     double *partialW, double *partialB, int64_t rows, int64_t D, double eps,
                     int64_t chunkRows, uint32_t *amax, FloatOut copy) {
  __shared__ double red[64];
  // The column partials, [k][thread]: consecutive threads, consecutive
  // doubles (no bank conflicts); in registers they cost a block an SM.
  __shared__ double sumW[kPack * kStreamMaxThreads], sumB[kLayerNorm ? kPack * kStreamMaxThreads : 1];
  const int t = threadIdx.x, threads = blockDim.x;
  const int64_t r0 = int64_t(blockIdx.x) * chunkRows, r1 = min(rows, r0 + chunkRows);
  const int64_t col = RowPacks<1>::col(0);
#pragma unroll
  for (int k = 0; k < kPack; ++k) {
    sumW[k * threads + t] = 0;
    if (kLayerNorm) sumB[k * threads + t] = 0;
  }
  RowPacks<1> xs, gs, as, xNext, gNext, aNext;
  auto load = [&](RowPacks<1> &xr, RowPacks<1> &gr, RowPacks<1> &ar, int64_t row) {
    xr.load(x, row * D, D);
    gr.load(dy, row * D, D);
    if (kAdd) ar.load(FloatIn{addend, false}, row * D, D);
  };
  if (r0 < r1) load(xs, gs, as, r0);
  uint32_t m = 0;
  for (int64_t row = r0; row < r1; ++row) {
    if (row + 1 < r1) load(xNext, gNext, aNext, row + 1);
    double mu, r;
    normGradRow<kLayerNorm>(
        xs, gs, w, dx, [&](float v, int, int k, int64_t) { return kAdd ? v + as.v[0].v[k] : v; },
        D, eps, red, amax, m, mu, r,
        [&](int, int k, double gv, float xv, double mean, double rstd) {
          sumW[k * threads + t] += normTermOf(kLayerNorm ? 1 : 0, gv, xv, mean, rstd);
          if (kLayerNorm) sumB[k * threads + t] += gv;
        });
    if (col < D) {
      store8(dx, row * D + col, xs.v[0]);
      if (copy.p) store8(copy, row * D + col, xs.v[0]);
    }
    xs = xNext;
    gs = gNext;
    if (kAdd) as = aNext;
  }
  if (col < D)
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      partialW[int64_t(blockIdx.x) * D + col + k] = sumW[k * threads + t];
      if (kLayerNorm) partialB[int64_t(blockIdx.x) * D + col + k] = sumB[k * threads + t];
    }
  if (!kLayerNorm) flushAmax(amax, m);
}

/// The threads of normGradStreamKernel's blocks for rows of D: a pack each,
/// whole warps.
int streamThreads(int64_t D) { return int((D / kPack + 31) / 32 * 32); }

/// Whether rows of D take normGradStreamKernel: eight whole columns a
/// thread, 1,024 to 2,048 of them (the rows it was timed on: hidden sizes
/// of 1,280 to 2,048; shorter rows would leave its blocks a few warps
/// each, with shared memory sized for 256 threads).
bool streamable(int64_t D) {
  return D % kPack == 0 && D >= 1024 && streamThreads(D) <= kStreamMaxThreads;
}

/// The blocks of normGradStreamKernel<kLayerNorm, kAdd> of `threads` that
/// fit on an SM, asked of CUDA once per block size (every launch and every
/// scratch estimate of a norm gradient needs it).
template <bool kLayerNorm, bool kAdd> int streamBlocksPerSm(int threads) {
  static std::array<std::atomic<int>, kStreamMaxThreads / 32 + 1> known{};
  std::atomic<int> &slot = known[size_t(threads / 32)];
  if (int n = slot.load(std::memory_order_relaxed)) return n;
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, normGradStreamKernel<kLayerNorm, kAdd>,
                                                    threads, 0) != cudaSuccess || n < 1) {
    cudaGetLastError(); // no device to ask (a scratch estimate without a GPU): not kept
    return 1;
  }
  slot.store(n, std::memory_order_relaxed);
  return n;
}

/// normGradStreamKernel's chunks for `rows` rows of D: as many as its
/// blocks can be resident at once on 132 SMs (an H100 SXM's and an
/// H200's; a fixed count rather than the device's, so the partials' order,
/// and the bits, do not depend on which device runs them).
ColumnChunks streamChunks(bool layerNorm, bool add, int64_t rows, int64_t D) {
  const int threads = streamThreads(D);
  const int perSm = layerNorm ? (add ? streamBlocksPerSm<true, true>(threads)
                                     : streamBlocksPerSm<true, false>(threads))
                              : (add ? streamBlocksPerSm<false, true>(threads)
                                     : streamBlocksPerSm<false, false>(threads));
  const int64_t slots = 132 * int64_t(perSm);
  const int64_t chunk = std::max<int64_t>(1, (rows + slots - 1) / slots);
  return {chunk, (rows + chunk - 1) / chunk};
}

// Rows of at most kWarpRow elements (per-head q/k norms, [B, T, H, 128])
// take one warp each, four rows to a block: a block per row would leave
// most of its threads idle and pay block-wide reductions for 128 values.
// The arithmetic is the block kernels'; only the summation tree differs.
constexpr int64_t kWarpRow = 256;

__device__ inline int64_t warpRow() {
  return int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
}

// A warp's row (at most kWarpRow = 8 x 32 elements) is loaded once into
// registers, lane l holding elements l, l + 32, ...: the order the passes
// below add them in, so the bits are those of reading the row pass by
// pass, which cost three reads of x and dy per row (qwen3-1.7b's q/k norm
// gradients ran at 740-940 GB/s).
constexpr int kWarpElems = int(kWarpRow / 32);

template <typename Load>
__device__ inline void loadWarpRow(float (&v)[kWarpElems], int64_t lane, int64_t D, Load &&load) {
#pragma unroll
  for (int j = 0; j < kWarpElems; ++j)
    if (lane + 32 * j < D) v[j] = load(lane + 32 * j);
}

__global__ void rmsNormWarpKernel(FloatIn x, const float *w, FloatOut y, int64_t rows, int64_t D,
                                  double eps, uint32_t *amax) {
  int64_t row = warpRow(), lane = threadIdx.x & 31;
  uint32_t m = 0;
  if (row < rows) {
    int64_t base = row * D;
    float xv[kWarpElems];
    // the dtype decided once, so that the loads issue together
    auto loadX = [&](FloatIn xc) { loadWarpRow(xv, lane, D, [&](int64_t i) { return xc[base + i]; }); };
    x.bf16 ? loadX(FloatIn{x.p, true}) : loadX(FloatIn{x.p, false});
    double ss = 0;
#pragma unroll
    for (int j = 0; j < kWarpElems; ++j)
      if (lane + 32 * j < D) ss += double(xv[j]) * xv[j];
    double inv = 1.0 / sqrt(warpSum(ss) / double(D) + eps);
#pragma unroll
    for (int j = 0; j < kWarpElems; ++j) {
      int64_t i = lane + 32 * j;
      if (i >= D) continue;
      float v = float(xv[j] * inv * w[i]);
      y.store(base + i, v);
      maxStored(amax, m, y, v);
    }
  }
  flushAmax(amax, m); // every thread of the block, rows or not
}

__global__ void rmsNormGradWarpKernel(FloatIn x, const float *w, FloatIn dy, FloatOut dx,
                                      const float *addend, double *rstd, int64_t rows, int64_t D,
                                      double eps, uint32_t *amax) {
  int64_t row = warpRow(), lane = threadIdx.x & 31;
  uint32_t m = 0;
  if (row < rows) {
    int64_t base = row * D;
    float xv[kWarpElems], gv[kWarpElems];
    // each dtype decided once, so that the loads issue together
    auto loadX = [&](FloatIn xc) { loadWarpRow(xv, lane, D, [&](int64_t i) { return xc[base + i]; }); };
    x.bf16 ? loadX(FloatIn{x.p, true}) : loadX(FloatIn{x.p, false});
    auto loadG = [&](FloatIn g) { loadWarpRow(gv, lane, D, [&](int64_t i) { return g[base + i]; }); };
    dy.bf16 ? loadG(FloatIn{dy.p, true}) : loadG(FloatIn{dy.p, false});
    double ss = 0;
#pragma unroll
    for (int j = 0; j < kWarpElems; ++j)
      if (lane + 32 * j < D) ss += double(xv[j]) * xv[j];
    double r = 1.0 / sqrt(warpSum(ss) / double(D) + eps);
    double gn = 0;
#pragma unroll
    for (int j = 0; j < kWarpElems; ++j)
      if (lane + 32 * j < D) gn += double(gv[j]) * w[lane + 32 * j] * (xv[j] * r);
    double meanGn = warpSum(gn) / double(D);
#pragma unroll
    for (int j = 0; j < kWarpElems; ++j) {
      int64_t i = lane + 32 * j;
      if (i >= D) continue;
      float v = plusAddend(float(r * (double(gv[j]) * w[i] - xv[j] * r * meanGn)), addend, base + i);
      dx.store(base + i, v);
      maxStored(amax, m, dx, v);
    }
    if (lane == 0) rstd[row] = r;
  }
  flushAmax(amax, m);
}

unsigned warpRowBlocks(int64_t rows) { return unsigned((rows + kRowThreads / 32 - 1) / (kRowThreads / 32)); }

//===--- Short rows eight elements a lane ---------------------------------===//
//
// Rows of D = 8 L elements, L = 8, 16 or 32 lanes a row (the per-head q/k
// norms: head dims 64, 128, 256), aligned: lane l of a row holds its
// elements 8 (l mod L) ... + 7 in one pack, loaded and stored with 16-byte
// accesses, and a warp holds 32 / L rows at once. The warp kernels above
// move four bytes a lane an access and took 1,470-1,630 GB/s (forward) and
// 695-746 GB/s (gradient, with its separate column pass) in qwen3-1.7b's
// step. The row sums are a lane's eight terms in order, then the lanes' tree
// (sumLanes); the weight gradient's partial column sums are added in
// registers as the warp walks its chunk of rows (the column pass's chunks,
// so the scratch is the same), then finished by columnFinishKernel: x and
// dy are read once.

/// Sum of v over the L lanes of this lane's row group (xor tree).
template <int L> __device__ inline double sumLanes(double v) {
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The lanes a row of D elements takes (8 elements each), or 0 when the
/// lane kernels do not apply.
int lanesPerRow(int64_t D) { return D == 64 ? 8 : D == 128 ? 16 : D == 256 ? 32 : 0; }

template <int L>
__global__ void __launch_bounds__(kRowThreads)
rmsNormLanesKernel(FloatIn x, const float *w, FloatOut y, int64_t rows, double eps,
                   uint32_t *amax) {
  constexpr int64_t D = 8 * L;
  const int lane = threadIdx.x & 31;
  const int64_t row = warpRow() * (32 / L) + lane / L, col = (lane % L) * 8;
  uint32_t m = 0;
  const bool live = row < rows;
  Pack v = {}, wv = load8(FloatIn{w, false}, col);
  if (live) v = load8(x, row * D + col);
  double ss = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) ss += double(v.v[k]) * v.v[k];
  double inv = 1.0 / sqrt(sumLanes<L>(ss) / double(D) + eps); // every lane: the shuffles
  if (live) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      v.v[k] = float(v.v[k] * inv * wv.v[k]);
      maxStored(amax, m, y, v.v[k]);
    }
    store8(y, row * D + col, v);
  }
  flushAmax(amax, m);
}

/// RmsNormGrad on lanes: warp w walks rows [w c, (w + 1) c) of `rows`
/// (c = chunkRows, a multiple of 32 / L), 32 / L rows a step, and writes
/// its partial column sums of dy x rstd to partial[w D ...].
template <int L>
__global__ void __launch_bounds__(kRowThreads)
rmsNormGradLanesKernel(FloatIn x, const float *w, FloatIn dy, FloatOut dx, const float *addend,
                       double *partial, int64_t rows, double eps, int64_t chunkRows,
                       uint32_t *amax) {
  constexpr int64_t D = 8 * L;
  constexpr int kRowsAtOnce = 32 / L;
  const int lane = threadIdx.x & 31;
  const int64_t chunk = warpRow(), col = (lane % L) * 8;
  const int64_t r0 = chunk * chunkRows, r1 = min(rows, r0 + chunkRows); // r1 <= r0: none
  const Pack wv = load8(FloatIn{w, false}, col);
  double acc[8] = {};
  uint32_t m = 0;
  for (int64_t base = r0; base < r1; base += kRowsAtOnce) {
    const int64_t row = base + lane / L;
    const bool live = row < r1;
    Pack xp = {}, gp = {};
    if (live) {
      xp = load8(x, row * D + col);
      gp = load8(dy, row * D + col);
    }
    double ss = 0, gn = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += double(xp.v[k]) * xp.v[k];
    const double r = 1.0 / sqrt(sumLanes<L>(ss) / double(D) + eps);
#pragma unroll
    for (int k = 0; k < 8; ++k) gn += double(gp.v[k]) * wv.v[k] * (xp.v[k] * r);
    const double meanGn = sumLanes<L>(gn) / double(D);
    if (!live) continue;
    Pack out;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      double g = gp.v[k];
      acc[k] += normTermOf(0, g, xp.v[k], 0.0, r);
      out.v[k] = plusAddend(float(r * (g * wv.v[k] - xp.v[k] * r * meanGn)), addend,
                            row * D + col + k);
      maxStored(amax, m, dx, out.v[k]);
    }
    store8(dx, row * D + col, out);
  }
  flushAmax(amax, m); // every thread of the block, rows or not
  // The row groups' partials of each column, summed in a fixed tree.
#pragma unroll
  for (int k = 0; k < 8; ++k)
    for (int o = L; o < 32; o <<= 1) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], o);
  if (lane < L && r0 < rows)
#pragma unroll
    for (int k = 0; k < 8; ++k) partial[chunk * D + col + k] = acc[k];
}

__device__ double normTerm(int kind, FloatIn x, FloatIn dy, const double *stats,
                           int64_t row, int64_t col, int64_t D) {
  return normTermOf(kind, dy[row * D + col], kind == 2 ? 0.0f : x[row * D + col], stats, row);
}

// Pass 1: partial[chunk, col] = sum over the chunk's rows, in row order.
__global__ void columnPartialKernel(int kind, FloatIn x, FloatIn dy,
                                    const double *stats, double *partial, int64_t rows,
                                    int64_t D, int64_t chunkRows) {
  int64_t chunk = blockIdx.y;
  int64_t r0 = chunk * chunkRows, r1 = min(rows, r0 + chunkRows);
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < D;
       col += int64_t(gridDim.x) * blockDim.x) {
    double acc = 0;
    // The terms of eight rows are loaded before they are added (in row
    // order): eight loads in flight per thread rather than one.
    constexpr int kBatch = 8;
    int64_t r = r0;
    for (; r + kBatch <= r1; r += kBatch) {
      double t[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) t[k] = normTerm(kind, x, dy, stats, r + k, col, D);
#pragma unroll
      for (int k = 0; k < kBatch; ++k) acc += t[k];
    }
    for (; r < r1; ++r) acc += normTerm(kind, x, dy, stats, r, col, D);
    partial[chunk * D + col] = acc;
  }
}

// LayerNorm's dw (kind 1) and db (kind 2) partials in one pass over x
// and dy: the same terms summed in the same row order as two
// columnPartialKernel passes, reading the two tensors once instead of twice.
__global__ void layerNormColumnPartialKernel(FloatIn x, FloatIn dy, const double *stats,
                                             double *partialW, double *partialB, int64_t rows,
                                             int64_t D, int64_t chunkRows) {
  int64_t chunk = blockIdx.y;
  int64_t r0 = chunk * chunkRows, r1 = min(rows, r0 + chunkRows);
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < D;
       col += int64_t(gridDim.x) * blockDim.x) {
    double accW = 0, accB = 0;
    constexpr int kBatch = 8;
    int64_t r = r0;
    for (; r + kBatch <= r1; r += kBatch) {
      double tw[kBatch], tb[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        tw[k] = normTerm(1, x, dy, stats, r + k, col, D);
        tb[k] = normTerm(2, x, dy, stats, r + k, col, D);
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        accW += tw[k];
        accB += tb[k];
      }
    }
    for (; r < r1; ++r) {
      accW += normTerm(1, x, dy, stats, r, col, D);
      accB += normTerm(2, x, dy, stats, r, col, D);
    }
    partialW[chunk * D + col] = accW;
    partialB[chunk * D + col] = accB;
  }
}

// The same partial sums with eight consecutive columns per thread, moved
// with 16-byte accesses (D % 8 == 0, aligned rows): a thread owns one
// (chunk, group of eight columns) item, so tall thin inputs (the q/k norms'
// 131,072 rows of 128) keep every thread busy where one column per thread
// left half of a block idle. Each column's terms are normTerm's and are
// added in row order, so the partials are columnPartialKernel's bits. With
// kSets 2 (LayerNorm) kind 1 goes to `partial` and kind 2 to `partialB`.
// The term's kind and x's and dy's dtypes are template arguments: with
// them known, the row loop has no branches and the compiler issues several
// rows' loads before their adds; as run-time flags each load waited out its
// latency (a bias gradient's column sums ran at 843 GB/s in gpt2-large's
// step).
template <int kKind, int kSets, bool kXBf16, bool kDyBf16>
__global__ void columnPartialPackedKernel(const void *xp, const void *dyp, const double *stats,
                                          double *partial, double *partialB, int64_t rows,
                                          int64_t D, int64_t chunks, int64_t chunkRows) {
  const int64_t groups = D / kPack;
  const FloatIn xs{xp, kXBf16}, dy{dyp, kDyBf16};
  LOOM_GRID_STRIDE(item, chunks * groups) {
    int64_t chunk = item / groups, col = item % groups * kPack;
    int64_t r0 = chunk * chunkRows, r1 = min(rows, r0 + chunkRows);
    double acc[kPack] = {}, accB[kPack] = {};
#pragma unroll 4
    for (int64_t r = r0; r < r1; ++r) {
      Pack g = load8(dy, r * D + col), xv = {}; // a bias gradient (kind 2) reads dy alone
      if (kKind != 2) xv = load8(xs, r * D + col);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        acc[k] += normTermOf(kKind, g.v[k], xv.v[k], stats, r);
        if (kSets == 2) accB[k] += normTermOf(2, g.v[k], 0.0f, stats, r);
      }
    }
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      partial[chunk * D + col + k] = acc[k];
      if (kSets == 2) partialB[chunk * D + col + k] = accB[k];
    }
  }
}

/// columnPartialPackedKernel for a run-time kind (0 or 2 alone, or 1 with
/// LayerNorm's bias set) and x's and dy's dtypes (x unread by kind 2).
void launchColumnPartialPacked(int kind, FloatIn x, FloatIn dy, const double *stats,
                               double *partial, double *partialB, int64_t rows, int64_t D,
                               ColumnChunks ch, cudaStream_t stream) {
  unsigned grid = gridFor(ch.count * (D / kPack));
  auto go = [&](auto kernel) {
    kernel<<<grid, kThreads, 0, stream>>>(x.p, dy.p, stats, partial, partialB, rows, D, ch.count,
                                          ch.rows);
  };
  // kind K with sets S, over the four dtype pairs
  auto dtypes = [&](auto ff, auto fb, auto bf, auto bb) {
    x.bf16 ? (dy.bf16 ? go(bb) : go(bf)) : (dy.bf16 ? go(fb) : go(ff));
  };
  if (kind == 1)
    dtypes(columnPartialPackedKernel<1, 2, false, false>, columnPartialPackedKernel<1, 2, false, true>,
           columnPartialPackedKernel<1, 2, true, false>, columnPartialPackedKernel<1, 2, true, true>);
  else if (kind == 2)
    dy.bf16 ? go(columnPartialPackedKernel<2, 1, false, true>)
            : go(columnPartialPackedKernel<2, 1, false, false>);
  else
    dtypes(columnPartialPackedKernel<0, 1, false, false>, columnPartialPackedKernel<0, 1, false, true>,
           columnPartialPackedKernel<0, 1, true, false>, columnPartialPackedKernel<0, 1, true, true>);
}

// Pass 2: out[col] = the sum of the column's chunk partials, one block per
// column: thread t adds chunks t, t + blockDim.x, ... in order, then the
// block's fixed tree (blockSum). A thread per column adding every chunk in
// turn paid one memory latency per eight chunks: the q/k norms' 2,048
// chunks cost more than the rest of their gradient.
__global__ void columnFinishKernel(const double *partial, float *out, int64_t chunks, int64_t D) {
  __shared__ double red[32];
  for (int64_t col = blockIdx.x; col < D; col += gridDim.x) {
    double acc = 0;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) acc += partial[c * D + col];
    acc = blockSum(acc, red);
    if (threadIdx.x == 0) out[col] = float(acc);
  }
}

unsigned finishBlocks(int64_t D) { return unsigned(std::min<int64_t>(std::max<int64_t>(D, 1), 65535)); }

/// Whether the packed column pass applies: eight whole columns per thread
/// and 16-byte aligned rows in x (when read) and dy.
bool columnsPackable(int64_t D, FloatIn x, const DevTensor &dy) {
  return D % kPack == 0 && reinterpret_cast<uintptr_t>(x.p) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(dy.data) % 16 == 0;
}

void columnSums(int kind, FloatIn x, const DevTensor &dyT, const double *stats,
                double *partial, float *out, int64_t rows, int64_t D, cudaStream_t stream) {
  ColumnChunks ch = columnChunks(rows, D);
  if (ch.count == 0) {
    cudaMemsetAsync(out, 0, size_t(D) * sizeof(float), stream);
    return;
  }
  FloatIn dy = floatIn(dyT);
  if (columnsPackable(D, x, dyT)) {
    launchColumnPartialPacked(kind, x, dy, stats, partial, nullptr, rows, D, ch, stream);
  } else {
    dim3 grid(unsigned((D + kThreads - 1) / kThreads), unsigned(ch.count));
    columnPartialKernel<<<grid, kThreads, 0, stream>>>(kind, x, dy, stats, partial, rows, D,
                                                       ch.rows);
  }
  columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, stream>>>(partial, out, ch.count, D);
}

// Softmax along one axis of an [outer, len, inner] view; one block per line.
//   y_i = exp(x_i - max) / sum_j exp(x_j - max)
__global__ void softmaxKernel(const float *x, float *y, int64_t len, int64_t inner) {
  __shared__ double red[32];
  int64_t line = blockIdx.x;
  int64_t base = (line / inner) * len * inner + line % inner;
  double mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) mx = fmax(mx, double(x[base + i * inner]));
  mx = blockMax(mx, red);
  double sum = 0;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) sum += exp(x[base + i * inner] - mx);
  sum = blockSum(sum, red);
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
    y[base + i * inner] = float(exp(x[base + i * inner] - mx) / sum);
}

// SoftmaxGrad: dx_i = y_i (dy_i - sum_j dy_j y_j) along the line.
__global__ void softmaxGradKernel(const float *y, const float *dy, float *dx, int64_t len,
                                  int64_t inner) {
  __shared__ double red[32];
  int64_t line = blockIdx.x;
  int64_t base = (line / inner) * len * inner + line % inner;
  double dot = 0;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
    dot += double(dy[base + i * inner]) * y[base + i * inner];
  dot = blockSum(dot, red);
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    int64_t at = base + i * inner;
    dx[at] = float(double(y[at]) * (double(dy[at]) - dot));
  }
}

// Reduce: kept dims place a block (blockIdx.x), reduced dims are walked by
// its threads. A reduction too large for one block (a parameter's sum of
// squares for the gradient norm: millions of elements into one scalar) is
// cut into gridDim.y slices of `slice` elements whose partial results go to
// scratch; reduceFinishKernel combines the slices in order. kind 0 sum,
// 1 mean, 2 max. Either way the combination order is fixed.
__global__ void reduceKernel(FloatIn x, float *y, double *partial, StridedMap<1> kept,
                             StridedMap<1> red, int64_t count, int64_t slice, int kind) {
  __shared__ double sh[32];
  int64_t out = blockIdx.x, base[1];
  kept.offsets(out, base);
  int64_t r0 = int64_t(blockIdx.y) * slice, r1 = min(count, r0 + slice);
  double sum = 0, mx = -INFINITY;
  for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    int64_t off[1];
    red.offsets(r, off);
    double v = x[base[0] + off[0]];
    sum += v;
    mx = v != v || v > mx ? v : mx;
  }
  double v = kind == 2 ? blockMax(mx, sh) : blockSum(sum, sh);
  if (threadIdx.x != 0) return;
  if (partial)
    partial[out * gridDim.y + blockIdx.y] = v;
  else
    y[out] = float(kind == 1 ? v / double(count) : v);
}

/// The block's combination of `slices` partial results in their fixed
/// order (kind 0 sum, 1 mean, 2 max; the value is thread 0's).
__device__ double finishPartials(const double *partial, int64_t slices, int kind, double *sh) {
  double sum = 0, mx = -INFINITY;
  auto add = [&](double v) {
    sum += v;
    mx = v != v || v > mx ? v : mx;
  };
  // Eight partials are loaded before they are added (in order): a large
  // tensor's thousands of slices otherwise cost a memory latency each.
  constexpr int kBatch = 8;
  const int64_t step = blockDim.x;
  int64_t i = threadIdx.x;
  for (; i + (kBatch - 1) * step < slices; i += kBatch * step) {
    double t[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) t[k] = partial[i + k * step];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) add(t[k]);
  }
  for (; i < slices; i += step) add(partial[i]);
  return kind == 2 ? blockMax(mx, sh) : blockSum(sum, sh);
}

__global__ void reduceFinishKernel(const double *partial, float *y, int64_t slices,
                                   int64_t count, int kind) {
  __shared__ double sh[32];
  int64_t out = blockIdx.x;
  double v = finishPartials(partial + out * slices, slices, kind, sh);
  if (threadIdx.x == 0) y[out] = float(kind == 1 ? v / double(count) : v);
}

// Elements per block when reduceKernel slices a reduction with few
// outputs (whole-tensor sums take wholeSumKernel below). Small enough that
// a 2048 x 8192 tensor fills every SM many times over (2,048 blocks): at
// 64K such a sum ran on two blocks per SM and waited on memory latency at a
// third of the bandwidth.
constexpr int64_t kReduceSlice = 8 * 1024;

// Whole-tensor sums: a Reduce sum or mean over every axis (one output) and
// SumSquares (a Reduce sum of Mul(x, x) in one read of x) share one kernel
// and one summation order, so SumSquares has the bits of the two
// instructions it replaces, run after run (no atomics). Slice blockIdx.x
// holds kWholeSlice consecutive elements; its thread t owns packs of eight
// consecutive elements t, t + kWholeThreads, ... (kWholeIters of them),
// adds their terms in element order in double (a square is rounded to f32
// first, as the Mul it replaces stored it), then the block's fixed tree
// (blockSum); the slices' partial sums go to scratch and reduceFinishKernel
// adds them in order. The packs are loaded before they are added: eight
// 16-byte loads in flight per thread. The one-element-a-thread form this
// replaces moved 2 bytes per load and ran the gradient norm's 310 sums of
// squares (qwen3-1.7b) at 455 GB/s.
constexpr int kWholeThreads = 256, kWholeIters = 8;
constexpr int64_t kWholeSlice = int64_t(kWholeThreads) * kPack * kWholeIters; // 16,384

template <bool kSquare> __device__ inline double wholeTerm(float v) {
  return kSquare ? double(__fmul_rn(v, v)) : double(v);
}

/// Slice `slice` of x's `count` elements: the block's sum of their terms
/// (thread 0's). `packed`: x is 16-byte aligned, so a slice's whole packs
/// load eight at a time; the last slice (and an unaligned x) takes the
/// element loop, which visits the same elements in the same order.
template <bool kSquare>
__device__ double wholeSliceSum(FloatIn x, int64_t count, int64_t slice, bool packed,
                                double *sh) {
  const int64_t r0 = slice * kWholeSlice;
  double sum = 0;
  if (packed && r0 + kWholeSlice <= count) {
    // x's dtype fixed per branch, so that all eight loads issue first.
    auto slice8 = [&](FloatIn xc) {
      Pack p[kWholeIters];
#pragma unroll
      for (int j = 0; j < kWholeIters; ++j)
        p[j] = load8(xc, r0 + (int64_t(j) * kWholeThreads + threadIdx.x) * kPack);
#pragma unroll
      for (int j = 0; j < kWholeIters; ++j)
#pragma unroll
        for (int k = 0; k < kPack; ++k) sum += wholeTerm<kSquare>(p[j].v[k]);
    };
    if (x.bf16)
      slice8(FloatIn{x.p, true});
    else
      slice8(FloatIn{x.p, false});
  } else {
    for (int j = 0; j < kWholeIters; ++j) {
      int64_t e0 = r0 + (int64_t(j) * kWholeThreads + threadIdx.x) * kPack;
      for (int k = 0; k < kPack && e0 + k < count; ++k) sum += wholeTerm<kSquare>(x[e0 + k]);
    }
  }
  return blockSum(sum, sh);
}

template <bool kSquare>
__global__ void __launch_bounds__(kWholeThreads)
wholeSumKernel(FloatIn x, float *y, double *partial, int64_t count, bool packed, bool mean) {
  __shared__ double sh[32];
  double sum = wholeSliceSum<kSquare>(x, count, blockIdx.x, packed, sh);
  if (threadIdx.x != 0) return;
  if (partial)
    partial[blockIdx.x] = sum;
  else
    y[0] = float(mean ? sum / double(count) : sum);
}

// GlobalSumSquares: the SumSquares of many tensors (the gradient norm's
// 146 in llama-1b's step, most of them too small to fill the GPU, each
// followed by a scalar Add: 2.7 ms of kernels waiting on their own
// latency). Tensors go in groups of kGroupTensors per launch; block b of a
// launch sums one slice of one tensor with wholeSliceSum, so every slice's
// partial is the one SumSquares writes. A second launch gives each tensor
// of the group a block that combines its partials as reduceFinishKernel
// does (one slice combines to itself), and a last one-thread kernel adds
// the tensors' f32 sums in input order, as the chain of Adds did: the
// same bits as the instructions it replaces.
constexpr int kGroupTensors = 32;

struct SumSquaresGroup {
  const void *data[kGroupTensors];
  int64_t count[kGroupTensors];
  int64_t firstSlice[kGroupTensors + 1]; // within the launch; [n] = its blocks
  uint32_t bf16Mask = 0, packedMask = 0;
  int n = 0;
};

__global__ void __launch_bounds__(kWholeThreads)
groupSumSquaresKernel(SumSquaresGroup g, double *partial) {
  __shared__ double sh[32];
  int t = 0;
  while (t + 1 < g.n && int64_t(blockIdx.x) >= g.firstSlice[t + 1]) ++t;
  int64_t slice = int64_t(blockIdx.x) - g.firstSlice[t];
  FloatIn x{g.data[t], bool(g.bf16Mask >> t & 1u)};
  double sum = wholeSliceSum<true>(x, g.count[t], slice, bool(g.packedMask >> t & 1u), sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

/// Block t: tensor t's sum from its partials, rounded to f32, to sums[t].
__global__ void groupFinishKernel(SumSquaresGroup g, const double *partial, float *sums) {
  __shared__ double sh[32];
  int t = blockIdx.x;
  double v = finishPartials(partial + g.firstSlice[t], g.firstSlice[t + 1] - g.firstSlice[t], 0, sh);
  if (threadIdx.x == 0) sums[t] = float(v);
}

/// ((s0 + s1) + s2) + ..., rounded to f32 at each add.
__global__ void chainSumKernel(const float *sums, int64_t n, float *y) {
  float total = sums[0];
  for (int64_t k = 1; k < n; ++k) total = __fadd_rn(total, sums[k]);
  y[0] = total;
}

int64_t wholeSlices(int64_t count) { return std::max<int64_t>(1, (count + kWholeSlice - 1) / kWholeSlice); }

/// The partials of the largest launch group over tensors of `counts`
/// elements: the doubles of scratch that the groups reuse in turn.
size_t groupPartials(const std::vector<int64_t> &counts) {
  size_t most = 0;
  for (size_t k0 = 0; k0 < counts.size(); k0 += kGroupTensors) {
    size_t slices = 0;
    for (size_t k = k0; k < std::min(counts.size(), k0 + kGroupTensors); ++k)
      slices += size_t(wholeSlices(counts[k]));
    most = std::max(most, slices);
  }
  return most;
}

/// A Reduce whose every axis is reduced (one output), sum or mean: the
/// whole-tensor kernel applies.
bool wholeSum(const Instr &I, const Shape &shape) {
  if (I.ints[0] == 2 || I.ints.size() - 1 != shape.size())
    return false;
  for (size_t k = 0; k < shape.size(); ++k)
    if (I.ints[k + 1] != int64_t(k))
      return false;
  return true;
}

template <bool kSquare>
void launchWholeSum(const DevTensor &x, float *y, void *scratch, bool mean, cudaStream_t stream) {
  int64_t count = x.numel(); // 0 elements: one block adds nothing, y = 0
  int64_t slices = wholeSlices(count);
  double *partial = slices > 1 ? static_cast<double *>(scratch) : nullptr;
  wholeSumKernel<kSquare><<<unsigned(slices), kWholeThreads, 0, stream>>>(
      floatIn(x), y, partial, count, reinterpret_cast<uintptr_t>(x.data) % 16 == 0, mean);
  if (partial)
    reduceFinishKernel<<<1, kRowThreads, 0, stream>>>(partial, y, slices, count, mean ? 1 : 0);
}

/// A Reduce sum over the leading axes of its input (a bias gradient: the
/// rows of dy [tokens, N] summed into [N]) as `rows` x `D` column sums, or
/// false for any other reduction. reduceKernel would give each column a
/// block whose threads stride down the column, N words apart: uncoalesced,
/// several times slower than columnSums (the norms' weight gradients), which
/// reads whole rows and adds in double in a fixed order (rows within a
/// chunk, then chunks), as reduceKernel does in its own order.
bool leadingColumnSum(const Instr &I, const Shape &shape, int64_t &rows, int64_t &D) {
  size_t lead = I.ints.size() - 1;
  if (I.ints[0] != 0 || lead == 0 || lead >= shape.size())
    return false;
  for (size_t k = 0; k < lead; ++k)
    if (I.ints[k + 1] != int64_t(k))
      return false;
  rows = 1;
  D = 1;
  for (size_t d = 0; d < shape.size(); ++d) (d < lead ? rows : D) *= shape[d];
  // Few columns leave columnSums' threads idle; reduceKernel slices those.
  return D >= 64;
}

/// Slices per output for a reduction of `count` elements into `outputs`
/// values: 1 (no scratch) unless there are too few outputs to fill the GPU.
int64_t reduceSlices(int64_t outputs, int64_t count) {
  if (outputs >= 1024 || count <= kReduceSlice) return 1;
  return (count + kReduceSlice - 1) / kReduceSlice;
}

/// A line view [outer, len, inner] of `shape` around `axis`.
void lineView(const Shape &shape, size_t axis, int64_t &lines, int64_t &len, int64_t &inner) {
  int64_t outer = 1;
  inner = 1;
  len = shape[axis];
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  lines = outer * inner;
}

} // namespace

size_t normScratchBytes(const Program &p, const Instr &I) {
  if (I.op == OpCode::GlobalSumSquares) {
    std::vector<int64_t> counts;
    for (uint32_t id : I.in) counts.push_back(p.buffers[id].numElements());
    return groupPartials(counts) * sizeof(double) + I.in.size() * sizeof(float);
  }
  if (I.op == OpCode::SumSquares ||
      (I.op == OpCode::Reduce && wholeSum(I, p.buffers[I.in[0]].shape))) {
    int64_t slices = wholeSlices(p.buffers[I.in[0]].numElements());
    return slices > 1 ? size_t(slices) * sizeof(double) : 0;
  }
  if (I.op == OpCode::Reduce) {
    if (int64_t rows, D; leadingColumnSum(I, p.buffers[I.in[0]].shape, rows, D))
      return size_t(columnChunks(rows, D).count * D) * sizeof(double);
    int64_t outputs = p.buffers[I.out[0]].numElements();
    int64_t count = outputs ? p.buffers[I.in[0]].numElements() / outputs : 0;
    int64_t slices = reduceSlices(outputs, count);
    return slices > 1 ? size_t(outputs * slices) * sizeof(double) : 0;
  }
  if (I.op != OpCode::RmsNormGrad && I.op != OpCode::LayerNormGrad)
    return 0;
  const BufferDesc &x = p.buffers[I.in[0]];
  int64_t D = x.shape.empty() ? 1 : x.shape.back();
  int64_t rows = D ? x.numElements() / D : 0;
  // per-row statistics (2 doubles) + per-chunk partial column sums (two
  // sets for LayerNorm: dw and db in one pass), over the column pass's
  // chunks or normGradStreamKernel's, whichever are more
  int64_t sets = I.op == OpCode::LayerNormGrad ? 2 : 1;
  int64_t chunks = columnChunks(rows, D).count;
  if (rows > 0 && streamable(D))
    chunks = std::max(chunks, streamChunks(sets == 2, I.in.size() > 3, rows, D).count);
  return size_t(2 * rows + sets * chunks * D) * sizeof(double) + 256;
}

/// Blocks of kRowThreads for `warps` warps.
unsigned blocksForWarps(int64_t warps) {
  return unsigned((warps + kRowThreads / 32 - 1) / (kRowThreads / 32));
}

void launchRmsNorm(const CudaCall &c, CudaContext &ctx) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  if (rows == 0) return;
  if (int L = lanesPerRow(D); L && rowsPackable(D, {&c.in[0], &c.in[1], &c.out[0]})) {
    auto lanes = [&](auto kernel) {
      kernel<<<blocksForWarps((rows * L + 31) / 32), kRowThreads, 0, ctx.stream>>>(
          floatIn(c.in[0]), c.in[1].as<float>(), floatOut(c.out[0]), rows, c.instr->floats[0],
          fusedAmaxBits(c, 0));
    };
    return L == 8 ? lanes(rmsNormLanesKernel<8>)
                  : L == 16 ? lanes(rmsNormLanesKernel<16>) : lanes(rmsNormLanesKernel<32>);
  }
  if (D <= kWarpRow) {
    rmsNormWarpKernel<<<warpRowBlocks(rows), kRowThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), c.in[1].as<float>(), floatOut(c.out[0]), rows, D, c.instr->floats[0],
        fusedAmaxBits(c, 0));
    return;
  }
  bool packed = rowsPackable(D, {&c.in[0], &c.out[0]});
  auto cached = [&](auto kernel) {
    kernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(floatIn(c.in[0]), c.in[1].as<float>(),
                                                           floatOut(c.out[0]), D,
                                                           c.instr->floats[0], fusedAmaxBits(c, 0),
                                                           FloatIn{}, FloatOut{});
  };
  switch (cachedPacks(D, packed)) {
  case 2: return cached(rmsNormCachedKernel<2>);
  case 4: return cached(rmsNormCachedKernel<4>);
  default: break;
  }
  rmsNormKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
      floatIn(c.in[0]), c.in[1].as<float>(), floatOut(c.out[0]), D, c.instr->floats[0], packed,
      fusedAmaxBits(c, 0));
}

/// AddRmsNorm: rows that rmsNormCachedKernel takes add in its registers
/// (one read of the sum saved, and its separate launch); the rest run the
/// Add kernel and then launchRmsNorm on the sum, as the two instructions
/// would.
void launchAddRmsNorm(const CudaCall &c, CudaContext &ctx) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  if (rows == 0) return;
  const DevTensor &a = c.in[0], &b = c.in[1], &w = c.in[2], &sum = c.out[0], &y = c.out[1];
  int packs = D <= kWarpRow ? 0 : cachedPacks(D, rowsPackable(D, {&a, &b, &sum, &y}));
  auto fused = [&](auto kernel) {
    kernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(floatIn(a), w.as<float>(), floatOut(y),
                                                           D, c.instr->floats[0], nullptr,
                                                           floatIn(b), floatOut(sum));
  };
  if (packs == 2) return fused(rmsNormCachedKernel<2, true>);
  if (packs == 4) return fused(rmsNormCachedKernel<4, true>);
  // The two instructions' own records (their outputs decide, for one, how
  // many fused amax outputs a launcher looks for: none here).
  const Instr &I = *c.instr;
  Instr addInstr = I, normInstr = I;
  addInstr.op = OpCode::Add;
  addInstr.in = {I.in[0], I.in[1]};
  addInstr.out = {I.out[0]};
  addInstr.floats.clear();
  normInstr.op = OpCode::RmsNorm;
  normInstr.in = {I.out[0], I.in[2]};
  normInstr.out = {I.out[1]};
  CudaCall add{&addInstr, c.index, {a, b}, {sum}}, norm{&normInstr, c.index, {sum, w}, {y}};
  launchBinary(add, ctx);
  launchRmsNorm(norm, ctx);
}

void launchLayerNorm(const CudaCall &c, CudaContext &ctx) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  if (rows == 0) return;
  const float *b = c.in.size() > 2 ? c.in[2].as<float>() : nullptr;
  bool packed = rowsPackable(D, {&c.in[0], &c.out[0]});
  auto cached = [&](auto kernel) {
    kernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(floatIn(c.in[0]), c.in[1].as<float>(), b,
                                                           floatOut(c.out[0]), D, c.instr->floats[0]);
  };
  switch (cachedPacks(D, packed)) {
  case 2: return cached(layerNormCachedKernel<2>);
  case 4: return cached(layerNormCachedKernel<4>);
  default: break;
  }
  layerNormKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
      floatIn(c.in[0]), c.in[1].as<float>(), b, floatOut(c.out[0]), D, c.instr->floats[0], packed);
}

/// A norm gradient's addend (its fourth input), or null.
const float *normGradAddend(const CudaCall &c) {
  return c.in.size() > 3 ? c.in[3].as<float>() : nullptr;
}

/// Whether a norm gradient's rows may move eight elements an access: x, dy,
/// dx and the addend, if any (the registers kernel loads its row as packs).
bool normGradPackable(const CudaCall &c, int64_t D) {
  return c.in.size() > 3 ? rowsPackable(D, {&c.in[0], &c.in[2], &c.in[3], &c.out[0]})
                         : rowsPackable(D, {&c.in[0], &c.in[2], &c.out[0]});
}

/// normGradStreamKernel and the finishing pass of each weight gradient
/// (dw; LayerNorm's db too), scratch laid out as normScratchBytes counts it.
template <bool kLayerNorm>
void launchNormGradStream(const CudaCall &c, CudaContext &ctx, int64_t rows, int64_t D,
                          double *partial, FloatOut copy) {
  const float *addend = normGradAddend(c);
  ColumnChunks ch = streamChunks(kLayerNorm, addend != nullptr, rows, D);
  double *partialB = kLayerNorm ? partial + ch.count * D : nullptr;
  auto go = [&](auto kernel) {
    kernel<<<unsigned(ch.count), unsigned(streamThreads(D)), 0, ctx.stream>>>(
        floatIn(c.in[0]), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]), addend,
        partial, partialB, rows, D, c.instr->floats[0], ch.rows,
        kLayerNorm ? nullptr : fusedAmaxBits(c, 0), copy);
  };
  addend ? go(normGradStreamKernel<kLayerNorm, true>) : go(normGradStreamKernel<kLayerNorm, false>);
  for (int set = 0; set < (kLayerNorm ? 2 : 1); ++set)
    columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, ctx.stream>>>(
        set ? partialB : partial, c.out[1 + set].as<float>(), ch.count, D);
}

/// A norm gradient: `kernels(copy)` launches its kernels and returns whether
/// the one that wrote dx also stored dx's rounded copy (storesRoundedDx:
/// the last output, which then carries no amax after it); where it did not,
/// a Cast of dx stores it.
template <typename Kernels>
void withRoundedDx(const CudaCall &c, CudaContext &ctx, Kernels &&kernels) {
  const FloatOut copy = storesRoundedDx(*c.instr) ? floatOut(c.out.back()) : FloatOut{};
  if (!kernels(copy) && copy.p) castTensor(c.out[0], c.out.back(), ctx);
}

/// RmsNormGrad's kernels (withRoundedDx).
bool rmsNormGradKernels(const CudaCall &c, CudaContext &ctx, FloatOut copy) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  auto *stats = static_cast<double *>(ctx.scratch);
  double *partial = stats + 2 * rows;
  bool copied = false; // by the kernel that wrote dx
  if (int L = lanesPerRow(D); rows > 0 && L && normGradPackable(c, D) &&
                              rowsPackable(D, {&c.in[1]})) {
    // dw's partials come with dx, over the column pass's chunks
    ColumnChunks ch = columnChunks(rows, D);
    auto lanes = [&](auto kernel) {
      kernel<<<blocksForWarps(ch.count), kRowThreads, 0, ctx.stream>>>(
          floatIn(c.in[0]), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]),
          normGradAddend(c), partial, rows, c.instr->floats[0], ch.rows, fusedAmaxBits(c, 0));
    };
    L == 8 ? lanes(rmsNormGradLanesKernel<8>)
           : L == 16 ? lanes(rmsNormGradLanesKernel<16>) : lanes(rmsNormGradLanesKernel<32>);
    columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, ctx.stream>>>(
        partial, c.out[1].as<float>(), ch.count, D);
    return false;
  }
  if (rows > 0 && D <= kWarpRow) {
    rmsNormGradWarpKernel<<<warpRowBlocks(rows), kRowThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]),
        normGradAddend(c), stats, rows, D, c.instr->floats[0], fusedAmaxBits(c, 0));
  } else if (rows > 0) {
    bool packed = normGradPackable(c, D);
    if (packed && streamable(D) && fusedNormGrad()) { // dw's partials with dx
      launchNormGradStream<false>(c, ctx, rows, D, partial, copy);
      return true;
    }
    int packs = cachedPacks(D, packed);
    auto cached = [&](auto kernel) {
      kernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
          floatIn(c.in[0]), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]),
          normGradAddend(c), stats, D, c.instr->floats[0], fusedAmaxBits(c, 0), copy);
      copied = true;
    };
    if (packs == 2)
      cached(normGradCachedKernel<false, 2>);
    else if (packs == 4)
      cached(normGradCachedKernel<false, 4>);
    else
      rmsNormGradRowKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
          floatIn(c.in[0]), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]),
          normGradAddend(c), stats, D, c.instr->floats[0], packed, fusedAmaxBits(c, 0));
  }
  columnSums(0, floatIn(c.in[0]), c.in[2], stats, partial, c.out[1].as<float>(), rows,
             D, ctx.stream);
  return copied;
}

void launchRmsNormGrad(const CudaCall &c, CudaContext &ctx) {
  withRoundedDx(c, ctx, [&](FloatOut copy) { return rmsNormGradKernels(c, ctx, copy); });
}

/// LayerNormGrad's kernels (withRoundedDx).
bool layerNormGradKernels(const CudaCall &c, CudaContext &ctx, FloatOut copy) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  auto *stats = static_cast<double *>(ctx.scratch);
  double *partial = stats + 2 * rows;
  bool copied = false; // by the kernel that wrote dx
  if (rows > 0) {
    bool packed = normGradPackable(c, D);
    if (packed && streamable(D) && fusedNormGrad()) { // dw's and db's partials with dx
      launchNormGradStream<true>(c, ctx, rows, D, partial, copy);
      return true;
    }
    int packs = cachedPacks(D, packed);
    auto cached = [&](auto kernel) {
      kernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
          floatIn(c.in[0]), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]),
          normGradAddend(c), stats, D, c.instr->floats[0], nullptr, copy);
      copied = true;
    };
    if (packs == 2)
      cached(normGradCachedKernel<true, 2>);
    else if (packs == 4)
      cached(normGradCachedKernel<true, 4>);
    else
      layerNormGradRowKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
          floatIn(c.in[0]), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]),
          normGradAddend(c), stats, D, c.instr->floats[0], packed);
  }
  ColumnChunks ch = columnChunks(rows, D);
  if (ch.count == 0) {
    cudaMemsetAsync(c.out[1].data, 0, size_t(D) * sizeof(float), ctx.stream);
    cudaMemsetAsync(c.out[2].data, 0, size_t(D) * sizeof(float), ctx.stream);
    return copied;
  }
  double *partialB = partial + ch.count * D; // normScratchBytes counts both
  const FloatIn x = floatIn(c.in[0]);
  if (columnsPackable(D, x, c.in[2])) {
    launchColumnPartialPacked(1, x, floatIn(c.in[2]), stats, partial, partialB, rows, D, ch,
                              ctx.stream);
  } else {
    dim3 grid(unsigned((D + kThreads - 1) / kThreads), unsigned(ch.count));
    layerNormColumnPartialKernel<<<grid, kThreads, 0, ctx.stream>>>(
        x, floatIn(c.in[2]), stats, partial, partialB, rows, D, ch.rows);
  }
  columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, ctx.stream>>>(
      partial, c.out[1].as<float>(), ch.count, D);
  columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, ctx.stream>>>(
      partialB, c.out[2].as<float>(), ch.count, D);
  return copied;
}

void launchLayerNormGrad(const CudaCall &c, CudaContext &ctx) {
  withRoundedDx(c, ctx, [&](FloatOut copy) { return layerNormGradKernels(c, ctx, copy); });
}

void launchSoftmax(const CudaCall &c, CudaContext &ctx) {
  int64_t lines, len, inner;
  lineView(c.in[0].shape(), size_t(c.instr->ints[0]), lines, len, inner);
  if (lines == 0 || len == 0) return;
  softmaxKernel<<<unsigned(lines), kRowThreads, 0, ctx.stream>>>(c.in[0].as<float>(),
                                                                  c.out[0].as<float>(), len, inner);
}

void launchSoftmaxGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t lines, len, inner;
  lineView(c.in[0].shape(), size_t(c.instr->ints[0]), lines, len, inner);
  if (lines == 0 || len == 0) return;
  softmaxGradKernel<<<unsigned(lines), kRowThreads, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].as<float>(), c.out[0].as<float>(), len, inner);
}

void launchReduce(const CudaCall &c, CudaContext &ctx) {
  const Shape &shape = c.in[0].shape();
  if (int64_t rows, D; leadingColumnSum(*c.instr, shape, rows, D)) {
    columnSums(2, FloatIn{}, c.in[0], nullptr, static_cast<double *>(ctx.scratch),
               c.out[0].as<float>(), rows, D, ctx.stream);
    return;
  }
  if (wholeSum(*c.instr, shape))
    return launchWholeSum<false>(c.in[0], c.out[0].as<float>(), ctx.scratch, c.instr->ints[0] == 1,
                                 ctx.stream);
  std::vector<bool> reduced(shape.size(), false);
  for (size_t k = 1; k < c.instr->ints.size(); ++k) reduced[size_t(c.instr->ints[k])] = true;
  ReduceAxes ax(shape, reduced);
  int64_t outputs = c.out[0].numel(), count = ax.count;
  if (outputs == 0) return;
  Shape keptShape = ax.keptShape, keptStrides = ax.keptStrides;
  if (keptShape.empty()) keptShape = {1}, keptStrides = {0};
  const Shape &redShape = ax.redShape, &redStrides = ax.redStrides;
  auto kept = makeStridedMap<1>(keptShape, {keptStrides});
  auto red = makeStridedMap<1>(redShape, {redStrides});
  int kind = int(c.instr->ints[0]);
  int64_t slices = reduceSlices(outputs, count);
  double *partial = slices > 1 ? static_cast<double *>(ctx.scratch) : nullptr;
  dim3 grid{unsigned(outputs), unsigned(slices)};
  reduceKernel<<<grid, kRowThreads, 0, ctx.stream>>>(floatIn(c.in[0]), c.out[0].as<float>(),
                                                     partial, kept, red, count,
                                                     slices > 1 ? kReduceSlice : count, kind);
  if (partial)
    reduceFinishKernel<<<unsigned(outputs), kRowThreads, 0, ctx.stream>>>(
        partial, c.out[0].as<float>(), slices, count, kind);
}

void launchSumSquares(const CudaCall &c, CudaContext &ctx) {
  launchWholeSum<true>(c.in[0], c.out[0].as<float>(), ctx.scratch, false, ctx.stream);
}

void launchGlobalSumSquares(const CudaCall &c, CudaContext &ctx) {
  // Scratch: the partials of one group at a time (normScratchBytes), then
  // every tensor's f32 sum. The groups run in stream order, so each reuses
  // the partials of the one before.
  size_t n = c.in.size();
  std::vector<int64_t> counts;
  for (const DevTensor &x : c.in) counts.push_back(x.numel());
  double *partial = static_cast<double *>(ctx.scratch);
  float *sums = reinterpret_cast<float *>(partial + groupPartials(counts));
  for (size_t k0 = 0; k0 < n; k0 += kGroupTensors) {
    SumSquaresGroup g;
    int64_t blocks = 0;
    for (size_t k = k0; k < std::min(n, k0 + kGroupTensors); ++k, ++g.n) {
      const DevTensor &x = c.in[k];
      g.data[g.n] = x.data;
      g.count[g.n] = x.numel();
      g.firstSlice[g.n] = blocks;
      if (x.dtype() == DType::BF16) g.bf16Mask |= 1u << g.n;
      if (reinterpret_cast<uintptr_t>(x.data) % 16 == 0) g.packedMask |= 1u << g.n;
      blocks += wholeSlices(x.numel());
    }
    g.firstSlice[g.n] = blocks;
    groupSumSquaresKernel<<<unsigned(blocks), kWholeThreads, 0, ctx.stream>>>(g, partial);
    groupFinishKernel<<<unsigned(g.n), kRowThreads, 0, ctx.stream>>>(g, partial, sums + k0);
  }
  chainSumKernel<<<1, 1, 0, ctx.stream>>>(sums, int64_t(n), c.out[0].as<float>());
}

} // namespace loom::rt::cuda
