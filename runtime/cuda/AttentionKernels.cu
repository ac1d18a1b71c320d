//===- AttentionKernels.cu - Causal grouped-query attention, fwd and bwd --===//
//
// Part of loom, under the Apache License v2.0.
//
// q[B, Hq, T, D], k[B, Hkv, S, D], v[B, Hkv, S, Dv]; query head h reads kv
// head g = h / (Hq / Hkv); key j is visible to query i unless causal and
// j > i + max(S - T, 0). Same math as cpu/AttentionKernel.cpp and the
// AttentionGrad kernel in cpu/TrainingKernels.cpp.
//
// These are the reference-quality kernels: one warp per query row (forward,
// backward pass 1) or per key row (backward pass 2), the lanes splitting the
// head dim (D, Dv <= 256, 8 values per lane). The forward uses the online
// softmax: with running max m, normalizer l and accumulator a,
//   m' = max(m, s_j);  c = exp(m - m');  l' = l c + exp(s_j - m');
//   a' = a c + exp(s_j - m') v_j;        o = a / l at the end.
// The backward, as on the CPU, owns its outputs instead of adding into them:
//   pass 1 (query rows): lse_i = logsumexp_j s_ij, delta_i = sum_j P_ij dP_ij,
//           dq_i = scale sum_j P_ij (dP_ij - delta_i) k_j
//   pass 2 (key rows):   dv_j = sum_{h in group, i} P_ij dy_i,
//                        dk_j = scale sum_{h in group, i} P_ij (dP_ij - delta_i) q_i
// with P_ij = exp(s_ij - lse_i) and dP_ij = <dy_i, v_j>. They are exact and
// deterministic but read K and V once per query row: a tiled (flash)
// kernel is what long sequences need.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"

namespace loom::rt::cuda {
namespace {

constexpr int kPerLane = 8; // head dims up to 32 * 8
constexpr int kWarpsPerBlock = 4;

struct AttnShape {
  int64_t B, Hq, Hkv, T, S, D, Dv, group, offset;
  bool causal;
  float scale;
};

AttnShape attnShape(const CudaCall &c) {
  const Shape &qs = c.in[0].shape(), &ks = c.in[1].shape(), &vs = c.in[2].shape();
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
  a.causal = c.instr->ints[0] != 0;
  a.scale = float(c.instr->floats[0]);
  return a;
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
                                       AttnShape a) {
  int64_t row = warpId();
  if (row >= a.B * a.Hq * a.T) return;
  int64_t i = row % a.T, bh = row / a.T, b = bh / a.Hq, h = bh % a.Hq;
  int64_t g = b * a.Hkv + h / a.group;
  const float *kg = k + g * a.S * a.D, *vg = v + g * a.S * a.Dv;
  int64_t visible = a.causal ? min(a.S, i + a.offset + 1) : a.S;
  float qi[kPerLane], acc[kPerLane] = {};
  loadRow(q + row * a.D, a.D, qi);
  float m = -INFINITY, l = 0.f;
  for (int64_t j = 0; j < visible; ++j) {
    float s = a.scale * dotRow(qi, kg + j * a.D, a.D);
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
}

__global__ void attentionGradQueryKernel(const float *q, const float *k, const float *v,
                                         const float *dy, float *dq, float *lse, float *delta,
                                         AttnShape a) {
  int64_t row = warpId();
  if (row >= a.B * a.Hq * a.T) return;
  int64_t i = row % a.T, bh = row / a.T, b = bh / a.Hq, h = bh % a.Hq;
  int64_t g = b * a.Hkv + h / a.group;
  const float *kg = k + g * a.S * a.D, *vg = v + g * a.S * a.Dv;
  int64_t visible = a.causal ? min(a.S, i + a.offset + 1) : a.S;
  float qi[kPerLane], dyi[kPerLane], acc[kPerLane] = {};
  loadRow(q + row * a.D, a.D, qi);
  loadRow(dy + row * a.Dv, a.Dv, dyi);
  // lse by the online rule: m running max, l the shifted sum.
  float m = -INFINITY, l = 0.f;
  for (int64_t j = 0; j < visible; ++j) {
    float s = a.scale * dotRow(qi, kg + j * a.D, a.D);
    float mNew = fmaxf(m, s);
    l = l * expf(m - mNew) + expf(s - mNew);
    m = mNew;
  }
  float L = visible ? m + logf(l) : 0.f;
  float dl = 0.f;
  for (int64_t j = 0; j < visible; ++j) {
    float p = expf(a.scale * dotRow(qi, kg + j * a.D, a.D) - L);
    dl += p * dotRow(dyi, vg + j * a.Dv, a.Dv);
  }
  for (int64_t j = 0; j < visible; ++j) {
    const float *kj = kg + j * a.D;
    float p = expf(a.scale * dotRow(qi, kj, a.D) - L);
    float ds = p * (dotRow(dyi, vg + j * a.Dv, a.Dv) - dl);
    float kr[kPerLane];
    loadRow(kj, a.D, kr);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) acc[u] += ds * kr[u];
  }
  storeRow(dq + row * a.D, a.D, acc, a.scale);
  if ((threadIdx.x & 31) == 0) {
    lse[row] = L;
    delta[row] = dl;
  }
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
  int64_t firstQuery = a.causal ? max(int64_t(0), j - a.offset) : 0;
  for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h)
    for (int64_t i = firstQuery; i < a.T; ++i) {
      int64_t row = (b * a.Hq + h) * a.T + i;
      const float *qi = q + row * a.D, *dyi = dy + row * a.Dv;
      float p = expf(a.scale * dotRow(kj, qi, a.D) - lse[row]);
      float ds = p * (dotRow(vj, dyi, a.Dv) - delta[row]);
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

unsigned warpsGrid(int64_t warps) {
  return unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

} // namespace

size_t attentionScratchBytes(const Program &p, const Instr &I) {
  if (I.op != OpCode::AttentionGrad)
    return 0;
  const BufferDesc &q = p.buffers[I.in[0]];
  int64_t rows = q.shape[0] * q.shape[1] * q.shape[2];
  return size_t(2 * rows) * sizeof(float) + 256;
}

void launchAttention(const CudaCall &c, CudaContext &ctx) {
  AttnShape a = attnShape(c);
  int64_t rows = a.B * a.Hq * a.T;
  if (rows == 0) return;
  attentionForwardKernel<<<warpsGrid(rows), 32 * kWarpsPerBlock, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.out[0].as<float>(), a);
}

void launchAttentionGrad(const CudaCall &c, CudaContext &ctx) {
  AttnShape a = attnShape(c);
  int64_t rows = a.B * a.Hq * a.T, krows = a.B * a.Hkv * a.S;
  auto *lse = static_cast<float *>(ctx.scratch);
  float *delta = lse + rows;
  if (rows > 0)
    attentionGradQueryKernel<<<warpsGrid(rows), 32 * kWarpsPerBlock, 0, ctx.stream>>>(
        c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.in[3].as<float>(),
        c.out[0].as<float>(), lse, delta, a);
  if (krows > 0)
    attentionGradKeyKernel<<<warpsGrid(krows), 32 * kWarpsPerBlock, 0, ctx.stream>>>(
        c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.in[3].as<float>(), lse,
        delta, c.out[1].as<float>(), c.out[2].as<float>(), a);
}

} // namespace loom::rt::cuda
