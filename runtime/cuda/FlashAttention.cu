//===- FlashAttention.cu - Tiled attention on bf16 tensor cores -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// FlashAttention-2's schedule for head dim 64, written for mma.sync (the
// warp-level bf16 tensor-core product, m16n8k16, fp32 accumulators). The
// operands are bf16 values (autocast), stored as fp32: tiles are rounded to
// bf16 on their way into shared memory, which is exact for q, k and v.
// Like FlashAttention, the probabilities P and dS enter their products
// rounded to bf16; everything else (scores, softmax statistics,
// accumulators) is fp32.
//
// Notation: a block owns a tile of 64 query rows (or 64 keys); each of its
// 4 warps owns 16 of them. s = scale * log2(e) * q.k is kept in the log2
// domain so exp2 replaces exp.
//
// Forward, per query tile, for key tiles j left to right (online softmax):
//   S = Q K_j^T;  m' = max(m, rowmax S);  P = exp2(S - m');
//   l' = l exp2(m - m') + rowsum P;  O' = O exp2(m - m') + P V_j;
//   at the end o = O / l, and (for the backward) lse = m + log2 l,
//   delta = <dy, o> per row.
// Backward, with P recomputed from lse (no score matrix in memory):
//   dP = dY V^T;  dS = P (dP - delta);
//   dV = sum_i P^T dY;  dK = scale sum_i dS^T Q    (per key tile, kernel 2)
//   dQ = scale sum_j dS K                          (per query tile, kernel 3)
// Kernel 2 sums over every query head of a kv head's group, so GQA needs
// no reduction afterwards. Each output element is owned by one thread and
// summed in a fixed order: no atomics, bitwise reproducible.
//
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for
// mma.m16n8k16"), with g = lane / 4 and t = lane % 4; a register holds two
// bf16, the lower index in the low half:
//   A 16x16 (row-major): a0 (g, 2t..2t+1)   a1 (g+8, 2t..)   a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B 16x8  (k x n):     b0 (k 2t..2t+1, n g)   b1 (k 2t+8.., n g)
//   C 16x8  (fp32):      c0 c1 (g, 2t..2t+1)    c2 c3 (g+8, 2t..2t+1)
// Two adjacent C tiles of a 16x16 score block are exactly the A fragment
// of P for the next product, so P never leaves registers. B fragments come
// from row-major tiles through ldmatrix (its .trans form where the product
// runs along the tile's rows), so no tile is stored transposed.
//===----------------------------------------------------------------------===//
#include "cuda/FlashAttention.h"

#include <cuda_bf16.h>
#include <math_constants.h>

namespace loom::rt::cuda {
namespace {

constexpr int D = int(kFlashHeadDim);
constexpr int kTile = 64;        // rows (queries or keys) per block and per key/query tile
constexpr int kWarps = 4;        // 16 rows each
constexpr int kThreads = 32 * kWarps;
constexpr int kStride = D + 8;   // bf16 per smem row: +8 staggers banks across rows
constexpr float kLog2e = 1.4426950408889634f;

using bf16 = __nv_bfloat16;

__device__ inline uint32_t pack2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

__device__ inline uint32_t ld32(const bf16 *p) { return *reinterpret_cast<const uint32_t *>(p); }

/// Four 8x8 bf16 matrices from shared memory, one per register: lanes
/// 8i..8i+7 give the row addresses of matrix i; each lane receives, of
/// every matrix, row lane/4 and columns 2 (lane%4), +1 (with .trans, the
/// transposed matrix's).
__device__ inline void ldsm4(uint32_t (&r)[4], const bf16 *p) {
  auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ inline void ldsm4t(uint32_t (&r)[4], const bf16 *p) {
  auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

/// c += a b on the tensor cores.
__device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// dst[r][c] = bf16(src[row0 + r][c]) for a tile of kTile rows of D; rows
/// at or past `rows` are zero.
__device__ inline void loadTile(bf16 *dst, const float *src, int64_t row0, int64_t rows) {
  for (int idx = threadIdx.x; idx < kTile * D / 4; idx += kThreads) {
    int r = idx / (D / 4), c = idx % (D / 4) * 4;
    float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < rows) f = *reinterpret_cast<const float4 *>(src + (row0 + r) * D + c);
    *reinterpret_cast<uint2 *>(dst + r * kStride + c) = make_uint2(pack2(f.x, f.y), pack2(f.z, f.w));
  }
}

/// The A fragments of this warp's 16 rows of a [kTile][kStride] tile.
__device__ inline void loadA(uint32_t (&f)[D / 16][4], const bf16 *tile) {
  int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const bf16 *base = tile + (threadIdx.x >> 5) * 16 * kStride;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const bf16 *p = base + kk * 16 + 2 * t;
    f[kk][0] = ld32(p + g * kStride);
    f[kk][1] = ld32(p + (g + 8) * kStride);
    f[kk][2] = ld32(p + g * kStride + 8);
    f[kk][3] = ld32(p + (g + 8) * kStride + 8);
  }
}

/// acc[n] (16 x 64) = A (16 x D) B^T where B is a [kTile][kStride] tile of
/// 64 rows: the scores of this warp's rows against a tile's rows. One
/// ldmatrix.x4 gives the B fragments (b0, b1) of two adjacent n tiles:
/// matrices (rows n0..+7, cols k0..+7), (n0.., k0+8..), (n0+8.., k0..),
/// (n0+8.., k0+8..).
__device__ inline void rowProducts(float (&acc)[8][4], const uint32_t (&a)[D / 16][4], const bf16 *tile) {
  int lane = threadIdx.x & 31;
  const bf16 *base = tile + ((lane & 7) + ((lane >> 4) << 3)) * kStride + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
  for (int np = 0; np < 4; ++np)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t b[4];
      ldsm4(b, base + np * 16 * kStride + kk * 16);
      mma(acc[2 * np], a[kk], b[0], b[1]);
      mma(acc[2 * np + 1], a[kk], b[2], b[3]);
    }
}

/// out[dt] (16 x D) += P (16 x 64) X where P is held as C fragments
/// p[8][4] and X is a [kTile][kStride] tile (rows along P's columns). The
/// transposing ldmatrix gives the B fragments of two adjacent d tiles:
/// matrices (rows k0..+7, cols d0..+7), (k0+8.., d0..), (k0.., d0+8..),
/// (k0+8.., d0+8..).
__device__ inline void accumulateTimes(float (&out)[D / 8][4], const float (&p)[8][4], const bf16 *x) {
  int lane = threadIdx.x & 31;
  const bf16 *base = x + ((lane & 7) + ((lane >> 3) & 1) * 8) * kStride + (lane >> 4) * 8;
#pragma unroll
  for (int kc = 0; kc < kTile / 16; ++kc) {
    uint32_t a[4] = {pack2(p[2 * kc][0], p[2 * kc][1]), pack2(p[2 * kc][2], p[2 * kc][3]),
                     pack2(p[2 * kc + 1][0], p[2 * kc + 1][1]), pack2(p[2 * kc + 1][2], p[2 * kc + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldsm4t(b, base + kc * 16 * kStride + dp * 16);
      mma(out[2 * dp], a, b[0], b[1]);
      mma(out[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

/// Element e of C tile n of a 16-row warp block: its row (0..15) and column (0..63).
__device__ inline int fragRow(int e) { return ((threadIdx.x & 31) >> 2) + (e >= 2 ? 8 : 0); }
__device__ inline int fragCol(int n, int e) { return n * 8 + 2 * (threadIdx.x & 3) + (e & 1); }

/// Per query tile: o, or (kStats) the backward's lse and delta.
template <bool kStats>
__global__ void __launch_bounds__(kThreads)
flashForwardKernel(FlashShape a, const float *q, const float *k, const float *v, float *o,
                   const float *dy, float *lse, float *delta) {
  __shared__ __align__(16) bf16 Ks[kTile * kStride];
  __shared__ __align__(16) bf16 Vs[kTile * kStride];
  int64_t tiles = (a.T + kTile - 1) / kTile;
  int64_t i0 = (tiles - 1 - blockIdx.x) * kTile; // the longest causal rows first
  int64_t bh = blockIdx.y, b = bh / a.Hq, h = bh % a.Hq;
  int64_t kvh = b * a.Hkv + h / a.group;
  const float *kg = k + kvh * a.S * D, *vg = v + kvh * a.S * D;
  loadTile(Ks, q + bh * a.T * D, i0, a.T); // Q passes through Ks into registers
  __syncthreads();
  uint32_t qf[D / 16][4];
  loadA(qf, Ks);
  const float sl2 = a.scale * kLog2e;
  int warpRow = (threadIdx.x >> 5) * 16;
  float acc[D / 8][4] = {};
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.f, 0.f};
  int64_t keys = a.causal ? min(a.S, i0 + kTile + a.offset) : a.S;
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    __syncthreads(); // the previous tile is consumed
    loadTile(Ks, kg, j0, a.S);
    loadTile(Vs, vg, j0, a.S);
    __syncthreads();
    float s[8][4];
    rowProducts(s, qf, Ks);
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t row = i0 + warpRow + fragRow(e), col = j0 + fragCol(n, e);
        bool visible = col < a.S && (!a.causal || col <= row + a.offset);
        s[n][e] = visible ? s[n][e] * sl2 : -CUDART_INF_F;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
    float base[2], rs[2] = {0.f, 0.f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // A row's four threads (t = 0..3) hold its 64 columns.
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base[r] = mx[r] == -CUDART_INF_F ? 0.f : mx[r]; // a row with nothing visible yet
      float corr = exp2f(m[r] - base[r]);
      l[r] *= corr;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        acc[dt][2 * r] *= corr;
        acc[dt][2 * r + 1] *= corr;
      }
      m[r] = mx[r];
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = exp2f(s[n][e] - base[e >> 1]);
        rs[e >> 1] += s[n][e];
      }
    l[0] += rs[0];
    l[1] += rs[1];
    accumulateTimes(acc, s, Vs);
  }
  int t = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    int64_t row = i0 + warpRow + fragRow(2 * r);
    float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    if (!kStats) {
      if (row < a.T)
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          *reinterpret_cast<float2 *>(o + (bh * a.T + row) * D + dt * 8 + 2 * t) =
              make_float2(acc[dt][2 * r] * inv, acc[dt][2 * r + 1] * inv);
    } else {
      float dot = 0.f;
      if (row < a.T)
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          float2 g = *reinterpret_cast<const float2 *>(dy + (bh * a.T + row) * D + dt * 8 + 2 * t);
          dot += g.x * acc[dt][2 * r] * inv + g.y * acc[dt][2 * r + 1] * inv;
        }
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      if (row < a.T && t == 0) {
        lse[bh * a.T + row] = l[r] > 0.f ? m[r] + log2f(l[r]) : CUDART_INF_F;
        delta[bh * a.T + row] = dot;
      }
    }
  }
}

/// Per key tile of kv head (b, g): dk and dv, summed over the group's query
/// heads and every query tile that sees the keys.
__global__ void __launch_bounds__(kThreads)
flashKeyGradKernel(FlashShape a, const float *q, const float *k, const float *v, const float *dy,
                   const float *lse, const float *delta, float *dk, float *dv) {
  __shared__ __align__(16) bf16 Qs[kTile * kStride];
  __shared__ __align__(16) bf16 Ds[kTile * kStride];
  __shared__ float lseS[kTile], deltaS[kTile];
  int64_t j0 = int64_t(blockIdx.x) * kTile; // the keys most queries see first
  int64_t kvh = blockIdx.y, b = kvh / a.Hkv, gk = kvh % a.Hkv;
  // This warp's 16 keys and values as A fragments (staged through Qs, Ds).
  loadTile(Qs, k + kvh * a.S * D, j0, a.S);
  loadTile(Ds, v + kvh * a.S * D, j0, a.S);
  __syncthreads();
  uint32_t kf[D / 16][4], vf[D / 16][4];
  loadA(kf, Qs);
  loadA(vf, Ds);
  const float sl2 = a.scale * kLog2e;
  int warpRow = (threadIdx.x >> 5) * 16;
  float dkAcc[D / 8][4] = {}, dvAcc[D / 8][4] = {};
  // Query i sees key j when j <= i + offset: tiles before the first such i are skipped.
  int64_t first = a.causal ? max(int64_t(0), j0 - a.offset) / kTile * kTile : 0;
  for (int64_t h = gk * a.group; h < (gk + 1) * a.group; ++h) {
    int64_t bh = b * a.Hq + h;
    const float *qh = q + bh * a.T * D, *dyh = dy + bh * a.T * D;
    for (int64_t i0 = first; i0 < a.T; i0 += kTile) {
      __syncthreads();
      loadTile(Qs, qh, i0, a.T);
      loadTile(Ds, dyh, i0, a.T);
      for (int r = threadIdx.x; r < kTile; r += kThreads) {
        bool in = i0 + r < a.T;
        lseS[r] = in ? lse[bh * a.T + i0 + r] : CUDART_INF_F; // P = 0 past the end
        deltaS[r] = in ? delta[bh * a.T + i0 + r] : 0.f;
      }
      __syncthreads();
      // Transposed scores: rows are this warp's keys, columns the tile's queries.
      float p[8][4], ds[8][4];
      rowProducts(p, kf, Qs);
      rowProducts(ds, vf, Ds); // dP^T = V dY^T
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int64_t key = j0 + warpRow + fragRow(e);
          int c = fragCol(n, e);
          bool visible = key < a.S && (!a.causal || key <= i0 + c + a.offset);
          p[n][e] = visible ? exp2f(p[n][e] * sl2 - lseS[c]) : 0.f;
          ds[n][e] = p[n][e] * (ds[n][e] - deltaS[c]);
        }
      accumulateTimes(dvAcc, p, Ds);  // dV += P^T dY
      accumulateTimes(dkAcc, ds, Qs); // dK += dS^T Q
    }
  }
  int t = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int64_t key = j0 + warpRow + fragRow(2 * r);
    if (key >= a.S) continue;
    float *dkRow = dk + (kvh * a.S + key) * D, *dvRow = dv + (kvh * a.S + key) * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      *reinterpret_cast<float2 *>(dkRow + dt * 8 + 2 * t) =
          make_float2(dkAcc[dt][2 * r] * a.scale, dkAcc[dt][2 * r + 1] * a.scale);
      *reinterpret_cast<float2 *>(dvRow + dt * 8 + 2 * t) = make_float2(dvAcc[dt][2 * r], dvAcc[dt][2 * r + 1]);
    }
  }
}

/// Per query tile: dq = scale sum_j dS K over the visible key tiles.
__global__ void __launch_bounds__(kThreads)
flashQueryGradKernel(FlashShape a, const float *q, const float *k, const float *v, const float *dy,
                     const float *lse, const float *delta, float *dq) {
  __shared__ __align__(16) bf16 Ks[kTile * kStride];
  __shared__ __align__(16) bf16 Vs[kTile * kStride];
  int64_t tiles = (a.T + kTile - 1) / kTile;
  int64_t i0 = (tiles - 1 - blockIdx.x) * kTile;
  int64_t bh = blockIdx.y, b = bh / a.Hq, h = bh % a.Hq;
  int64_t kvh = b * a.Hkv + h / a.group;
  const float *kg = k + kvh * a.S * D, *vg = v + kvh * a.S * D;
  loadTile(Ks, q + bh * a.T * D, i0, a.T);
  loadTile(Vs, dy + bh * a.T * D, i0, a.T);
  __syncthreads();
  uint32_t qf[D / 16][4], gf[D / 16][4];
  loadA(qf, Ks);
  loadA(gf, Vs);
  const float sl2 = a.scale * kLog2e;
  int warpRow = (threadIdx.x >> 5) * 16;
  float rowLse[2], rowDelta[2];
  for (int r = 0; r < 2; ++r) {
    int64_t row = i0 + warpRow + fragRow(2 * r);
    rowLse[r] = row < a.T ? lse[bh * a.T + row] : CUDART_INF_F;
    rowDelta[r] = row < a.T ? delta[bh * a.T + row] : 0.f;
  }
  float dqAcc[D / 8][4] = {};
  int64_t keys = a.causal ? min(a.S, i0 + kTile + a.offset) : a.S;
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    __syncthreads();
    loadTile(Ks, kg, j0, a.S);
    loadTile(Vs, vg, j0, a.S);
    __syncthreads();
    float p[8][4], ds[8][4];
    rowProducts(p, qf, Ks);
    rowProducts(ds, gf, Vs); // dP = dY V^T
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t row = i0 + warpRow + fragRow(e), col = j0 + fragCol(n, e);
        bool visible = col < a.S && (!a.causal || col <= row + a.offset);
        float pe = visible ? exp2f(p[n][e] * sl2 - rowLse[e >> 1]) : 0.f;
        ds[n][e] = pe * (ds[n][e] - rowDelta[e >> 1]);
      }
    accumulateTimes(dqAcc, ds, Ks); // dQ += dS K
  }
  int t = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int64_t row = i0 + warpRow + fragRow(2 * r);
    if (row >= a.T) continue;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<float2 *>(dq + (bh * a.T + row) * D + dt * 8 + 2 * t) =
          make_float2(dqAcc[dt][2 * r] * a.scale, dqAcc[dt][2 * r + 1] * a.scale);
  }
}

} // namespace

void launchFlashForward(const FlashShape &a, const float *q, const float *k, const float *v,
                        float *o, cudaStream_t stream) {
  if (a.B * a.Hq * a.T == 0) return;
  dim3 grid{unsigned((a.T + kTile - 1) / kTile), unsigned(a.B * a.Hq)};
  flashForwardKernel<false><<<grid, kThreads, 0, stream>>>(a, q, k, v, o, nullptr, nullptr, nullptr);
}

void launchFlashBackward(const FlashShape &a, const float *q, const float *k, const float *v,
                         const float *dy, float *dq, float *dk, float *dv, float *stats,
                         cudaStream_t stream) {
  int64_t rows = a.B * a.Hq * a.T;
  float *lse = stats, *delta = stats + rows;
  if (rows > 0) {
    dim3 grid{unsigned((a.T + kTile - 1) / kTile), unsigned(a.B * a.Hq)};
    flashForwardKernel<true><<<grid, kThreads, 0, stream>>>(a, q, k, v, nullptr, dy, lse, delta);
    flashQueryGradKernel<<<grid, kThreads, 0, stream>>>(a, q, k, v, dy, lse, delta, dq);
  }
  if (a.B * a.Hkv * a.S > 0) {
    dim3 grid{unsigned((a.S + kTile - 1) / kTile), unsigned(a.B * a.Hkv)};
    flashKeyGradKernel<<<grid, kThreads, 0, stream>>>(a, q, k, v, dy, lse, delta, dk, dv);
  }
}

} // namespace loom::rt::cuda
