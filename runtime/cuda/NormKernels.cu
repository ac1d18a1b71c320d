//===- NormKernels.cu - Norms, Softmax, Reduce, SumSquares and grads ------===//
//
// Part of loom, under the Apache License v2.0.
//
// Row kernels: one block per row (or per softmax line, or per reduced output
// element); the block's threads stride over the row and combine with a
// fixed-shape tree (blockSum/blockMax), accumulating in double as the CPU
// reference does. RmsNorm rows of at most 256 elements (per-head q/k norms)
// take one warp each instead (warpSum). The weight gradients of the norms are column sums over all
// rows; they run as two deterministic passes, partial sums over chunks of
// kChunkRows rows (eight columns a thread where rows allow) and then each
// column's chunks in one block (strided, then the block's fixed tree), so
// no float atomics are needed and every run gives the same bits. The norms' backward keeps each
// row's statistics (mean, 1/std) in scratch for the column pass.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "cuda/Fp8Amax.cuh"
#include "cuda/Fp8Cuda.h"

namespace loom::rt::cuda {
namespace {

constexpr int kRowThreads = 128;
constexpr int64_t kChunkRows = 64;

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
        m = max(m, storedAbsBits(y, p.v[k]));
      }
      store8(y, row + i, p);
    }
  } else {
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      float v = float(x[row + i] * inv * w[i]);
      y.store(row + i, v);
      m = max(m, storedAbsBits(y, v));
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
/// x (f32) and dy beside each: with `packed` (D % 8 == 0, 16-byte aligned
/// rows, as rmsNormKernel) eight consecutive columns per step moved with
/// 16-byte accesses, else columns t, t + blockDim.x, ...
struct GradRowColumns {
  const float *xr;
  FloatIn dy;
  int64_t row, D;
  bool packed;
  __device__ int64_t first() const { return int64_t(threadIdx.x) * (packed ? kPack : 1); }
  __device__ int64_t step() const { return int64_t(blockDim.x) * (packed ? kPack : 1); }
  /// body(column, x, dy) for each owned column, in the thread's order.
  template <typename Body> __device__ void each(Body &&body) const {
    FloatIn xs{xr, false};
    for (int64_t i = first(); i < D; i += step()) {
      if (packed) {
        Pack xp = load8(xs, i), gp = load8(dy, row * D + i);
#pragma unroll
        for (int k = 0; k < kPack; ++k) body(i + k, xp.v[k], gp.v[k]);
      } else {
        body(i, xr[i], dy[row * D + i]);
      }
    }
  }
};

// RmsNormGrad, per row, r = 1/sqrt(mean(x^2) + eps), n = x r, g = dy w:
//   dx = r (g - n mean(g n)); keeps r for the dw pass. dy and dx may be
//   bf16 storage.
__global__ void rmsNormGradRowKernel(const float *x, const float *w, FloatIn dy, FloatOut dx,
                                     double *rstd, int64_t D, double eps, bool packed,
                                     uint32_t *amax) {
  __shared__ double red[32];
  int64_t row = blockIdx.x;
  const float *xr = x + row * D;
  FloatIn xs{xr, false};
  const GradRowColumns cols{xr, dy, row, D, packed};
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
      Pack xp = load8(xs, i), gp = load8(dy, row * D + i);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        xp.v[k] = float(r * (double(gp.v[k]) * w[i + k] - xp.v[k] * r * meanGn));
        m = max(m, storedAbsBits(dx, xp.v[k]));
      }
      store8(dx, row * D + i, xp);
    }
  } else {
    for (int64_t i = first; i < D; i += step) {
      float v = float(r * (double(dy[row * D + i]) * w[i] - xr[i] * r * meanGn));
      dx.store(row * D + i, v);
      m = max(m, storedAbsBits(dx, v));
    }
  }
  flushAmax(amax, m);
  if (threadIdx.x == 0) rstd[row] = r;
}

// LayerNormGrad, per row, xhat = (x - mean) r, g = dy w:
//   dx = r (g - mean(g) - xhat mean(g xhat)); keeps mean and r. dy and dx
//   may be bf16 storage. With `packed` a thread owns eight consecutive
//   columns per step, as in rmsNormGradRowKernel.
__global__ void layerNormGradRowKernel(const float *x, const float *w, FloatIn dy, FloatOut dx,
                                       double *stats, int64_t D, double eps, bool packed) {
  __shared__ double red[32];
  int64_t row = blockIdx.x;
  const float *xr = x + row * D;
  FloatIn xs{xr, false};
  const GradRowColumns cols{xr, dy, row, D, packed};
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
      Pack xp = load8(xs, i), gp = load8(dy, row * D + i);
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        xp.v[k] = float(r * (double(gp.v[k]) * w[i + k] - meanG - (xp.v[k] - mu) * r * meanGx));
      store8(dx, row * D + i, xp);
    }
  } else {
    for (int64_t i = first; i < D; i += step)
      dx.store(row * D + i,
               float(r * (double(dy[row * D + i]) * w[i] - meanG - (xr[i] - mu) * r * meanGx)));
  }
  if (threadIdx.x == 0) {
    stats[2 * row] = mu;
    stats[2 * row + 1] = r;
  }
}

// Rows of at most kWarpRow elements (per-head q/k norms, [B, T, H, 128])
// take one warp each, four rows to a block: a block per row would leave
// most of its threads idle and pay block-wide reductions for 128 values.
// The arithmetic is the block kernels'; only the summation tree differs.
constexpr int64_t kWarpRow = 256;

__device__ inline int64_t warpRow() {
  return int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
}

__global__ void rmsNormWarpKernel(FloatIn x, const float *w, FloatOut y, int64_t rows, int64_t D,
                                  double eps, uint32_t *amax) {
  int64_t row = warpRow(), lane = threadIdx.x & 31;
  uint32_t m = 0;
  if (row < rows) {
    int64_t base = row * D;
    double ss = 0;
    for (int64_t i = lane; i < D; i += 32) ss += double(x[base + i]) * x[base + i];
    double inv = 1.0 / sqrt(warpSum(ss) / double(D) + eps);
    for (int64_t i = lane; i < D; i += 32) {
      float v = float(x[base + i] * inv * w[i]);
      y.store(base + i, v);
      m = max(m, storedAbsBits(y, v));
    }
  }
  flushAmax(amax, m); // every thread of the block, rows or not
}

__global__ void rmsNormGradWarpKernel(const float *x, const float *w, FloatIn dy, FloatOut dx,
                                      double *rstd, int64_t rows, int64_t D, double eps,
                                      uint32_t *amax) {
  int64_t row = warpRow(), lane = threadIdx.x & 31;
  uint32_t m = 0;
  if (row < rows) {
    const float *xr = x + row * D;
    int64_t base = row * D;
    double ss = 0;
    for (int64_t i = lane; i < D; i += 32) ss += double(xr[i]) * xr[i];
    double r = 1.0 / sqrt(warpSum(ss) / double(D) + eps);
    double gn = 0;
    for (int64_t i = lane; i < D; i += 32) gn += double(dy[base + i]) * w[i] * (xr[i] * r);
    double meanGn = warpSum(gn) / double(D);
    for (int64_t i = lane; i < D; i += 32) {
      float v = float(r * (double(dy[base + i]) * w[i] - xr[i] * r * meanGn));
      dx.store(base + i, v);
      m = max(m, storedAbsBits(dx, v));
    }
    if (lane == 0) rstd[row] = r;
  }
  flushAmax(amax, m);
}

unsigned warpRowBlocks(int64_t rows) { return unsigned((rows + kRowThreads / 32 - 1) / (kRowThreads / 32)); }

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

__device__ double normTerm(int kind, const float *x, FloatIn dy, const double *stats,
                           int64_t row, int64_t col, int64_t D) {
  return normTermOf(kind, dy[row * D + col], kind == 2 ? 0.0f : x[row * D + col], stats, row);
}

// Pass 1: partial[chunk, col] = sum over the chunk's rows, in row order.
__global__ void columnPartialKernel(int kind, const float *x, FloatIn dy,
                                    const double *stats, double *partial, int64_t rows,
                                    int64_t D) {
  int64_t chunk = blockIdx.y;
  int64_t r0 = chunk * kChunkRows, r1 = min(rows, r0 + kChunkRows);
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
__global__ void layerNormColumnPartialKernel(const float *x, FloatIn dy, const double *stats,
                                             double *partialW, double *partialB, int64_t rows,
                                             int64_t D) {
  int64_t chunk = blockIdx.y;
  int64_t r0 = chunk * kChunkRows, r1 = min(rows, r0 + kChunkRows);
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
template <int kSets>
__global__ void columnPartialPackedKernel(int kind, const float *x, FloatIn dy,
                                          const double *stats, double *partial,
                                          double *partialB, int64_t rows, int64_t D,
                                          int64_t chunks) {
  const int64_t groups = D / kPack;
  const FloatIn xs{x, false};
  LOOM_GRID_STRIDE(item, chunks * groups) {
    int64_t chunk = item / groups, col = item % groups * kPack;
    int64_t r0 = chunk * kChunkRows, r1 = min(rows, r0 + kChunkRows);
    double acc[kPack] = {}, accB[kPack] = {};
#pragma unroll 4
    for (int64_t r = r0; r < r1; ++r) {
      Pack g = load8(dy, r * D + col), xv = {}; // a bias gradient (kind 2) reads dy alone
      if (kind != 2) xv = load8(xs, r * D + col);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        acc[k] += normTermOf(kind, g.v[k], xv.v[k], stats, r);
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
/// and 16-byte aligned rows in x (f32, when read) and dy.
bool columnsPackable(int64_t D, const float *x, const DevTensor &dy) {
  return D % kPack == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(dy.data) % 16 == 0;
}

void columnSums(int kind, const float *x, const DevTensor &dyT, const double *stats,
                double *partial, float *out, int64_t rows, int64_t D, cudaStream_t stream) {
  int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  if (chunks == 0) {
    cudaMemsetAsync(out, 0, size_t(D) * sizeof(float), stream);
    return;
  }
  FloatIn dy = floatIn(dyT);
  if (columnsPackable(D, x, dyT)) {
    columnPartialPackedKernel<1><<<gridFor(chunks * (D / kPack)), kThreads, 0, stream>>>(
        kind, x, dy, stats, partial, nullptr, rows, D, chunks);
  } else {
    dim3 grid(unsigned((D + kThreads - 1) / kThreads), unsigned(chunks));
    columnPartialKernel<<<grid, kThreads, 0, stream>>>(kind, x, dy, stats, partial, rows, D);
  }
  columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, stream>>>(partial, out, chunks, D);
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

__global__ void reduceFinishKernel(const double *partial, float *y, int64_t slices,
                                   int64_t count, int kind) {
  __shared__ double sh[32];
  int64_t out = blockIdx.x;
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
    for (int k = 0; k < kBatch; ++k) t[k] = partial[out * slices + i + k * step];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) add(t[k]);
  }
  for (; i < slices; i += step) add(partial[out * slices + i]);
  double v = kind == 2 ? blockMax(mx, sh) : blockSum(sum, sh);
  if (threadIdx.x == 0) y[out] = float(kind == 1 ? v / double(count) : v);
}

// Elements per block when sliced. Small enough that a 2048 x 8192
// gradient fills every SM many times over (2,048 blocks): at 64K a
// parameter's sum of squares ran on two blocks per SM and waited on memory
// latency at a third of the bandwidth.
constexpr int64_t kReduceSlice = 8 * 1024;

// SumSquares: a whole-tensor Reduce sum of Mul(x, x) in one read of x, in
// Reduce's own order: slice blockIdx.x of kReduceSlice elements (all of x
// when it is smaller) is walked by the block's threads in strides of the
// block size, each thread adding the f32 square (what Mul stores) in
// double, then blockSum; the slices' partial sums go to scratch and
// reduceFinishKernel adds them in order. So the result has the bits of the
// two-instruction form, run after run (no atomics). x may be bf16 storage.
__global__ void sumSquaresKernel(FloatIn x, float *y, double *partial, int64_t count,
                                 int64_t slice) {
  __shared__ double sh[32];
  int64_t r0 = int64_t(blockIdx.x) * slice, r1 = min(count, r0 + slice);
  double sum = 0;
  // Eight loads are issued before their adds (kept in order), so each
  // thread has eight in flight instead of waiting out one per add.
  constexpr int kBatch = 8;
  const int64_t step = blockDim.x;
  int64_t r = r0 + threadIdx.x;
  for (; r + (kBatch - 1) * step < r1; r += kBatch * step) {
    float v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) v[k] = x[r + k * step];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) sum += double(__fmul_rn(v[k], v[k]));
  }
  for (; r < r1; r += step) {
    float v = x[r];
    sum += double(__fmul_rn(v, v));
  }
  sum = blockSum(sum, sh);
  if (threadIdx.x != 0) return;
  if (partial)
    partial[blockIdx.x] = sum;
  else
    y[0] = float(sum);
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
  if (I.op == OpCode::SumSquares) {
    int64_t slices = reduceSlices(1, p.buffers[I.in[0]].numElements());
    return slices > 1 ? size_t(slices) * sizeof(double) : 0;
  }
  if (I.op == OpCode::Reduce) {
    if (int64_t rows, D; leadingColumnSum(I, p.buffers[I.in[0]].shape, rows, D))
      return size_t((rows + kChunkRows - 1) / kChunkRows * D) * sizeof(double);
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
  int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  // per-row statistics (2 doubles) + per-chunk partial column sums (two
  // sets for LayerNorm: dw and db in one pass)
  int64_t sets = I.op == OpCode::LayerNormGrad ? 2 : 1;
  return size_t(2 * rows + sets * chunks * D) * sizeof(double) + 256;
}

void launchRmsNorm(const CudaCall &c, CudaContext &ctx) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  if (rows == 0) return;
  if (D <= kWarpRow) {
    rmsNormWarpKernel<<<warpRowBlocks(rows), kRowThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), c.in[1].as<float>(), floatOut(c.out[0]), rows, D, c.instr->floats[0],
        fusedAmaxBits(c, 0));
    return;
  }
  rmsNormKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
      floatIn(c.in[0]), c.in[1].as<float>(), floatOut(c.out[0]), D, c.instr->floats[0],
      rowsPackable(D, {&c.in[0], &c.out[0]}), fusedAmaxBits(c, 0));
}

void launchLayerNorm(const CudaCall &c, CudaContext &ctx) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  if (rows == 0) return;
  const float *b = c.in.size() > 2 ? c.in[2].as<float>() : nullptr;
  layerNormKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
      floatIn(c.in[0]), c.in[1].as<float>(), b, floatOut(c.out[0]), D, c.instr->floats[0],
      rowsPackable(D, {&c.in[0], &c.out[0]}));
}

void launchRmsNormGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  auto *stats = static_cast<double *>(ctx.scratch);
  double *partial = stats + 2 * rows;
  if (rows > 0 && D <= kWarpRow)
    rmsNormGradWarpKernel<<<warpRowBlocks(rows), kRowThreads, 0, ctx.stream>>>(
        c.in[0].as<float>(), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]), stats,
        rows, D, c.instr->floats[0], fusedAmaxBits(c, 0));
  else if (rows > 0)
    rmsNormGradRowKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
        c.in[0].as<float>(), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]), stats, D,
        c.instr->floats[0], rowsPackable(D, {&c.in[0], &c.in[2], &c.out[0]}), fusedAmaxBits(c, 0));
  columnSums(0, c.in[0].as<float>(), c.in[2], stats, partial, c.out[1].as<float>(), rows,
             D, ctx.stream);
}

void launchLayerNormGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t rows = rowsOf(c.in[0]), D = c.in[0].shape().back();
  auto *stats = static_cast<double *>(ctx.scratch);
  double *partial = stats + 2 * rows;
  if (rows > 0)
    layerNormGradRowKernel<<<unsigned(rows), kRowThreads, 0, ctx.stream>>>(
        c.in[0].as<float>(), c.in[1].as<float>(), floatIn(c.in[2]), floatOut(c.out[0]), stats, D,
        c.instr->floats[0], rowsPackable(D, {&c.in[0], &c.in[2], &c.out[0]}));
  int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  if (chunks == 0) {
    cudaMemsetAsync(c.out[1].data, 0, size_t(D) * sizeof(float), ctx.stream);
    cudaMemsetAsync(c.out[2].data, 0, size_t(D) * sizeof(float), ctx.stream);
    return;
  }
  double *partialB = partial + chunks * D; // normScratchBytes counts both
  const float *x = c.in[0].as<float>();
  if (columnsPackable(D, x, c.in[2])) {
    columnPartialPackedKernel<2><<<gridFor(chunks * (D / kPack)), kThreads, 0, ctx.stream>>>(
        1, x, floatIn(c.in[2]), stats, partial, partialB, rows, D, chunks);
  } else {
    dim3 grid(unsigned((D + kThreads - 1) / kThreads), unsigned(chunks));
    layerNormColumnPartialKernel<<<grid, kThreads, 0, ctx.stream>>>(x, floatIn(c.in[2]), stats,
                                                                    partial, partialB, rows, D);
  }
  columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, ctx.stream>>>(
      partial, c.out[1].as<float>(), chunks, D);
  columnFinishKernel<<<finishBlocks(D), kRowThreads, 0, ctx.stream>>>(
      partialB, c.out[2].as<float>(), chunks, D);
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
    columnSums(2, nullptr, c.in[0], nullptr, static_cast<double *>(ctx.scratch),
               c.out[0].as<float>(), rows, D, ctx.stream);
    return;
  }
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
  int64_t count = c.in[0].numel(); // 0 elements: one block adds nothing, y = 0
  int64_t slices = reduceSlices(1, count);
  double *partial = slices > 1 ? static_cast<double *>(ctx.scratch) : nullptr;
  sumSquaresKernel<<<unsigned(slices), kRowThreads, 0, ctx.stream>>>(
      floatIn(c.in[0]), c.out[0].as<float>(), partial, count, slices > 1 ? kReduceSlice : count);
  if (partial)
    reduceFinishKernel<<<1, kRowThreads, 0, ctx.stream>>>(partial, c.out[0].as<float>(), slices,
                                                           count, 0);
}

} // namespace loom::rt::cuda
