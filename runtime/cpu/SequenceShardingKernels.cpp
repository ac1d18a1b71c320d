//===- SequenceShardingKernels.cpp - ShardSlice and the vocabulary shards --===//
//
// Part of loom, under the Apache License v2.0.
//
// ShardSlice is a Slice whose start depends on the rank; the vocabulary-
// shard kernels are Embedding, EmbeddingGrad, CrossEntropy and its
// gradient restricted to the columns [first, first + Vl) one rank holds,
// with ids outside that range contributing nothing. Sums accumulate in
// double, as the whole-vocabulary kernels do.
//===----------------------------------------------------------------------===//
#include "cpu/Kernels.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/Communicator.h"

#include <cstring>

namespace loom::rt {

namespace {

int64_t indexValue(const Tensor &t, int64_t i) {
  return t.dtype() == DType::I64 ? t.as<int64_t>()[i] : t.as<int32_t>()[i];
}

template <typename T> void embeddingShard(const KernelCall &c, int64_t first, ThreadPool &pool) {
  const Tensor &table = c.in[0], &ids = c.in[1];
  int64_t rows = table.shape()[0], D = table.shape()[1];
  const T *t = table.as<T>();
  T *y = c.out[0].as<T>();
  pool.parallelFor(ids.numel(), 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t row = indexValue(ids, i) - first;
      if (row >= 0 && row < rows)
        std::memcpy(y + i * D, t + row * D, size_t(D) * sizeof(T));
      else
        std::fill(y + i * D, y + (i + 1) * D, T(0));
    }
  });
}

template <typename T> void embeddingShardGrad(const KernelCall &c, int64_t first) {
  const Tensor &dy = c.in[0], &ids = c.in[1];
  const Tensor &out = c.out[0];
  int64_t rows = out.shape()[0], D = out.shape()[1], n = ids.numel();
  // Positions in order, accumulated in double per element: the same sums
  // for any thread count.
  std::vector<double> acc(size_t(rows * D), 0.0);
  const T *g = dy.as<T>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t row = indexValue(ids, i) - first;
    if (row < 0 || row >= rows)
      continue;
    for (int64_t d = 0; d < D; ++d) acc[size_t(row * D + d)] += double(g[i * D + d]);
  }
  T *y = out.as<T>();
  for (size_t k = 0; k < acc.size(); ++k) y[k] = T(acc[k]);
}

template <typename T>
void crossEntropyShard(const KernelCall &c, int64_t first, ThreadPool &pool) {
  const Tensor &logits = c.in[0], &targets = c.in[1];
  int64_t N = logits.shape()[0], V = logits.shape()[1];
  const T *x = logits.as<T>(), *shift = c.in[3].as<T>();
  T *sumexp = c.out[0].as<T>(), *target = c.out[1].as<T>();
  pool.parallelFor(N, std::max<int64_t>(1, (int64_t(1) << 14) / V),
                   [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const T *row = x + n * V;
      double m = double(shift[n]), sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - m);
      sumexp[n] = T(sum);
      int64_t t = indexValue(targets, n) - first;
      target[n] = t >= 0 && t < V ? T(double(row[t]) - m) : T(0);
    }
  });
}

template <typename T>
void crossEntropyShardGrad(const KernelCall &c, int64_t first, ThreadPool &pool) {
  const Tensor &logits = c.in[0], &targets = c.in[1];
  int64_t N = logits.shape()[0], V = logits.shape()[1];
  const T *x = logits.as<T>(), *shift = c.in[3].as<T>(), *dSum = c.in[4].as<T>(),
          *dTarget = c.in[5].as<T>();
  T *dx = c.out[0].as<T>();
  pool.parallelFor(N, std::max<int64_t>(1, (int64_t(1) << 14) / V),
                   [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      double m = double(shift[n]), s = double(dSum[n]);
      for (int64_t v = 0; v < V; ++v) dx[n * V + v] = T(s * std::exp(double(x[n * V + v]) - m));
      int64_t t = indexValue(targets, n) - first;
      if (t >= 0 && t < V)
        dx[n * V + t] = T(double(dx[n * V + t]) + double(dTarget[n]));
    }
  });
}

/// The shard's first id (input 2 of every vocabulary-shard opcode).
int64_t firstOf(const KernelCall &c) { return indexValue(c.in[2], 0); }

/// Calls `run` with a value of the f32 or f64 type the instruction
/// computes in (its first input's).
template <typename Run> bool byFloatType(const KernelCall &c, Run &&run) {
  if (c.in[0].dtype() == DType::F64)
    run(double());
  else
    run(float());
  return true;
}

} // namespace

bool runShardSlice(const KernelCall &c, int rank, ThreadPool &pool, std::string &err) {
  // The Slice this rank runs: start g * out dim along `dim`, step 1.
  const Instr &I = *c.instr;
  int64_t dim = I.ints[1], g = Communicator::groupIndex(rank, I.ints);
  Instr slice;
  slice.op = OpCode::Slice;
  for (size_t d = 0; d < c.in[0].shape().size(); ++d) {
    slice.ints.push_back(int64_t(d) == dim ? g * c.out[0].shape()[d] : 0);
    slice.ints.push_back(1);
  }
  KernelCall local = c;
  local.instr = &slice;
  return runSlice(local, pool, err);
}

bool runVocabShardEmbedding(const KernelCall &c, ThreadPool &pool, std::string &err) {
  // An id outside the whole vocabulary is bad data on every rank, as for
  // Embedding; one outside this shard's rows is another rank's.
  const Tensor &ids = c.in[1];
  int64_t vocab = c.instr->ints[0];
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (int64_t id = indexValue(ids, i); id < 0 || id >= vocab) {
      err = cat("id ", id, " at position ", i, " out of range [0, ", vocab, ")");
      return false;
    }
  return byFloatType(c, [&](auto t) { embeddingShard<decltype(t)>(c, firstOf(c), pool); });
}

bool runVocabShardEmbeddingGrad(const KernelCall &c, ThreadPool &, std::string &) {
  return byFloatType(c, [&](auto t) { embeddingShardGrad<decltype(t)>(c, firstOf(c)); });
}

bool runVocabShardCrossEntropy(const KernelCall &c, ThreadPool &pool, std::string &err) {
  const Tensor &targets = c.in[1];
  int64_t vocab = c.instr->ints[0];
  for (int64_t n = 0; n < targets.numel(); ++n)
    if (int64_t t = indexValue(targets, n); t < 0 || t >= vocab) {
      err = cat("target ", t, " at row ", n, " out of range [0, ", vocab, ")");
      return false;
    }
  return byFloatType(c, [&](auto t) { crossEntropyShard<decltype(t)>(c, firstOf(c), pool); });
}

bool runVocabShardCrossEntropyGrad(const KernelCall &c, ThreadPool &pool, std::string &) {
  return byFloatType(c, [&](auto t) { crossEntropyShardGrad<decltype(t)>(c, firstOf(c), pool); });
}

} // namespace loom::rt
