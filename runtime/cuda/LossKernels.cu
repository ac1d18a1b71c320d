//===- LossKernels.cu - Cross-entropy forward/backward ------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// CrossEntropy, loss = (1/N) sum_n [logsumexp(x_n) - x_n[t_n]]: one block
// per row computes its term (max-shifted, in double) into scratch, then one
// block sums the N terms in a fixed order, so the loss is reproducible.
// CrossEntropyGrad, dx[n, v] = (softmax(x_n)[v] - [v == t_n]) dloss / N,
// reads dloss from device memory (it is a graph value). The logits and their
// gradient may be bf16 storage (autocast's bf16 lm-head output): read
// widened, the gradient rounded once as it is stored.
//
// EmbeddingGrad lives in EmbeddingGradKernels.cu.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"

namespace loom::rt::cuda {
namespace {

constexpr int kLossThreads = 256;
/// The gradient kernel's block, store hint and packs in flight per thread
/// (crossEntropyGradKernel). Timed on an H200 (bench/gpu/ce_bench.cu, [8192,
/// V] bf16, each form beside the kernel before, 2026-11-29): evict-first
/// stores with four packs in flight run 1.00-1.04x the old kernel's time on
/// 128,256- and 151,936-wide rows, where plain stores ran 0.89-0.94x; gpt2's
/// 50,257-wide rows, read one element at a time before, now packed: 1.68 ->
/// 0.645-0.670 ms. Blocks of 512 and 1024, or fewer blocks per SM (to find
/// the row in L2 on its second read), were slower.
constexpr int kLossGradThreads = 256;
constexpr bool kLossGradStreaming = true;
constexpr int kLossGradUnroll = 4;

/// (m, s): a running max and the sum of exp(x - m) over what was seen.
struct MaxSum {
  float m;
  double s;
};

/// Two partial (m, s) as one: rescale each sum to the larger max.
__device__ inline MaxSum combine(MaxSum a, MaxSum b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0};
  return {m, a.s * double(expf(a.m - m)) + b.s * double(expf(b.m - m))};
}

/// The row's max and sum of exp(x - max) over the block (every thread gets
/// both) in one pass over the row (online softmax: a thread rescales its
/// sum when its max grows). exp in fp32, the sum in fp64: one read of the
/// logits instead of two, and no fp64 exp per element.
/// Over a row's packs (RowSplit) a thread reads eight consecutive logits
/// per 16-byte load (bf16) instead of one per 2 bytes.
__device__ inline void onlineAdd(MaxSum &t, float x) {
  if (x > t.m) {
    t.s = t.s * double(expf(t.m - x)) + 1.0;
    t.m = x;
  } else if (x != -INFINITY) { // a -inf logit adds nothing (and -inf - -inf is NaN)
    t.s += double(expf(x - t.m));
  }
}

/// A pack of eight logits into (m, s): the running max moves to the pack's
/// max first (one rescale at most), then the pack's eight exponentials are
/// summed in f32 and added to s once. Per element that leaves one exp and
/// f32 adds; adding each exp to s in double, as onlineAdd does, cost a
/// quarter-rate f32 -> f64 conversion and a dependent double add per
/// element, and the loss kernels ran at 1.8 TB/s (llama-1b's 128,256-wide
/// rows; the HBM roof is twice that). The pack's sum has eight terms of at
/// most 1: within 3 f32 roundings (2^-22 relative) of its value, far below
/// the f32 loss's own rounding.
__device__ inline void packAdd(MaxSum &t, const Pack &p) {
  float pm = fmaxf(fmaxf(fmaxf(p.v[0], p.v[1]), fmaxf(p.v[2], p.v[3])),
                   fmaxf(fmaxf(p.v[4], p.v[5]), fmaxf(p.v[6], p.v[7])));
  if (pm > t.m) {
    t.s = t.m == -INFINITY ? 0.0 : t.s * double(expf(t.m - pm));
    t.m = pm;
  }
  if (t.m == -INFINITY) return; // every logit so far is -inf: nothing to add
  float e[kPack];
#pragma unroll
  for (int k = 0; k < kPack; ++k) e[k] = expf(p.v[k] - t.m);
  t.s += double(((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7])));
}

/// Row n of a [N, V] tensor (elements n V .. n V + V - 1) in three parts:
/// `head` elements up to the first element index that is a multiple of 8,
/// `packs` packs of eight from there (16-byte aligned when the tensor's base
/// is), and the tail after them. Unaligned (a base off 16 bytes), the whole
/// row is head. The split depends on the row's position, not on V % 8, so
/// gpt2's 50,257-wide rows read packed too; it is the same for every tensor
/// of the row's shape, whatever its dtype, so a bf16 and an f32 copy of the
/// logits give the same sums.
struct RowSplit {
  int64_t head, packs;
};

__device__ inline RowSplit rowSplit(int64_t n, int64_t V, bool aligned) {
  if (!aligned) return {V, 0};
  int64_t head = (kPack - (n * V) % kPack) % kPack;
  if (head > V) head = V;
  return {head, (V - head) / kPack};
}

/// body(pack, j) over this thread's packs of a row's RowSplit (the packs
/// starting at element `first`, j the pack's first column after the head),
/// in the same order for any kUnroll: kUnroll packs are loaded before the
/// first of them is used, so their loads are in flight together.
template <int kUnroll, typename Body>
__device__ inline void eachRowPack(FloatIn x, int64_t first, int64_t packs, Body &&body) {
  const int64_t T = blockDim.x;
  int64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * T < packs; i += kUnroll * T) {
    Pack p[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) p[u] = load8(x, first + (i + u * T) * kPack);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) body(p[u], (i + u * T) * kPack);
  }
  for (; i < packs; i += T) {
    Pack p = load8(x, first + i * kPack);
    body(p, i * kPack);
  }
}

template <int kUnroll = 1>
__device__ void rowMaxAndSum(FloatIn xs, int64_t row, int64_t V, bool aligned, double *red,
                             double &mx, double &sum) {
  MaxSum t{-INFINITY, 0.0};
  const RowSplit sp = rowSplit(row, V, aligned);
  const int64_t base = row * V, T = blockDim.x;
  for (int64_t v = threadIdx.x; v < sp.head; v += T) onlineAdd(t, xs[base + v]);
  eachRowPack<kUnroll>(xs, base + sp.head, sp.packs, [&](const Pack &p, int64_t) { packAdd(t, p); });
  for (int64_t v = sp.head + sp.packs * kPack + threadIdx.x; v < V; v += T)
    onlineAdd(t, xs[base + v]);
  for (int o = 16; o > 0; o >>= 1)
    t = combine(t, MaxSum{__shfl_xor_sync(0xffffffffu, t.m, o), __shfl_xor_sync(0xffffffffu, t.s, o)});
  // red holds 32 doubles: warp w's max as a double in red[w], its sum
  // after a barrier; warp 0 combines them.
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __shared__ float maxes[32];
  if (lane == 0) {
    maxes[warp] = t.m;
    red[warp] = t.s;
  }
  __syncthreads();
  if (warp == 0) {
    MaxSum w = lane < warps ? MaxSum{maxes[lane], red[lane]} : MaxSum{-INFINITY, 0.0};
    for (int o = 16; o > 0; o >>= 1)
      w = combine(w, MaxSum{__shfl_xor_sync(0xffffffffu, w.m, o), __shfl_xor_sync(0xffffffffu, w.s, o)});
    if (lane == 0) {
      maxes[0] = w.m;
      red[0] = w.s;
    }
  }
  __syncthreads();
  mx = maxes[0];
  sum = red[0];
  __syncthreads(); // red and maxes are free for the caller
}

/// A row's loss term, logsumexp - x[t], from rowMaxAndSum's statistics:
/// the loss kernel's and the fused gradient's one formula.
__device__ inline double rowLossTerm(FloatIn x, int64_t n, int64_t V, int64_t t, double mx,
                                     double sum) {
  return mx + log(sum) - x[n * V + t];
}

__global__ void crossEntropyRowKernel(FloatIn x, const void *targets, bool t64,
                                      double *rowLoss, int64_t V, bool aligned, DeviceError *err,
                                      int instr) {
  __shared__ double red[32];
  int64_t n = blockIdx.x;
  int64_t t = indexAt(targets, t64, n);
  double mx, sum;
  rowMaxAndSum(x, n, V, aligned, red, mx, sum);
  if (threadIdx.x == 0) {
    if (t < 0 || t >= V) {
      reportError(err, instr, 1, t, n, V);
      rowLoss[n] = 0;
    } else {
      rowLoss[n] = rowLossTerm(x, n, V, t, mx, sum);
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

/// A pack stored with the evict-first hint (st.global.cs): the gradient is
/// not read again by this kernel, and its lines should not push out the
/// logits' lines that the gradient pass reads a second time.
__device__ inline void store8Streaming(FloatOut y, int64_t i, const Pack &p) {
  if (y.bf16) {
    uint32_t w[4];
    for (int k = 0; k < 4; ++k) w[k] = floatsToBf16x2(p.v[2 * k], p.v[2 * k + 1]);
    __stcs(reinterpret_cast<uint4 *>(static_cast<uint16_t *>(y.p) + i), make_uint4(w[0], w[1], w[2], w[3]));
  } else {
    float4 *f = reinterpret_cast<float4 *>(static_cast<float *>(y.p) + i);
    __stcs(f, make_float4(p.v[0], p.v[1], p.v[2], p.v[3]));
    __stcs(f + 1, make_float4(p.v[4], p.v[5], p.v[6], p.v[7]));
  }
}

/// dx of the loss, one block per row. With `rowLoss` (the fused loss of
/// CrossEntropyGrad's second output) the block also stores its row's loss
/// term, as crossEntropyRowKernel does from the same statistics (the same
/// RowSplit of x, whatever dx's alignment), so both outputs keep their
/// separate kernels' bits. The row is read twice, for its statistics and
/// for the gradient (at 256 blocks an SM's worth of rows in flight, the
/// second read comes from HBM: fewer blocks lost more bandwidth than L2
/// saved); kStreaming stores the gradient evict-first.
template <bool kStreaming, int kUnroll>
__global__ void crossEntropyGradKernel(FloatIn x, const void *targets, bool t64,
                                       const float *dloss, FloatOut dx, double *rowLoss,
                                       int64_t N, int64_t V, bool xAligned, bool dxAligned,
                                       DeviceError *err, int instr) {
  __shared__ double red[32];
  int64_t n = blockIdx.x;
  int64_t t = indexAt(targets, t64, n);
  if (t < 0 || t >= V) {
    if (threadIdx.x == 0) {
      reportError(err, instr, 1, t, n, V);
      if (rowLoss) rowLoss[n] = 0;
    }
    return;
  }
  double mx, sum;
  rowMaxAndSum<kUnroll>(x, n, V, xAligned, red, mx, sum);
  if (rowLoss && threadIdx.x == 0) rowLoss[n] = rowLossTerm(x, n, V, t, mx, sum);
  // dx = (softmax - onehot) dloss / N, the softmax as exp(x - max) / sum.
  float factor = float(double(*dloss) / double(N)), inv = float(1.0 / sum), m = float(mx);
  auto grad = [&](float xv, int64_t v) {
    return (expf(xv - m) * inv - (v == t ? 1.f : 0.f)) * factor;
  };
  const RowSplit sp = rowSplit(n, V, xAligned && dxAligned);
  const int64_t base = n * V, T = blockDim.x;
  for (int64_t v = threadIdx.x; v < sp.head; v += T) dx.store(base + v, grad(x[base + v], v));
  eachRowPack<kUnroll>(x, base + sp.head, sp.packs, [&](Pack &p, int64_t j) {
    const int64_t col = sp.head + j; // the pack's first column in the row
#pragma unroll
    for (int k = 0; k < kPack; ++k) p.v[k] = grad(p.v[k], col + k);
    if constexpr (kStreaming) store8Streaming(dx, base + col, p);
    else store8(dx, base + col, p);
  });
  for (int64_t v = sp.head + sp.packs * kPack + threadIdx.x; v < V; v += T)
    dx.store(base + v, grad(x[base + v], v));
}

} // namespace

size_t lossScratchBytes(const Program &p, const Instr &I) {
  // The row loss terms: CrossEntropy's, and CrossEntropyGrad's fused loss.
  if (I.op == OpCode::CrossEntropy || (I.op == OpCode::CrossEntropyGrad && I.out.size() == 2))
    return size_t(p.buffers[I.in[0]].shape[0]) * sizeof(double);
  return embeddingGradScratchBytes(p, I);
}

/// A tensor whose rows RowSplit may read and write in packs.
inline bool aligned16(const DevTensor &t) { return reinterpret_cast<uintptr_t>(t.data) % 16 == 0; }

void launchCrossEntropy(const CudaCall &c, CudaContext &ctx) {
  int64_t N = c.in[0].shape()[0], V = c.in[0].shape()[1];
  auto *rowLoss = static_cast<double *>(ctx.scratch);
  if (N > 0)
    crossEntropyRowKernel<<<unsigned(N), kLossThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), c.in[1].data, c.in[1].dtype() == DType::I64, rowLoss, V,
        aligned16(c.in[0]), ctx.error, c.index);
  meanKernel<<<1, 1024, 0, ctx.stream>>>(rowLoss, N, c.out[0].as<float>());
}

void launchCrossEntropyGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t N = c.in[0].shape()[0], V = c.in[0].shape()[1];
  const bool fused = c.out.size() == 2;
  auto *rowLoss = fused ? static_cast<double *>(ctx.scratch) : nullptr;
  if (N > 0)
    crossEntropyGradKernel<kLossGradStreaming, kLossGradUnroll><<<unsigned(N), kLossGradThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), c.in[1].data, c.in[1].dtype() == DType::I64, c.in[2].as<float>(),
        floatOut(c.out[0]), rowLoss, N, V, aligned16(c.in[0]), aligned16(c.out[0]), ctx.error,
        c.index);
  if (fused)
    meanKernel<<<1, 1024, 0, ctx.stream>>>(rowLoss, N, c.out[1].as<float>());
}

} // namespace loom::rt::cuda
