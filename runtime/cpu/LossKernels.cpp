//===- LossKernels.cpp - Cross-entropy ------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// loss = (1/N) sum_n [ logsumexp(logits[n, :]) - logits[n, t_n] ]
// with logsumexp(x) = m + log(sum_v exp(x_v - m)), m = max_v x_v, so no
// exponent is positive and nothing overflows. Everything accumulates in
// double; per-row losses are summed in row order afterwards so the result
// does not depend on the thread count.
//===----------------------------------------------------------------------===//
#include "cpu/Kernels.h"
#include "lib/Diagnostics.h"

#include <cmath>
#include <limits>

namespace loom::rt {

namespace {

/// The mean over rows of logsumexp(row) - row[t], for logits of type T.
template <typename T>
double meanLoss(const KernelCall &c, const std::vector<int64_t> &t, ThreadPool &pool) {
  const Tensor &logits = c.in[0];
  int64_t N = logits.shape()[0], V = logits.shape()[1];
  const T *x = logits.as<T>();
  std::vector<double> rowLoss(static_cast<size_t>(N));
  int64_t grain = std::max<int64_t>(1, (int64_t(1) << 14) / V);
  pool.parallelFor(N, grain, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const T *row = x + n * V;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
      rowLoss[n] = mx + std::log(sum) - row[t[n]];
    }
  });
  double total = 0;
  for (double l : rowLoss) total += l;
  return total / double(N);
}

} // namespace

// f32 or f64 logits; the loss is f32, or f64 for f64 logits.
bool runCrossEntropy(const KernelCall &c, ThreadPool &pool, std::string &err) {
  const Tensor &logits = c.in[0], &targets = c.in[1];
  int64_t N = logits.shape()[0], V = logits.shape()[1];
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    t[n] = targets.dtype() == DType::I64 ? targets.as<int64_t>()[n] : targets.as<int32_t>()[n];
    if (t[n] < 0 || t[n] >= V) {
      err = cat("target ", t[n], " at row ", n, " out of range [0, ", V, ")");
      return false;
    }
  }
  double loss = logits.dtype() == DType::F64 ? meanLoss<double>(c, t, pool)
                                              : meanLoss<float>(c, t, pool);
  if (c.out[0].dtype() == DType::F64)
    *c.out[0].as<double>() = loss;
  else
    *c.out[0].as<float>() = float(loss);
  return true;
}

} // namespace loom::rt
