//===- NormKernels.cpp - RmsNorm, LayerNorm, Softmax, Reduce, SumSquares --===//
//
// Part of loom, under the Apache License v2.0.
//
// f32 or f64 in and out; every sum accumulates in double, so the only f32
// rounding is the final store and results match an fp64 reference to about
// one ulp. Rows (or output elements) are spread over the pool.
//===----------------------------------------------------------------------===//
#include "cpu/Kernels.h"
#include "cpu/Strided.h"

#include <cmath>
#include <limits>
#include <vector>

namespace loom::rt {
namespace {

/// Rows of length `d` per task such that a task covers ~16K elements.
int64_t rowGrain(int64_t d) { return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, d)); }

// y = x / sqrt(mean(x^2) + eps) * w, over the last dim.
template <typename T>
bool rmsNormTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const T *x = c.in[0].as<T>(), *w = c.in[1].as<T>();
  T *y = c.out[0].as<T>();
  int64_t d = c.in[0].shape().back(), rows = d ? c.in[0].numel() / d : 0;
  double eps = c.instr->floats[0];
  pool.parallelFor(rows, rowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = x + r * d;
      double ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += double(xr[i]) * xr[i];
      double inv = 1.0 / std::sqrt(ss / double(d) + eps);
      for (int64_t i = 0; i < d; ++i) y[r * d + i] = T(xr[i] * inv * w[i]);
    }
  });
  return true;
}

// y = (x - mean) / sqrt(var + eps) * w + b, over the last dim; var is the
// biased variance mean((x - mean)^2), computed in a second pass so it does
// not suffer the cancellation of mean(x^2) - mean^2.
template <typename T>
bool layerNormTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const T *x = c.in[0].as<T>(), *w = c.in[1].as<T>();
  const T *b = c.in.size() > 2 ? c.in[2].as<T>() : nullptr;
  T *y = c.out[0].as<T>();
  int64_t d = c.in[0].shape().back(), rows = d ? c.in[0].numel() / d : 0;
  double eps = c.instr->floats[0];
  pool.parallelFor(rows, rowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = x + r * d;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < d; ++i) sum += xr[i];
      double mean = sum / double(d);
      for (int64_t i = 0; i < d; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
      double inv = 1.0 / std::sqrt(sq / double(d) + eps);
      for (int64_t i = 0; i < d; ++i)
        y[r * d + i] = T((xr[i] - mean) * inv * w[i] + (b ? b[i] : 0.0));
    }
  });
  return true;
}

// y_i = exp(x_i - max) / sum_j exp(x_j - max) along one axis. Subtracting the
// max keeps every exponent <= 0, so nothing overflows. The tensor is viewed
// as [outer, len, inner]; each (outer, inner) pair is one independent line.
template <typename T>
bool softmaxTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Shape &shape = c.in[0].shape();
  size_t axis = size_t(c.instr->ints[0]);
  int64_t outer = 1, len = shape[axis], inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const T *x = c.in[0].as<T>();
  T *y = c.out[0].as<T>();
  pool.parallelFor(outer * inner, rowGrain(len), [&](int64_t begin, int64_t end) {
    std::vector<double> e(static_cast<size_t>(len));
    for (int64_t line = begin; line < end; ++line) {
      int64_t base = (line / inner) * len * inner + line % inner;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < len; ++i) mx = std::max(mx, double(x[base + i * inner]));
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) sum += e[i] = std::exp(x[base + i * inner] - mx);
      for (int64_t i = 0; i < len; ++i) y[base + i * inner] = T(e[i] / sum);
    }
  });
  return true;
}

// Sum, mean or max over a set of axes. The input's dims split into kept dims
// (they index the output, in order) and reduced dims (summed over); adjacent
// reduced dims are collapsed so the innermost loop is as long as possible.
template <typename T>
bool reduceTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Shape &shape = c.in[0].shape();
  std::vector<bool> reduced(shape.size(), false);
  for (size_t k = 1; k < c.instr->ints.size(); ++k) reduced[size_t(c.instr->ints[k])] = true;
  ReduceAxes ax(shape, reduced);
  const Shape &keptShape = ax.keptShape, &keptStrides = ax.keptStrides;
  const Shape &redShape = ax.redShape, &redStrides = ax.redStrides;
  int64_t count = ax.count;
  int kind = int(c.instr->ints[0]); // 0 sum, 1 mean, 2 max
  const T *x = c.in[0].as<T>();
  T *y = c.out[0].as<T>();
  Shape outerRed(redShape.begin(), redShape.end() - 1), outerStrides(redStrides.begin(), redStrides.end() - 1);
  int64_t innerLen = redShape.back(), innerStride = redStrides.back();
  int64_t outerCount = innerLen ? count / innerLen : 0;
  pool.parallelFor(c.out[0].numel(), rowGrain(count), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      int64_t base = offsetOf(o, keptShape, keptStrides);
      double sum = 0;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t r = 0; r < outerCount; ++r) {
        const T *p = x + base + offsetOf(r, outerRed, outerStrides);
        for (int64_t i = 0; i < innerLen; ++i) {
          double v = p[i * innerStride];
          sum += v;
          mx = v != v || v > mx ? v : mx; // NaN propagates, like NumPy's max
        }
      }
      y[o] = T(kind == 2 ? mx : kind == 1 ? sum / double(count) : sum);
    }
  });
  return true;
}

// Sum of x * x over every element, each square rounded to T first: the
// value of Mul(x, x) then Reduce(sum, every axis), which runs as one task
// adding in flat order (reduceTyped above, with one output and one
// collapsed reduced dim). Same order here, so the same bits.
template <typename T> T sumOfSquares(const T *x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    T sq = x[i] * x[i];
    sum += double(sq);
  }
  return T(sum);
}

template <typename T> bool sumSquaresTyped(const KernelCall &c, ThreadPool &, std::string &) {
  *c.out[0].as<T>() = sumOfSquares(c.in[0].as<T>(), c.in[0].numel());
  return true;
}

// GlobalSumSquares: each input's sum as SumSquares finds it (the inputs
// spread over the pool, one task each), then the chain of Adds it
// replaces, in input order, each sum rounded to T.
template <typename T>
bool globalSumSquaresTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  std::vector<T> sums(c.in.size());
  pool.parallelFor(int64_t(sums.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k)
      sums[size_t(k)] = sumOfSquares(c.in[size_t(k)].as<T>(), c.in[size_t(k)].numel());
  });
  T total = sums[0];
  for (size_t k = 1; k < sums.size(); ++k) total = T(total + sums[k]);
  *c.out[0].as<T>() = total;
  return true;
}

} // namespace

// The entry points: f32 or f64 by the output dtype, the same code for both.
bool runRmsNorm(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return rmsNormTyped<double>(c, pool, err);
  return rmsNormTyped<float>(c, pool, err);
}

// The sum as Add writes it (a + b in the dtype, operands of one shape),
// then RmsNorm of the sum as stored.
bool runAddRmsNorm(const KernelCall &c, ThreadPool &pool, std::string &err) {
  auto add = [&](auto zero) {
    using T = decltype(zero);
    const T *a = c.in[0].as<T>(), *b = c.in[1].as<T>();
    T *sum = c.out[0].as<T>();
    pool.parallelFor(c.out[0].numel(), int64_t(1) << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sum[i] = a[i] + b[i];
    });
  };
  if (c.out[0].dtype() == DType::F64)
    add(0.0);
  else
    add(0.0f);
  KernelCall norm{c.instr, {c.out[0], c.in[2]}, {c.out[1]}};
  return runRmsNorm(norm, pool, err);
}

bool runLayerNorm(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return layerNormTyped<double>(c, pool, err);
  return layerNormTyped<float>(c, pool, err);
}

bool runSoftmax(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return softmaxTyped<double>(c, pool, err);
  return softmaxTyped<float>(c, pool, err);
}

bool runReduce(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return reduceTyped<double>(c, pool, err);
  return reduceTyped<float>(c, pool, err);
}

bool runSumSquares(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return sumSquaresTyped<double>(c, pool, err);
  return sumSquaresTyped<float>(c, pool, err);
}

bool runGlobalSumSquares(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return globalSumSquaresTyped<double>(c, pool, err);
  return globalSumSquaresTyped<float>(c, pool, err);
}

} // namespace loom::rt
