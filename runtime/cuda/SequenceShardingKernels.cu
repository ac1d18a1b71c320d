//===- SequenceShardingKernels.cu - ShardSlice and the vocabulary shards --===//
//
// Part of loom, under the Apache License v2.0.
//
// The CUDA side of cpu/SequenceShardingKernels.cpp, with the same
// arithmetic: ShardSlice is Slice from the rank's own start; the
// vocabulary-shard embedding reads a row or writes zeros; the shard's
// cross-entropy part sums exp(x - shift) in double over a block in a
// fixed order (one block per row), and its gradient rounds
// dsumexp exp(x - shift) to f32 before adding the target's term, as the
// CPU kernel does. VocabShardEmbeddingGrad shares EmbeddingGrad's
// deterministic sort-and-sum (EmbeddingGradKernels.cu).
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "loom/runtime/Communicator.h"

namespace loom::rt::cuda {
namespace {

__global__ void vocabEmbeddingKernel(const float *table, const void *ids, bool ids64,
                                     const void *first, bool first64, float *out, int64_t n,
                                     int64_t rows, int64_t D, int64_t vocab, DeviceError *err,
                                     int instr) {
  int64_t offset = indexAt(first, first64, 0);
  LOOM_GRID_STRIDE(i, n * D) {
    int64_t id = indexAt(ids, ids64, i / D), row = id - offset;
    // Outside the whole vocabulary: bad data, reported as Embedding does.
    if ((id < 0 || id >= vocab) && i % D == 0)
      reportError(err, instr, 0, id, i / D, vocab);
    out[i] = row >= 0 && row < rows ? table[row * D + i % D] : 0.f;
  }
}

__global__ void vocabCrossEntropyKernel(const float *x, const void *targets, bool t64,
                                        const void *first, bool first64, const float *shift,
                                        float *sumexp, float *target, int64_t V, int64_t vocab,
                                        DeviceError *err, int instr) {
  __shared__ double red[32];
  int64_t n = blockIdx.x;
  double m = double(shift[n]), acc = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) acc += exp(double(x[n * V + v]) - m);
  acc = blockSum(acc, red);
  if (threadIdx.x == 0) {
    int64_t global = indexAt(targets, t64, n), t = global - indexAt(first, first64, 0);
    if (global < 0 || global >= vocab) // bad data, as CrossEntropy reports it
      reportError(err, instr, 1, global, n, vocab);
    sumexp[n] = float(acc);
    target[n] = t >= 0 && t < V ? float(double(x[n * V + t]) - m) : 0.f;
  }
}

__global__ void vocabCrossEntropyGradKernel(const float *x, const void *targets, bool t64,
                                            const void *first, bool first64, const float *shift,
                                            const float *dSum, const float *dTarget, float *dx,
                                            int64_t N, int64_t V) {
  int64_t offset = indexAt(first, first64, 0);
  LOOM_GRID_STRIDE(i, N * V) {
    int64_t n = i / V, v = i % V;
    float g = float(double(dSum[n]) * exp(double(x[i]) - double(shift[n])));
    if (v == indexAt(targets, t64, n) - offset)
      g = float(double(g) + double(dTarget[n]));
    dx[i] = g;
  }
}

bool is64(const DevTensor &t) { return t.dtype() == DType::I64; }

} // namespace

void launchShardSlice(const CudaCall &c, CudaContext &ctx) {
  // The Slice this rank runs: start g * out dim along `dim`, step 1.
  const Instr &I = *c.instr;
  int64_t dim = I.ints[1], g = Communicator::groupIndex(ctx.rank, I.ints);
  Instr slice;
  slice.op = OpCode::Slice;
  for (size_t d = 0; d < c.in[0].shape().size(); ++d) {
    slice.ints.push_back(int64_t(d) == dim ? g * c.out[0].shape()[d] : 0);
    slice.ints.push_back(1);
  }
  CudaCall local = c;
  local.instr = &slice;
  launchSlice(local, ctx);
}

void launchVocabShardEmbedding(const CudaCall &c, CudaContext &ctx) {
  const DevTensor &table = c.in[0], &ids = c.in[1], &first = c.in[2];
  int64_t n = ids.numel(), D = table.shape()[1];
  if (n * D == 0) return;
  vocabEmbeddingKernel<<<gridFor(n * D), kThreads, 0, ctx.stream>>>(
      table.as<float>(), ids.data, is64(ids), first.data, is64(first), c.out[0].as<float>(), n,
      table.shape()[0], D, c.instr->ints[0], ctx.error, c.index);
}

void launchVocabShardCrossEntropy(const CudaCall &c, CudaContext &ctx) {
  int64_t N = c.in[0].shape()[0], V = c.in[0].shape()[1];
  if (N == 0) return;
  vocabCrossEntropyKernel<<<unsigned(N), kThreads, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].data, is64(c.in[1]), c.in[2].data, is64(c.in[2]),
      c.in[3].as<float>(), c.out[0].as<float>(), c.out[1].as<float>(), V, c.instr->ints[0],
      ctx.error, c.index);
}

void launchVocabShardCrossEntropyGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t N = c.in[0].shape()[0], V = c.in[0].shape()[1];
  if (N * V == 0) return;
  vocabCrossEntropyGradKernel<<<gridFor(N * V), kThreads, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].data, is64(c.in[1]), c.in[2].data, is64(c.in[2]),
      c.in[3].as<float>(), c.in[4].as<float>(), c.in[5].as<float>(), c.out[0].as<float>(), N, V);
}

} // namespace loom::rt::cuda
