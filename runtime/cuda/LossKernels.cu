//===- LossKernels.cu - Cross-entropy forward/backward, EmbeddingGrad -----===//
//
// Part of loom, under the Apache License v2.0.
//
// CrossEntropy, loss = (1/N) sum_n [logsumexp(x_n) - x_n[t_n]]: one block
// per row computes its term (max-shifted, in double) into scratch, then one
// block sums the N terms in a fixed order, so the loss is reproducible.
// CrossEntropyGrad, dx[n, v] = (softmax(x_n)[v] - [v == t_n]) dloss / N,
// reads dloss from device memory (it is a graph value).
//
// EmbeddingGrad, dtable[v, :] = sum over positions n with ids[n] == v of
// dy[n, :], must not add rows with float atomics (their order would change
// the bits from run to run). Instead the positions are sorted by id with
// CUB's stable radix sort, and one block per vocab row finds its run of
// positions by binary search and sums it in position order: the same order
// as the CPU reference.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace loom::rt::cuda {
namespace {

constexpr int kLossThreads = 256;

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/// The row's max and sum of exp(x - max) over the block (every thread gets
/// both), in double.
__device__ void rowMaxAndSum(const float *row, int64_t V, double *red, double &mx, double &sum) {
  mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmax(mx, double(row[v]));
  mx = blockMax(mx, red);
  sum = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) sum += exp(row[v] - mx);
  sum = blockSum(sum, red);
}

__global__ void crossEntropyRowKernel(const float *x, const void *targets, bool t64,
                                      double *rowLoss, int64_t V, DeviceError *err, int instr) {
  __shared__ double red[32];
  int64_t n = blockIdx.x;
  const float *row = x + n * V;
  int64_t t = indexAt(targets, t64, n);
  double mx, sum;
  rowMaxAndSum(row, V, red, mx, sum);
  if (threadIdx.x == 0) {
    if (t < 0 || t >= V) {
      reportError(err, instr, 1, t, n, V);
      rowLoss[n] = 0;
    } else {
      rowLoss[n] = mx + log(sum) - row[t];
    }
  }
}

__global__ void meanKernel(const double *terms, int64_t n, float *out) {
  __shared__ double red[32];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += terms[i];
  acc = blockSum(acc, red);
  if (threadIdx.x == 0) *out = float(n ? acc / double(n) : nan(""));
}

__global__ void crossEntropyGradKernel(const float *x, const void *targets, bool t64,
                                       const float *dloss, float *dx, int64_t N, int64_t V,
                                       DeviceError *err, int instr) {
  __shared__ double red[32];
  int64_t n = blockIdx.x;
  const float *row = x + n * V;
  int64_t t = indexAt(targets, t64, n);
  if (t < 0 || t >= V) {
    if (threadIdx.x == 0) reportError(err, instr, 1, t, n, V);
    return;
  }
  double mx, sum;
  rowMaxAndSum(row, V, red, mx, sum);
  double factor = double(*dloss) / double(N);
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    dx[n * V + v] = float((exp(row[v] - mx) / sum - (v == t ? 1.0 : 0.0)) * factor);
}

// Keys are ids (bad ones moved past the vocabulary, so no row reads them);
// values are positions.
__global__ void embeddingKeysKernel(const void *ids, bool ids64, int32_t *keys, int32_t *pos,
                                    int64_t N, int64_t V, DeviceError *err, int instr) {
  LOOM_GRID_STRIDE(n, N) {
    int64_t id = indexAt(ids, ids64, n);
    if (id < 0 || id >= V) {
      reportError(err, instr, 0, id, n, V);
      id = V;
    }
    keys[n] = int32_t(id);
    pos[n] = int32_t(n);
  }
}

__global__ void embeddingGradRowsKernel(const float *dy, const int32_t *sortedKeys,
                                        const int32_t *sortedPos, float *out, int64_t N,
                                        int64_t D) {
  int32_t v = int32_t(blockIdx.x);
  // First k with sortedKeys[k] >= v, and first with > v.
  int64_t lo = 0, hi = N;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (sortedKeys[mid] < v) lo = mid + 1; else hi = mid;
  }
  int64_t begin = lo;
  hi = N;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (sortedKeys[mid] <= v) lo = mid + 1; else hi = mid;
  }
  int64_t end = lo;
  for (int64_t col = threadIdx.x; col < D; col += blockDim.x) {
    double acc = 0;
    for (int64_t k = begin; k < end; ++k) acc += dy[int64_t(sortedPos[k]) * D + col];
    out[int64_t(v) * D + col] = float(acc);
  }
}

/// Bits the radix sort must look at to order keys in [0, V] (V marks a bad
/// id).
int keyBits(int64_t V) {
  int bits = 1;
  while ((int64_t(1) << bits) <= V) ++bits;
  return bits;
}

size_t sortTempBytes(int64_t N, int64_t V) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t *>(nullptr),
                                  static_cast<int32_t *>(nullptr),
                                  static_cast<const int32_t *>(nullptr),
                                  static_cast<int32_t *>(nullptr), int(N), 0, keyBits(V));
  return bytes;
}

} // namespace

size_t lossScratchBytes(const Program &p, const Instr &I) {
  if (I.op == OpCode::CrossEntropy)
    return size_t(p.buffers[I.in[0]].shape[0]) * sizeof(double);
  if (I.op == OpCode::EmbeddingGrad) {
    int64_t N = p.buffers[I.in[1]].numElements(), V = p.buffers[I.out[0]].shape[0];
    return 4 * align256(size_t(N) * 4) + sortTempBytes(N, V);
  }
  return 0;
}

void launchCrossEntropy(const CudaCall &c, CudaContext &ctx) {
  int64_t N = c.in[0].shape()[0], V = c.in[0].shape()[1];
  auto *rowLoss = static_cast<double *>(ctx.scratch);
  if (N > 0)
    crossEntropyRowKernel<<<unsigned(N), kLossThreads, 0, ctx.stream>>>(
        c.in[0].as<float>(), c.in[1].data, c.in[1].dtype() == DType::I64, rowLoss, V, ctx.error,
        c.index);
  meanKernel<<<1, 1024, 0, ctx.stream>>>(rowLoss, N, c.out[0].as<float>());
}

void launchCrossEntropyGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t N = c.in[0].shape()[0], V = c.in[0].shape()[1];
  if (N == 0) return;
  crossEntropyGradKernel<<<unsigned(N), kLossThreads, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].data, c.in[1].dtype() == DType::I64, c.in[2].as<float>(),
      c.out[0].as<float>(), N, V, ctx.error, c.index);
}

void launchEmbeddingGrad(const CudaCall &c, CudaContext &ctx) {
  const DevTensor &dy = c.in[0], &ids = c.in[1];
  int64_t N = ids.numel(), V = c.out[0].shape()[0], D = c.out[0].shape()[1];
  if (V == 0 || D == 0) return;
  if (N == 0) {
    cudaMemsetAsync(c.out[0].data, 0, c.out[0].desc->bytes, ctx.stream);
    return;
  }
  auto *base = static_cast<uint8_t *>(ctx.scratch);
  size_t slot = align256(size_t(N) * 4);
  auto *keys = reinterpret_cast<int32_t *>(base), *pos = reinterpret_cast<int32_t *>(base + slot);
  auto *sortedKeys = reinterpret_cast<int32_t *>(base + 2 * slot);
  auto *sortedPos = reinterpret_cast<int32_t *>(base + 3 * slot);
  void *temp = base + 4 * slot;
  size_t tempBytes = sortTempBytes(N, V);
  embeddingKeysKernel<<<gridFor(N), kThreads, 0, ctx.stream>>>(
      ids.data, ids.dtype() == DType::I64, keys, pos, N, V, ctx.error, c.index);
  cub::DeviceRadixSort::SortPairs(temp, tempBytes, keys, sortedKeys, pos, sortedPos, int(N), 0,
                                  keyBits(V), ctx.stream);
  embeddingGradRowsKernel<<<unsigned(V), 128, 0, ctx.stream>>>(
      dy.as<float>(), sortedKeys, sortedPos, c.out[0].as<float>(), N, D);
}

} // namespace loom::rt::cuda
