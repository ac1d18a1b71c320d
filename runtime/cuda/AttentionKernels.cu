//===- AttentionKernels.cu - Causal grouped-query attention, fwd and bwd --===//
//
// Part of loom, under the Apache License v2.0.
//
// q[B, Hq, T, D], k[B, Hkv, S, D], v[B, Hkv, S, Dv]; query head h reads kv
// head g = h / (Hq / Hkv); key j is visible to query i unless causal and
// j > i + max(S - T, 0), or a sliding window w hides it (j <= i + max(S -
// T, 0) - w); a softcap c scores c tanh(scale q.k / c), and the backward
// multiplies dS by 1 - (s / c)^2. Same math as cpu/AttentionKernel.cpp, the
// AttentionGrad kernel in cpu/TrainingKernels.cpp and cpu/AttentionMask.h.
// The flash kernels and cuDNN's graph are plain causal: windowed or capped
// attention takes the GEMM, chunked or plain kernels here.
//
// Two implementations of the same math. Head dims up to 128 (every model
// loom has met) take the chunked kernels below, which share K/V (or Q/dY)
// chunks in shared memory across a block; larger ones take the plain
// kernels: one warp per query row (forward, backward pass 1) or per key row
// (backward pass 2), the lanes splitting the head dim (<= 256, 8 per lane). The forward uses the online
// softmax: with running max m, normalizer l and accumulator a,
//   m' = max(m, s_j);  c = exp(m - m');  l' = l c + exp(s_j - m');
//   a' = a c + exp(s_j - m') v_j;        o = a / l and lse = m + log l at the end
// (lse = +inf for a row with no visible key).
// The backward, as on the CPU, owns its outputs instead of adding into them,
// and takes the softmax statistics from the forward (its o and lse) rather
// than recomputing them with a pass over the keys:
//   pass 1 (query rows): delta_i = <dy_i, o_i>,
//           dq_i = scale sum_j P_ij (dP_ij - delta_i) k_j
//   pass 2 (key rows):   dv_j = sum_{h in group, i} P_ij dy_i,
//                        dk_j = scale sum_{h in group, i} P_ij (dP_ij - delta_i) q_i
// with P_ij = exp(s_ij - lse_i) and dP_ij = <dy_i, v_j>. They are exact and
// deterministic but read K and V once per query row: a tiled (flash)
// kernel is what long sequences need.
//
// bf16 storage (Program.h: autocast's casts folded into the instruction):
// the flash kernels read bf16 q, k, v, o, dy in place and round their results
// into bf16 outputs themselves. The f32 implementations here are staged
// instead (F32Staging below): bf16 inputs are widened into f32 scratch, the
// f32 results are rounded into the bf16 outputs by the Cast kernel. That is
// the definition, so they give the unfused program's bits.
//
// Every kernel here reads heads-major operands; a tokens-major instruction
// (AttentionLayout.h) that cuDNN does not run goes through heads-major
// copies (HeadsMajorCall below).
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "cuda/FlashAttention.h"
#include "loom/runtime/AttentionLayout.h"

#include <cstdlib>
#include <deque>
#include <string>

namespace loom::rt::cuda {
namespace {

constexpr int kPerLane = 8; // head dims up to 32 * 8
constexpr int kWarpsPerBlock = 4;

struct AttnShape {
  int64_t B, Hq, Hkv, T, S, D, Dv, group, offset;
  bool causal;
  bool bf16Operands; // q, k, v are bf16 values: products may use bf16 tensor cores
  float scale;
  int64_t window; // sliding window (0: none)
  float softcap;  // score cap (0: none)
};

/// Query i sees keys [firstKey(i), endKey(i)); key j is seen by queries
/// [firstQuery(j), endQuery(j)).
__device__ inline int64_t firstKey(const AttnShape &a, int64_t i) {
  return a.window > 0 ? min(a.S, max(int64_t(0), i + a.offset - a.window + 1)) : 0;
}
__device__ inline int64_t endKey(const AttnShape &a, int64_t i) {
  return a.causal ? min(a.S, i + a.offset + 1) : a.S;
}
__device__ inline int64_t firstQuery(const AttnShape &a, int64_t j) {
  return a.causal ? max(int64_t(0), j - a.offset) : 0;
}
__device__ inline int64_t endQuery(const AttnShape &a, int64_t j) {
  return a.window > 0 ? min(a.T, max(int64_t(0), j - a.offset + a.window)) : a.T;
}
/// The score of scale q.k (already scaled), capped when there is a softcap.
__device__ inline float capScore(const AttnShape &a, float s) {
  return a.softcap > 0.f ? a.softcap * tanhf(s / a.softcap) : s;
}
/// d score / d (scale q.k) at score s.
__device__ inline float capSlope(const AttnShape &a, float s) {
  if (a.softcap <= 0.f) return 1.f;
  float t = s / a.softcap;
  return 1.f - t * t;
}

AttnShape attnShapeOf(const Shape &qs, const Shape &ks, const Shape &vs, const Instr &I) {
  AttnShape a;
  a.B = qs[0];
  a.Hq = qs[1];
  a.T = qs[2];
  a.D = qs[3];
  a.Hkv = ks[1];
  a.S = ks[2];
  a.Dv = vs[3];
  a.group = a.Hkv ? a.Hq / a.Hkv : 1;
  a.offset = a.S > a.T ? a.S - a.T : 0;
  a.causal = I.ints[0] != 0;
  a.bf16Operands = I.ints.size() > 1 && I.ints[1] != 0;
  a.scale = float(I.floats[0]);
  a.window = I.ints.size() > 2 ? I.ints[2] : 0;
  a.softcap = I.floats.size() > 1 ? float(I.floats[1]) : 0.f;
  return a;
}

/// The shape of a call whose operands are heads-major (HeadsMajorCall).
AttnShape attnShape(const CudaCall &c) {
  return attnShapeOf(c.in[0].shape(), c.in[1].shape(), c.in[2].shape(), *c.instr);
}

/// The shape of instruction `I`, in either layout.
AttnShape attnShapeOf(const Program &p, const Instr &I) {
  AttentionLayout l = attentionLayout(I);
  return attnShapeOf(headsMajorDims(p.buffers[I.in[0]].shape, l),
                     headsMajorDims(p.buffers[I.in[1]].shape, l),
                     headsMajorDims(p.buffers[I.in[2]].shape, l), I);
}

/// Loads this lane's slice (d = lane + 32 u) of a row of length n.
__device__ inline void loadRow(const float *p, int64_t n, float (&r)[kPerLane]) {
  int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    int64_t d = lane + 32 * u;
    r[u] = d < n ? p[d] : 0.f;
  }
}

/// <a, p> over the row: lane slices, then a warp sum (every lane gets it).
__device__ inline float dotRow(const float (&a)[kPerLane], const float *p, int64_t n) {
  int lane = threadIdx.x & 31;
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    int64_t d = lane + 32 * u;
    if (d < n) s += a[u] * p[d];
  }
  return warpSum(s);
}

__device__ inline void storeRow(float *p, int64_t n, const float (&r)[kPerLane], float f) {
  int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    int64_t d = lane + 32 * u;
    if (d < n) p[d] = r[u] * f;
  }
}

__device__ inline int64_t warpId() {
  return int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
}

__global__ void attentionForwardKernel(const float *q, const float *k, const float *v, float *o,
                                       float *lse, AttnShape a) {
  int64_t row = warpId();
  if (row >= a.B * a.Hq * a.T) return;
  int64_t i = row % a.T, bh = row / a.T, b = bh / a.Hq, h = bh % a.Hq;
  int64_t g = b * a.Hkv + h / a.group;
  const float *kg = k + g * a.S * a.D, *vg = v + g * a.S * a.Dv;
  int64_t first = firstKey(a, i), end = endKey(a, i);
  bool visible = first < end;
  float qi[kPerLane], acc[kPerLane] = {};
  loadRow(q + row * a.D, a.D, qi);
  float m = -INFINITY, l = 0.f;
  for (int64_t j = first; j < end; ++j) {
    float s = capScore(a, a.scale * dotRow(qi, kg + j * a.D, a.D));
    float mNew = fmaxf(m, s);
    float corr = expf(m - mNew), p = expf(s - mNew);
    l = l * corr + p;
    float vj[kPerLane];
    loadRow(vg + j * a.Dv, a.Dv, vj);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) acc[u] = acc[u] * corr + p * vj[u];
    m = mNew;
  }
  storeRow(o + row * a.Dv, a.Dv, acc, visible ? 1.f / l : 0.f);
  if ((threadIdx.x & 31) == 0) lse[row] = visible ? m + logf(l) : INFINITY;
}

__global__ void attentionGradQueryKernel(const float *q, const float *k, const float *v,
                                         const float *o, const float *lse, const float *dy,
                                         float *dq, float *delta, AttnShape a) {
  int64_t row = warpId();
  if (row >= a.B * a.Hq * a.T) return;
  int64_t i = row % a.T, bh = row / a.T, b = bh / a.Hq, h = bh % a.Hq;
  int64_t g = b * a.Hkv + h / a.group;
  const float *kg = k + g * a.S * a.D, *vg = v + g * a.S * a.Dv;
  float qi[kPerLane], dyi[kPerLane], acc[kPerLane] = {};
  loadRow(q + row * a.D, a.D, qi);
  loadRow(dy + row * a.Dv, a.Dv, dyi);
  float L = lse[row], dl = dotRow(dyi, o + row * a.Dv, a.Dv);
  for (int64_t j = firstKey(a, i); j < endKey(a, i); ++j) {
    const float *kj = kg + j * a.D;
    float s = capScore(a, a.scale * dotRow(qi, kj, a.D));
    float p = expf(s - L);
    float ds = p * (dotRow(dyi, vg + j * a.Dv, a.Dv) - dl) * capSlope(a, s);
    float kr[kPerLane];
    loadRow(kj, a.D, kr);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) acc[u] += ds * kr[u];
  }
  storeRow(dq + row * a.D, a.D, acc, a.scale);
  if ((threadIdx.x & 31) == 0) delta[row] = dl;
}

__global__ void attentionGradKeyKernel(const float *q, const float *k, const float *v,
                                       const float *dy, const float *lse, const float *delta,
                                       float *dk, float *dv, AttnShape a) {
  int64_t krow = warpId();
  if (krow >= a.B * a.Hkv * a.S) return;
  int64_t j = krow % a.S, bg = krow / a.S, b = bg / a.Hkv, g = bg % a.Hkv;
  float kj[kPerLane], vj[kPerLane], ak[kPerLane] = {}, av[kPerLane] = {};
  loadRow(k + krow * a.D, a.D, kj);
  loadRow(v + krow * a.Dv, a.Dv, vj);
  for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h)
    for (int64_t i = firstQuery(a, j); i < endQuery(a, j); ++i) {
      int64_t row = (b * a.Hq + h) * a.T + i;
      const float *qi = q + row * a.D, *dyi = dy + row * a.Dv;
      float s = capScore(a, a.scale * dotRow(kj, qi, a.D));
      float p = expf(s - lse[row]);
      float ds = p * (dotRow(vj, dyi, a.Dv) - delta[row]) * capSlope(a, s);
      float qr[kPerLane], dr[kPerLane];
      loadRow(qi, a.D, qr);
      loadRow(dyi, a.Dv, dr);
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        av[u] += p * dr[u];
        ak[u] += ds * qr[u];
      }
    }
  storeRow(dk + krow * a.D, a.D, ak, a.scale);
  storeRow(dv + krow * a.Dv, a.Dv, av, 1.f);
}

//===--- Chunked kernels (head dims <= 128) -------------------------------===//
//
// The same math, organised so that a warp handles 32 keys (or queries) at
// once with one lane per key, and a block of kRowsPerBlock warps shares
// every chunk it loads into shared memory:
//   forward / backward pass 1: a block is kRowsPerBlock consecutive query
//     rows of one (b, h); per 32-key chunk each lane scores its key against
//     the warp's query, the warp combines the 32 scores with two shuffle
//     reductions, and the output dims (owned by lanes) take the chunk's
//     weighted values through 32 broadcasts;
//   backward pass 2: a block is kRowsPerBlock consecutive key rows of one
//     (b, g); per 32-query chunk each lane takes one query.
// Shared rows are padded by one float so that lanes reading the same column
// of different rows hit different banks. Reduction orders are fixed, so
// results stay bitwise reproducible.

constexpr int kChunk = 32;
constexpr int kRowsPerBlock = 8;
constexpr int kChunkedMaxDim = 128;
constexpr int kChunkedPerLane = kChunkedMaxDim / 32;

/// Loads rows [r0, r0 + 32) (zeros past `rows`) of a [rows, n] tensor into a
/// shared [32, n + 1] tile, with every thread of the block.
__device__ inline void loadChunk(float *tile, const float *src, int64_t r0, int64_t rows,
                                 int64_t n) {
  for (int64_t idx = threadIdx.x; idx < kChunk * n; idx += blockDim.x) {
    int64_t r = idx / n, d = idx % n;
    tile[r * (n + 1) + d] = r0 + r < rows ? src[(r0 + r) * n + d] : 0.f;
  }
}

/// <a, b> over n values where a is a shared row read by every lane alike
/// (a broadcast) and b is this lane's own shared row.
__device__ inline float dotShared(const float *a, const float *b, int64_t n) {
  float s = 0.f;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

__global__ void attentionForwardChunked(const float *q, const float *k, const float *v, float *o,
                                        float *lse, AttnShape a) {
  extern __shared__ float smem[];
  float *Ks = smem, *Vs = Ks + kChunk * (a.D + 1), *Qs = Vs + kChunk * (a.Dv + 1);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t bh = blockIdx.x, b = bh / a.Hq, h = bh % a.Hq, g = b * a.Hkv + h / a.group;
  int64_t i0 = int64_t(blockIdx.y) * kRowsPerBlock, i = i0 + warp;
  bool active = i < a.T;
  const float *kg = k + g * a.S * a.D, *vg = v + g * a.S * a.Dv;
  float *qrow = Qs + warp * a.D;
  for (int64_t d = lane; d < a.D; d += 32) qrow[d] = active ? q[(bh * a.T + i) * a.D + d] : 0.f;
  int64_t first = firstKey(a, i), visible = !active ? 0 : endKey(a, i);
  int64_t last = min(a.T - 1, i0 + kRowsPerBlock - 1);
  int64_t blockVisible = endKey(a, last);
  float m = -INFINITY, l = 0.f, acc[kChunkedPerLane] = {};
  // The block's first row sees the earliest keys (windows only move right).
  for (int64_t j0 = firstKey(a, i0) / kChunk * kChunk; j0 < blockVisible; j0 += kChunk) {
    __syncthreads(); // the previous chunk is no longer read
    loadChunk(Ks, kg, j0, a.S, a.D);
    loadChunk(Vs, vg, j0, a.S, a.Dv);
    __syncthreads();
    int64_t j = j0 + lane;
    bool vis = j >= first && j < visible;
    float s = vis ? capScore(a, a.scale * dotShared(qrow, Ks + lane * (a.D + 1), a.D)) : -INFINITY;
    float cmax = warpMax(s);
    if (cmax == -INFINITY) continue; // no visible key here (the same for all lanes)
    float mNew = fmaxf(m, cmax), corr = expf(m - mNew);
    float p = vis ? expf(s - mNew) : 0.f;
    l = l * corr + warpSum(p);
#pragma unroll
    for (int u = 0; u < kChunkedPerLane; ++u) acc[u] *= corr;
    for (int jj = 0; jj < kChunk; ++jj) {
      float pj = __shfl_sync(0xffffffffu, p, jj);
      if (pj == 0.f) continue;
      const float *vrow = Vs + jj * (a.Dv + 1);
#pragma unroll
      for (int u = 0; u < kChunkedPerLane; ++u) {
        int64_t d = lane + 32 * u;
        if (d < a.Dv) acc[u] += pj * vrow[d];
      }
    }
    m = mNew;
  }
  if (!active) return;
  bool any = first < visible;
  float inv = any ? 1.f / l : 0.f;
#pragma unroll
  for (int u = 0; u < kChunkedPerLane; ++u) {
    int64_t d = lane + 32 * u;
    if (d < a.Dv) o[(bh * a.T + i) * a.Dv + d] = acc[u] * inv;
  }
  if (lane == 0) lse[bh * a.T + i] = any ? m + logf(l) : INFINITY;
}

// Backward pass 1 over query rows: delta_i = <dy_i, o_i> from the
// forward's output, then one sweep over the key chunks sums dq_i with
// P_ij = exp(s_ij - lse_i) from the forward's lse.
__global__ void attentionGradQueryChunked(const float *q, const float *k, const float *v,
                                          const float *o, const float *lse, const float *dy,
                                          float *dq, float *delta, AttnShape a) {
  extern __shared__ float smem[];
  float *Ks = smem, *Vs = Ks + kChunk * (a.D + 1), *Qs = Vs + kChunk * (a.Dv + 1);
  float *Ds = Qs + kRowsPerBlock * a.D;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t bh = blockIdx.x, b = bh / a.Hq, h = bh % a.Hq, g = b * a.Hkv + h / a.group;
  int64_t i0 = int64_t(blockIdx.y) * kRowsPerBlock, i = i0 + warp, row = bh * a.T + i;
  bool active = i < a.T;
  const float *kg = k + g * a.S * a.D, *vg = v + g * a.S * a.Dv;
  float *qrow = Qs + warp * a.D, *dyrow = Ds + warp * a.Dv;
  for (int64_t d = lane; d < a.D; d += 32) qrow[d] = active ? q[row * a.D + d] : 0.f;
  float dot = 0.f;
  for (int64_t d = lane; d < a.Dv; d += 32) {
    float gy = active ? dy[row * a.Dv + d] : 0.f;
    dyrow[d] = gy;
    if (active) dot += gy * o[row * a.Dv + d];
  }
  float dl = warpSum(dot), L = active ? lse[row] : 0.f;
  int64_t first = firstKey(a, i), visible = !active ? 0 : endKey(a, i);
  int64_t last = min(a.T - 1, i0 + kRowsPerBlock - 1);
  int64_t blockVisible = endKey(a, last);
  float acc[kChunkedPerLane] = {};
  for (int64_t j0 = firstKey(a, i0) / kChunk * kChunk; j0 < blockVisible; j0 += kChunk) {
    __syncthreads();
    loadChunk(Ks, kg, j0, a.S, a.D);
    loadChunk(Vs, vg, j0, a.S, a.Dv);
    __syncthreads();
    int64_t j = j0 + lane;
    bool vis = j >= first && j < visible;
    float ds = 0.f;
    if (vis) {
      float s = capScore(a, a.scale * dotShared(qrow, Ks + lane * (a.D + 1), a.D));
      float p = expf(s - L);
      ds = p * (dotShared(dyrow, Vs + lane * (a.Dv + 1), a.Dv) - dl) * capSlope(a, s);
    }
    for (int jj = 0; jj < kChunk; ++jj) {
      float dsj = __shfl_sync(0xffffffffu, ds, jj);
      if (dsj == 0.f) continue;
      const float *krow = Ks + jj * (a.D + 1);
#pragma unroll
      for (int u = 0; u < kChunkedPerLane; ++u) {
        int64_t d = lane + 32 * u;
        if (d < a.D) acc[u] += dsj * krow[d];
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int u = 0; u < kChunkedPerLane; ++u) {
    int64_t d = lane + 32 * u;
    if (d < a.D) dq[row * a.D + d] = acc[u] * a.scale;
  }
  if (lane == 0) delta[row] = dl;
}

// Backward pass 2 over key rows: per chunk of 32 queries of each head in
// the kv head's group, lane = query:
//   p = exp(scale <q_i, k_j> - lse_i),  ds = p (<dy_i, v_j> - delta_i)
//   dv_j += p dy_i,  dk_j += ds q_i   (dk scaled at the end)
__global__ void attentionGradKeyChunked(const float *q, const float *k, const float *v,
                                        const float *dy, const float *lse, const float *delta,
                                        float *dk, float *dv, AttnShape a) {
  extern __shared__ float smem[];
  float *Qs = smem, *Ds = Qs + kChunk * (a.D + 1), *Ks = Ds + kChunk * (a.Dv + 1);
  float *Vs = Ks + kRowsPerBlock * a.D;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t bg = blockIdx.x, b = bg / a.Hkv, g = bg % a.Hkv;
  int64_t j0row = int64_t(blockIdx.y) * kRowsPerBlock, j = j0row + warp, krow = bg * a.S + j;
  bool active = j < a.S;
  float *kr = Ks + warp * a.D, *vr = Vs + warp * a.Dv;
  for (int64_t d = lane; d < a.D; d += 32) kr[d] = active ? k[krow * a.D + d] : 0.f;
  for (int64_t d = lane; d < a.Dv; d += 32) vr[d] = active ? v[krow * a.Dv + d] : 0.f;
  // Query i sees key j when i >= j - offset (causal) and, with a window,
  // i < j - offset + window.
  int64_t iFirst = firstQuery(a, j), iEnd = endQuery(a, j);
  int64_t blockFirst = firstQuery(a, j0row);
  int64_t blockEnd = endQuery(a, min(a.S - 1, j0row + kRowsPerBlock - 1));
  float ak[kChunkedPerLane] = {}, av[kChunkedPerLane] = {};
  for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
    int64_t bh = b * a.Hq + h;
    const float *qh = q + bh * a.T * a.D, *dyh = dy + bh * a.T * a.Dv;
    for (int64_t i0 = blockFirst; i0 < blockEnd; i0 += kChunk) {
      __syncthreads();
      loadChunk(Qs, qh, i0, a.T, a.D);
      loadChunk(Ds, dyh, i0, a.T, a.Dv);
      __syncthreads();
      int64_t i = i0 + lane;
      bool vis = active && i < a.T && i >= iFirst && i < iEnd;
      float p = 0.f, ds = 0.f;
      if (vis) {
        int64_t row = bh * a.T + i;
        float s = capScore(a, a.scale * dotShared(kr, Qs + lane * (a.D + 1), a.D));
        p = expf(s - lse[row]);
        ds = p * (dotShared(vr, Ds + lane * (a.Dv + 1), a.Dv) - delta[row]) * capSlope(a, s);
      }
      for (int ii = 0; ii < kChunk; ++ii) {
        float pi = __shfl_sync(0xffffffffu, p, ii), dsi = __shfl_sync(0xffffffffu, ds, ii);
        if (pi == 0.f && dsi == 0.f) continue;
        const float *qrow = Qs + ii * (a.D + 1), *drow = Ds + ii * (a.Dv + 1);
#pragma unroll
        for (int u = 0; u < kChunkedPerLane; ++u) {
          int64_t d = lane + 32 * u;
          if (d < a.Dv) av[u] += pi * drow[d];
          if (d < a.D) ak[u] += dsi * qrow[d];
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int u = 0; u < kChunkedPerLane; ++u) {
    int64_t d = lane + 32 * u;
    if (d < a.D) dk[krow * a.D + d] = ak[u] * a.scale;
    if (d < a.Dv) dv[krow * a.Dv + d] = av[u];
  }
}

bool chunked(const AttnShape &a) { return a.D <= kChunkedMaxDim && a.Dv <= kChunkedMaxDim; }

size_t chunkSmem(int64_t rowsA, int64_t nA, int64_t rowsB, int64_t nB, int64_t extra) {
  return size_t(rowsA * (nA + 1) + rowsB * (nB + 1) + extra) * sizeof(float);
}

//===--- Through cuBLASLt (the default when the scores fit) ---------------===//
//
// The queries of the G = Hq / Hkv heads that share kv head g are G T
// consecutive rows of q ([B, Hq, T, D] with h = g G + r), so per (b, g) —
// one strided batch of B Hkv — attention is plain matrix products over the
// score matrix S = Q K^T of [G T, S] rows, materialized in scratch:
//   forward:  S = Q K^T;  P = softmax(scale S) (masked), lse per row;  O = P V
//   backward: S = Q K^T;  P = exp(scale S - lse) (masked; the forward's lse);
//             dP = dY V^T;  dS = P (dP - delta), delta = rowsum(dY O);
//             dV = P^T dY;  dQ = scale dS K;  dK = scale dS^T Q
// The GQA sums over a group's heads fall out of the K = G T dimension of
// dV and dK. The products are exact fp32, or bf16 tensor-core products when
// the instruction says its operands are bf16 values (autocast). The products run at GEMM speed at the price of S (and dP) in
// memory and of computing the masked half; rows are softmaxed in place.

/// Which of loom's implementations an attention instruction takes, when
/// cuDNN's fused engines do not run it (CudnnAttentionLaunch.cu: the
/// default for autocast's causal attention): LOOM_CUDA_ATTENTION
/// = flash | gemm | chunked | plain forces one (tests use it to cover all
/// of them; flash only applies where it can). By default: the tiled
/// tensor-core kernels (FlashAttention.cu) for bf16 operands of head dim
/// 64; GEMMs when the score matrices fit in kGemmScoreBytes; the chunked
/// kernels otherwise (plain ones past head dim 128).
enum class AttnPath { Flash, Gemm, Chunked, Plain };
constexpr uint64_t kGemmScoreBytes = uint64_t(8) << 30;

uint64_t scoreBytes(const AttnShape &a) { return uint64_t(a.B * a.Hq * a.T * a.S) * sizeof(float); }

bool flashFits(const AttnShape &a) {
  return a.bf16Operands && a.D == kFlashHeadDim && a.Dv == kFlashHeadDim && a.window == 0 &&
         a.softcap == 0.f;
}

AttnPath attnPathOf(const AttnShape &a, OpCode op) {
  bool fitsChunked = a.D <= kChunkedMaxDim && a.Dv <= kChunkedMaxDim;
  const char *force = std::getenv("LOOM_CUDA_ATTENTION");
  std::string f = force ? force : "";
  bool gemmOk = a.B * a.Hq * a.T > 0 && a.S > 0 && a.D > 0 && a.Dv > 0;
  if (f == "plain" || (f == "chunked" && !fitsChunked)) return AttnPath::Plain;
  if (f == "chunked") return AttnPath::Chunked;
  if (f != "gemm" && flashFits(a)) return AttnPath::Flash;
  uint64_t need = scoreBytes(a) * (op == OpCode::AttentionGrad ? 2 : 1);
  if (gemmOk && (f == "gemm" || need <= kGemmScoreBytes)) return AttnPath::Gemm;
  return fitsChunked ? AttnPath::Chunked : AttnPath::Plain;
}

AttnPath attnPath(const Program &p, const Instr &I) { return attnPathOf(attnShapeOf(p, I), I.op); }
AttnPath attnPathOfCall(const CudaCall &c) { return attnPathOf(attnShape(c), c.instr->op); }

FlashShape flashShape(const AttnShape &a) {
  return FlashShape{a.B, a.Hq, a.Hkv, a.T, a.S, a.group, a.offset, a.causal, a.scale};
}

/// The flash kernels load rows 16 bytes at a time (float4, cp.async): every
/// operand must be 16-byte aligned (arena buffers are; attentionScratchBytes
/// reads the same from the buffer offsets).
bool flashAligned(const CudaCall &c) {
  for (const auto *list : {&c.in, &c.out})
    for (const DevTensor &t : *list)
      if (reinterpret_cast<uintptr_t>(t.data) % 16) return false;
  return true;
}

/// flashScratchBytes' mask: bit k for a bf16 input k.
unsigned bf16Inputs(const Program &p, const Instr &I) {
  unsigned mask = 0;
  for (size_t k = 0; k < I.in.size(); ++k)
    if (p.buffers[I.in[k]].dtype == DType::BF16) mask |= 1u << k;
  return mask;
}

//===--- bf16 storage on the f32 implementations --------------------------===//

/// Scratch an f32 implementation uses from offset 0: the score matrices
/// (GEMMs) or the backward's delta per query row (chunked and plain
/// kernels; lse is the forward's).
size_t f32ScratchBytes(const AttnShape &a, OpCode op, bool gemm) {
  bool grad = op == OpCode::AttentionGrad;
  if (gemm) return size_t(scoreBytes(a)) * (grad ? 2 : 1) + 256;
  return grad ? size_t(a.B * a.Hq * a.T) * sizeof(float) + 256 : 0;
}

/// Bytes of the f32 copies of `I`'s bf16 operands, 256-byte aligned each.
size_t stagingBytes(const Program &p, const Instr &I) {
  size_t bytes = 0;
  for (const auto *ids : {&I.in, &I.out})
    for (uint32_t id : *ids)
      if (p.buffers[id].dtype == DType::BF16)
        bytes += align256(size_t(p.buffers[id].numElements()) * sizeof(float));
  return bytes;
}

/// An attention call whose bf16 operands an f32 implementation sees as f32
/// copies in scratch, from byte `offset` on (past the implementation's own
/// scratch): the constructor widens the bf16 inputs into theirs, narrow()
/// rounds the f32 results into the bf16 outputs. Both go through the Cast
/// kernel, so the rounding is Cast's. A call without bf16 operands passes
/// through unchanged.
class F32Staging {
public:
  F32Staging(const CudaCall &c, CudaContext &ctx, size_t offset) : call_(c) {
    char *at = static_cast<char *>(ctx.scratch) + offset;
    auto retype = [&](DevTensor &t, bool output) {
      if (t.dtype() != DType::BF16) return;
      BufferDesc &d = descs_.emplace_back(*t.desc);
      d.dtype = DType::F32;
      d.bytes = uint64_t(d.numElements()) * sizeof(float);
      DevTensor f32{at, &d};
      at += align256(d.bytes);
      if (output) narrow_.push_back({f32, t});
      else castTensor(t, f32, ctx);
      t = f32;
    };
    for (DevTensor &t : call_.in) retype(t, false);
    for (DevTensor &t : call_.out) retype(t, true);
  }
  F32Staging(const F32Staging &) = delete;
  F32Staging &operator=(const F32Staging &) = delete;

  const CudaCall &call() const { return call_; }

  void narrow(CudaContext &ctx) const {
    for (const auto &[f32, bf16] : narrow_) castTensor(f32, bf16, ctx);
  }

private:
  CudaCall call_;
  std::deque<BufferDesc> descs_; // the copies' descriptions (stable addresses)
  std::vector<std::pair<DevTensor, DevTensor>> narrow_; // f32 copy -> bf16 output
};

// P = softmax over the visible keys of scale * S, in place; masked keys get
// 0. Row r of the [B Hkv, G T, S] scores is query t = r % T, and r is also
// the query's row of q ([B, Hq, T] with h = g G + r / T % G), where its
// logsumexp goes (+inf for a row with no visible key).
// With a window, the row sees [firstKey, endKey); with a softcap each score
// is capped first (capScore).
__global__ void scoresToProbsKernel(float *scores, float *lse, AttnShape a) {
  __shared__ float red[32];
  int64_t r = blockIdx.x, t = r % a.T, S = a.S;
  float *row = scores + r * S;
  int64_t first = firstKey(a, t), visible = endKey(a, t);
  bool any = first < visible;
  float mx = -INFINITY;
  for (int64_t j = first + threadIdx.x; j < visible; j += blockDim.x)
    mx = fmaxf(mx, capScore(a, a.scale * row[j]));
  mx = blockMax(mx, red);
  float sum = 0.f;
  for (int64_t j = first + threadIdx.x; j < visible; j += blockDim.x)
    sum += expf(capScore(a, a.scale * row[j]) - mx);
  sum = blockSum(sum, red);
  float inv = any ? 1.f / sum : 0.f;
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x)
    row[j] = j >= first && j < visible ? expf(capScore(a, a.scale * row[j]) - mx) * inv : 0.f;
  if (threadIdx.x == 0) lse[r] = any ? mx + logf(sum) : INFINITY;
}

// The backward's P from the forward's logsumexp, in place over the scores:
// P = exp(scale S - lse) on visible keys, 0 on masked ones.
__global__ void probsFromLseKernel(float *scores, const float *lse, AttnShape a) {
  int64_t r = blockIdx.x, t = r % a.T, S = a.S;
  float *row = scores + r * S;
  int64_t first = firstKey(a, t), visible = endKey(a, t);
  float L = lse[r];
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x)
    row[j] = j >= first && j < visible ? expf(capScore(a, a.scale * row[j]) - L) : 0.f;
}

// dS = P (dP - delta), delta = <dy, o> per row (the forward's output; equal
// to sum_j P_j dP_j); written over dP. With a softcap c, dS also takes the
// cap's slope 1 - (s / c)^2 at the capped score s = log P + lse (where P is
// 0, so is dS).
__global__ void probsGradKernel(const float *probs, float *dP, int64_t S, const float *o,
                                const float *dy, int64_t Dv, const float *lse, AttnShape a) {
  __shared__ float red[32];
  int64_t r = blockIdx.x;
  const float *p = probs + r * S;
  float *d = dP + r * S;
  float dot = 0.f;
  for (int64_t e = threadIdx.x; e < Dv; e += blockDim.x) dot += dy[r * Dv + e] * o[r * Dv + e];
  dot = blockSum(dot, red);
  float L = lse[r];
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
    float ds = p[j] * (d[j] - dot);
    if (a.softcap > 0.f && p[j] > 0.f) ds *= capSlope(a, logf(p[j]) + L);
    d[j] = ds;
  }
}

/// A strided-batched product over the B Hkv (b, g) groups.
GemmSpec groupGemm(const AttnShape &a, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                   int64_t lda, int64_t ldb, int64_t sa, int64_t sb, uint32_t alA, uint32_t alB,
                   uint32_t alC) {
  GemmSpec g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.transA = ta;
  g.transB = tb;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = n;
  g.batch = a.B * a.Hkv;
  g.strideA = sa;
  g.strideB = sb;
  g.strideC = m * n;
  g.alignA = std::min(alA, alignmentOf(uint64_t(sa) * 4));
  g.alignB = std::min(alB, alignmentOf(uint64_t(sb) * 4));
  g.alignC = std::min(alC, alignmentOf(uint64_t(m * n) * 4));
  // Under autocast q, k, v (and dy) are bf16 values: the products may run on
  // bf16 tensor cores; P, dP and dS are then rounded to bf16 as operands,
  // as FlashAttention does.
  g.fastBf16 = a.bf16Operands;
  return g;
}

unsigned warpsGrid(int64_t warps) {
  return unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

//===--- Tokens-major operands -------------------------------------------===//

/// Whether operand `b` of an attention instruction of layout `l` has a
/// heads-major copy: every rank-4 one (all but lse, [B, Hq, T] in both
/// layouts) of a tokens-major instruction.
bool copiedToHeadsMajor(const BufferDesc &b, AttentionLayout l) {
  return l == AttentionLayout::TokensMajor && b.shape.size() == 4;
}

/// Bytes of the heads-major copies of `I`'s operands, 256-byte aligned each.
size_t headsMajorCopyBytes(const Program &p, const Instr &I) {
  size_t bytes = 0;
  for (const auto *ids : {&I.in, &I.out})
    for (uint32_t id : *ids)
      if (copiedToHeadsMajor(p.buffers[id], attentionLayout(I)))
        bytes += align256(p.buffers[id].bytes);
  return bytes;
}

/// to = from with dims 1 and 2 swapped ([B, X, Y, D] -> [B, Y, X, D]), by
/// Transpose's kernels (whole rows of D move as packs).
void swapDims12(const DevTensor &from, const DevTensor &to, CudaContext &ctx) {
  static const Instr swap = [] {
    Instr I;
    I.op = OpCode::Transpose;
    I.ints = {0, 2, 1, 3};
    return I;
  }();
  CudaCall t;
  t.instr = &swap;
  t.in = {from};
  t.out = {to};
  launchTranspose(t, ctx);
}

/// A tokens-major attention call as the kernels here read it: the
/// constructor transposes its q, k, v (and o, dy) into heads-major copies at
/// the start of scratch, call() points at those copies and at heads-major
/// copies of its o (or dq, dk, dv), and writeBack() transposes those into
/// the instruction's buffers. context() is the launch's context with scratch
/// past the copies. A heads-major call passes through unchanged.
class HeadsMajorCall {
public:
  HeadsMajorCall(const CudaCall &c, CudaContext &ctx) : call_(c), ctx_(ctx) {
    AttentionLayout layout = attentionLayout(*c.instr);
    char *at = static_cast<char *>(ctx.scratch);
    auto copy = [&](DevTensor &t, bool output) {
      if (!copiedToHeadsMajor(*t.desc, layout)) return;
      BufferDesc &d = descs_.emplace_back(*t.desc);
      d.shape = headsMajorDims(d.shape, layout);
      DevTensor headsMajor{at, &d};
      at += align256(d.bytes);
      if (output) writeBack_.push_back({headsMajor, t});
      else swapDims12(t, headsMajor, ctx);
      t = headsMajor;
    };
    for (DevTensor &t : call_.in) copy(t, false);
    for (DevTensor &t : call_.out) copy(t, true);
    ctx_.scratchBytes -= size_t(at - static_cast<char *>(ctx.scratch));
    ctx_.scratch = at;
  }
  HeadsMajorCall(const HeadsMajorCall &) = delete;
  HeadsMajorCall &operator=(const HeadsMajorCall &) = delete;

  const CudaCall &call() const { return call_; }
  CudaContext &context() { return ctx_; }

  void writeBack(CudaContext &ctx) const {
    for (const auto &[headsMajor, out] : writeBack_) swapDims12(headsMajor, out, ctx);
  }

private:
  CudaCall call_;
  CudaContext ctx_;
  std::deque<BufferDesc> descs_; // the copies' descriptions (stable addresses)
  std::vector<std::pair<DevTensor, DevTensor>> writeBack_; // heads-major copy -> output
};

} // namespace

bool planAttentionGemms(const Program &p, int index, GemmCache &gemms, std::vector<int> &ids,
                        std::string &err) {
  const Instr &I = p.instrs[size_t(index)];
  ids.clear();
  if ((I.op != OpCode::Attention && I.op != OpCode::AttentionGrad) || attnPath(p, I) != AttnPath::Gemm)
    return true;
  AttnShape a = attnShapeOf(p, I);
  int64_t GT = a.group * a.T;
  // A bf16 operand is staged through f32 scratch, 256-byte aligned (F32Staging).
  auto al = [&](uint32_t id) {
    return p.buffers[id].dtype == DType::BF16 ? 256u : alignmentOf(p.buffers[id].offset);
  };
  uint32_t q = al(I.in[0]), k = al(I.in[1]), v = al(I.in[2]), scratch = 256;
  uint32_t dP = alignmentOf(scoreBytes(a)); // the second score buffer's offset
  std::vector<GemmSpec> specs;
  // S = Q K^T: [GT, D] x [S, D]^T
  specs.push_back(groupGemm(a, GT, a.S, a.D, false, true, a.D, a.D, GT * a.D, a.S * a.D, q, k, scratch));
  if (I.op == OpCode::Attention) {
    // O = P V: [GT, S] x [S, Dv]
    specs.push_back(groupGemm(a, GT, a.Dv, a.S, false, false, a.S, a.Dv, GT * a.S, a.S * a.Dv,
                              scratch, v, al(I.out[0])));
  } else {
    uint32_t dy = al(I.in[5]);
    // dP = dY V^T: [GT, Dv] x [S, Dv]^T
    specs.push_back(groupGemm(a, GT, a.S, a.Dv, false, true, a.Dv, a.Dv, GT * a.Dv, a.S * a.Dv, dy, v, dP));
    // dV = P^T dY: [GT, S]^T x [GT, Dv]
    specs.push_back(groupGemm(a, a.S, a.Dv, GT, true, false, a.S, a.Dv, GT * a.S, GT * a.Dv,
                              scratch, dy, al(I.out[2])));
    // dQ = scale dS K: [GT, S] x [S, D]
    specs.push_back(groupGemm(a, GT, a.D, a.S, false, false, a.S, a.D, GT * a.S, a.S * a.D, dP, k,
                              al(I.out[0])));
    // dK = scale dS^T Q: [GT, S]^T x [GT, D]
    specs.push_back(groupGemm(a, a.S, a.D, GT, true, false, a.S, a.D, GT * a.S, GT * a.D, dP, q,
                              al(I.out[1])));
  }
  for (const GemmSpec &g : specs) {
    int id = gemms.plan(g, err);
    if (id < 0) return false;
    ids.push_back(id);
  }
  return true;
}

size_t attentionScratchBytes(const Program &p, const Instr &I) {
  if (I.op != OpCode::Attention && I.op != OpCode::AttentionGrad)
    return 0;
  AttnShape a = attnShapeOf(p, I);
  AttnPath path = attnPath(p, I);
  // The heads-major copies of a tokens-major instruction's operands, then
  // the kernels' own scratch.
  size_t copies = headsMajorCopyBytes(p, I);
  // The f32 implementation's scratch, then the f32 copies of bf16 operands.
  size_t f32 = align256(f32ScratchBytes(a, I.op, path == AttnPath::Gemm)) + stagingBytes(p, I);
  if (path != AttnPath::Flash)
    return copies + f32;
  size_t flash =
      flashScratchBytes(flashShape(a), I.op == OpCode::AttentionGrad, bf16Inputs(p, I)) + 256;
  // Operands flashAligned refuses take the f32 kernels, staged. The
  // executor's blocks are 256-byte aligned, so the offsets tell (heads-major
  // copies are aligned wherever their operand is); the staged copies are
  // only reserved where they can be used (on a large model they would be
  // several times the flash kernels' scratch).
  bool aligned = true;
  AttentionLayout layout = attentionLayout(I);
  for (const auto *ids : {&I.in, &I.out})
    for (uint32_t id : *ids) {
      const BufferDesc &b = p.buffers[id];
      aligned = aligned && (copiedToHeadsMajor(b, layout) || b.offset % 16 == 0);
    }
  return copies + (aligned ? flash : std::max(flash, f32));
}

namespace {

/// The instruction's planned GEMMs, or null when it takes the kernels.
const std::vector<int> *gemmIdsOf(const CudaCall &c, CudaContext &ctx) {
  if (!ctx.subGemms || size_t(c.index) >= ctx.subGemms->size()) return nullptr;
  const std::vector<int> &ids = (*ctx.subGemms)[size_t(c.index)];
  return ids.empty() ? nullptr : &ids;
}

/// The f32 implementations (GEMMs, chunked, plain) of the forward.
void attentionF32(const CudaCall &c, CudaContext &ctx, const AttnShape &a) {
  int64_t rows = a.B * a.Hq * a.T;
  float *lse = c.out[1].as<float>();
  if (const std::vector<int> *ids = gemmIdsOf(c, ctx)) {
    auto *scores = static_cast<float *>(ctx.scratch);
    ctx.gemms->run((*ids)[0], c.in[0].data, c.in[1].data, scores, 1.f, ctx, ctx.workspace);
    scoresToProbsKernel<<<unsigned(rows), 128, 0, ctx.stream>>>(scores, lse, a);
    ctx.gemms->run((*ids)[1], scores, c.in[2].data, c.out[0].data, 1.f, ctx, ctx.workspace);
    return;
  }
  if (chunked(a)) {
    dim3 grid{unsigned(a.B * a.Hq), unsigned((a.T + kRowsPerBlock - 1) / kRowsPerBlock)};
    size_t smem = chunkSmem(kChunk, a.D, kChunk, a.Dv, kRowsPerBlock * a.D);
    attentionForwardChunked<<<grid, 32 * kRowsPerBlock, smem, ctx.stream>>>(
        c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.out[0].as<float>(), lse,
        a);
    return;
  }
  attentionForwardKernel<<<warpsGrid(rows), 32 * kWarpsPerBlock, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.out[0].as<float>(), lse, a);
}

/// The f32 implementations of the backward. Each takes P from the
/// forward's lse and delta from its o; the kernels keep delta at offset 0
/// of scratch for their second pass.
void attentionGradF32(const CudaCall &c, CudaContext &ctx, const AttnShape &a) {
  int64_t rows = a.B * a.Hq * a.T, krows = a.B * a.Hkv * a.S;
  const float *o = c.in[3].as<float>(), *lse = c.in[4].as<float>();
  if (const std::vector<int> *ids = gemmIdsOf(c, ctx)) {
    auto *probs = static_cast<float *>(ctx.scratch);
    float *dP = probs + rows * a.S;
    const void *q = c.in[0].data, *k = c.in[1].data, *v = c.in[2].data, *dy = c.in[5].data;
    ctx.gemms->run((*ids)[0], q, k, probs, 1.f, ctx, ctx.workspace);
    probsFromLseKernel<<<unsigned(rows), 128, 0, ctx.stream>>>(probs, lse, a);
    ctx.gemms->run((*ids)[1], dy, v, dP, 1.f, ctx, ctx.workspace);
    probsGradKernel<<<unsigned(rows), 128, 0, ctx.stream>>>(probs, dP, a.S, o,
                                                             c.in[5].as<float>(), a.Dv, lse, a);
    ctx.gemms->run((*ids)[2], probs, dy, c.out[2].data, 1.f, ctx, ctx.workspace);
    ctx.gemms->run((*ids)[3], dP, k, c.out[0].data, a.scale, ctx, ctx.workspace);
    ctx.gemms->run((*ids)[4], dP, q, c.out[1].data, a.scale, ctx, ctx.workspace);
    return;
  }
  auto *delta = static_cast<float *>(ctx.scratch);
  const float *q = c.in[0].as<float>(), *k = c.in[1].as<float>(), *v = c.in[2].as<float>();
  const float *dy = c.in[5].as<float>();
  if (chunked(a)) {
    if (rows > 0) {
      dim3 grid{unsigned(a.B * a.Hq), unsigned((a.T + kRowsPerBlock - 1) / kRowsPerBlock)};
      size_t smem = chunkSmem(kChunk, a.D, kChunk, a.Dv, kRowsPerBlock * (a.D + a.Dv));
      attentionGradQueryChunked<<<grid, 32 * kRowsPerBlock, smem, ctx.stream>>>(
          q, k, v, o, lse, dy, c.out[0].as<float>(), delta, a);
    }
    if (krows > 0) {
      dim3 grid{unsigned(a.B * a.Hkv), unsigned((a.S + kRowsPerBlock - 1) / kRowsPerBlock)};
      size_t smem = chunkSmem(kChunk, a.D, kChunk, a.Dv, kRowsPerBlock * (a.D + a.Dv));
      attentionGradKeyChunked<<<grid, 32 * kRowsPerBlock, smem, ctx.stream>>>(
          q, k, v, dy, lse, delta, c.out[1].as<float>(), c.out[2].as<float>(), a);
    }
    return;
  }
  if (rows > 0)
    attentionGradQueryKernel<<<warpsGrid(rows), 32 * kWarpsPerBlock, 0, ctx.stream>>>(
        q, k, v, o, lse, dy, c.out[0].as<float>(), delta, a);
  if (krows > 0)
    attentionGradKeyKernel<<<warpsGrid(krows), 32 * kWarpsPerBlock, 0, ctx.stream>>>(
        q, k, v, dy, lse, delta, c.out[1].as<float>(), c.out[2].as<float>(), a);
}

/// Where an f32 implementation's staged copies start (attentionScratchBytes).
size_t stagingOffset(const CudaCall &c, CudaContext &ctx, const AttnShape &a) {
  return align256(f32ScratchBytes(a, c.instr->op, gemmIdsOf(c, ctx) != nullptr));
}

/// The forward of a heads-major call on loom's kernels.
void attentionHeadsMajor(const CudaCall &c, CudaContext &ctx) {
  AttnShape a = attnShape(c);
  if (a.B * a.Hq * a.T == 0) return;
  if (flashFits(a) && attnPathOfCall(c) == AttnPath::Flash && flashAligned(c)) {
    launchFlashForward(flashShape(a), floatIn(c.in[0]), floatIn(c.in[1]), floatIn(c.in[2]),
                       floatOut(c.out[0]), c.out[1].as<float>(), ctx.scratch, ctx.stream);
    return;
  }
  F32Staging staged(c, ctx, stagingOffset(c, ctx, a));
  attentionF32(staged.call(), ctx, a);
  staged.narrow(ctx);
}

/// The backward of a heads-major call on loom's kernels.
void attentionGradHeadsMajor(const CudaCall &c, CudaContext &ctx) {
  AttnShape a = attnShape(c);
  if (flashFits(a) && attnPathOfCall(c) == AttnPath::Flash && flashAligned(c)) {
    launchFlashBackward(flashShape(a), floatIn(c.in[0]), floatIn(c.in[1]), floatIn(c.in[2]),
                        floatIn(c.in[3]), c.in[4].as<float>(), floatIn(c.in[5]),
                        floatOut(c.out[0]), floatOut(c.out[1]), floatOut(c.out[2]), ctx.scratch,
                        ctx.stream);
    return;
  }
  F32Staging staged(c, ctx, stagingOffset(c, ctx, a));
  attentionGradF32(staged.call(), ctx, a);
  staged.narrow(ctx);
}

} // namespace

void launchAttention(const CudaCall &c, CudaContext &ctx) {
  if (launchCudnnAttention(c, ctx)) // planned on cuDNN's fused engines (CudnnAttentionLaunch.cu)
    return;
  HeadsMajorCall headsMajor(c, ctx);
  attentionHeadsMajor(headsMajor.call(), headsMajor.context());
  headsMajor.writeBack(ctx);
}

void launchAttentionGrad(const CudaCall &c, CudaContext &ctx) {
  if (launchCudnnAttention(c, ctx))
    return;
  HeadsMajorCall headsMajor(c, ctx);
  attentionGradHeadsMajor(headsMajor.call(), headsMajor.context());
  headsMajor.writeBack(ctx);
}

} // namespace loom::rt::cuda
