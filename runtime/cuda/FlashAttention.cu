//===- FlashAttention.cu - Tiled attention on bf16 tensor cores -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// FlashAttention-2's schedule for head dim 64, written for mma.sync (the
// warp-level bf16 tensor-core product, m16n8k16, fp32 accumulators). The
// operands are bf16 values (autocast). Stored as fp32, each call first
// rounds them into bf16 copies in scratch (exact for q, k and v); stored as
// bf16 (bf16 storage, Program.h: codegen folded autocast's casts into the
// instruction) they are those copies already and are read in place. Either
// way tiles travel to shared memory by cp.async, double-buffered: the next
// tile is in flight while the current one is multiplied. Results are stored
// as fp32, or rounded once to bf16 storage as Cast rounds (floatToBf16), so
// folding the casts changes no bit.
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
//   at the end o = O / l and lse = (m + log2 l) ln 2, the natural-log
//   logsumexp the program's lse output holds (Program.h).
// Backward, from the forward's o and lse (FlashAttention's contract: no
// pass over the keys to recompute the softmax statistics), per query row
//   lse2 = lse log2(e) (the log2 domain again);  delta = <dy, o>   (kernel 1)
// and with P = exp2(S - lse2) recomputed per tile (no score matrix in memory):
//   dP = dY V^T;  dS = P (dP - delta);
//   dQ = scale sum_j dS K                          (per query tile, kernel 2)
//   dV = sum_i P^T dY;  dK = scale sum_i dS^T Q    (per key tile, kernel 3)
// Kernel 3 sums over every query head of a kv head's group, so GQA needs
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

#include <algorithm>
#include <cuda_bf16.h>
#include <initializer_list>
#include <math_constants.h>

namespace loom::rt::cuda {
namespace {

constexpr int D = int(kFlashHeadDim);
constexpr int kTile = 64;        // rows (queries or keys) per block and per key/query tile
constexpr int kWarps = 4;        // 16 rows each
constexpr int kBlockThreads = 32 * kWarps;
constexpr int kStride = D + 8;   // bf16 per smem row: +8 staggers banks across rows
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

using bf16 = __nv_bfloat16;

__device__ inline uint32_t pack2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

__device__ inline uint32_t ld32(const bf16 *p) { return *reinterpret_cast<const uint32_t *>(p); }

/// Elements i and i + 1 (i even) of an f32 operand stored as f32 or as bf16
/// storage (widened exactly).
__device__ inline float2 loadPair(FloatIn x, int64_t i) {
  if (!x.bf16) return *reinterpret_cast<const float2 *>(static_cast<const float *>(x.p) + i);
  uint32_t u = *reinterpret_cast<const uint32_t *>(static_cast<const uint16_t *>(x.p) + i);
  return make_float2(bf16ToFloat(uint16_t(u)), bf16ToFloat(uint16_t(u >> 16)));
}

/// Stores results lo, hi at i and i + 1 (i even): as f32, or rounded to bf16
/// storage exactly as Cast rounds (not pack2's intrinsic: NaNs must match).
__device__ inline void storePair(FloatOut x, int64_t i, float lo, float hi) {
  if (!x.bf16) {
    *reinterpret_cast<float2 *>(static_cast<float *>(x.p) + i) = make_float2(lo, hi);
    return;
  }
  *reinterpret_cast<uint32_t *>(static_cast<uint16_t *>(x.p) + i) =
      uint32_t(floatToBf16(lo)) | uint32_t(floatToBf16(hi)) << 16;
}

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

/// dst[r][c] = src[row0 + r][c] for a tile of kTile rows of D bf16, copied
/// by cp.async (16 bytes a thread, no registers); rows at or past `rows` are
/// zero-filled. The copy completes at cp.async.wait_group.
__device__ inline void loadTileAsync(bf16 *dst, const bf16 *src, int64_t row0, int64_t rows) {
#pragma unroll
  for (int idx = threadIdx.x; idx < kTile * D / 8; idx += kBlockThreads) {
    int r = idx / (D / 8), c = idx % (D / 8) * 8;
    bool in = row0 + r < rows;
    auto s = static_cast<uint32_t>(__cvta_generic_to_shared(dst + r * kStride + c));
    const bf16 *g = src + (in ? (row0 + r) * D + c : 0);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(in ? 16 : 0));
  }
}

/// n floats of kTile (a multiple of 4) by cp.async; the caller pads the source.
__device__ inline void loadRowStatsAsync(float *dst, const float *src) {
  if (threadIdx.x < kTile / 4) {
    auto s = static_cast<uint32_t>(__cvta_generic_to_shared(dst + 4 * threadIdx.x));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src + 4 * threadIdx.x));
  }
}

__device__ inline void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most `n` of this thread's committed groups are in flight.
template <int n> __device__ inline void cpAsyncWait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(n)); }

/// The forward's and dQ's key/value pipeline step: starts copying tile
/// jt + 1 (if any) into the other buffer half, then waits until tile jt is
/// in shared memory for every thread.
__device__ inline void nextKeyTile(bf16 *kNext, bf16 *vNext, const bf16 *kg, const bf16 *vg,
                                   int64_t jt, int64_t nTiles, int64_t S) {
  if (jt + 1 < nTiles) {
    loadTileAsync(kNext, kg, (jt + 1) * kTile, S);
    loadTileAsync(vNext, vg, (jt + 1) * kTile, S);
    cpAsyncCommit();
    cpAsyncWait<1>();
  } else {
    cpAsyncWait<0>();
  }
  __syncthreads();
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

/// Per query tile: o and lse. A row that sees no key (S == 0) gets o = 0
/// and lse = +inf.
///
/// Pipeline: key/value tile j + 1 is copied (cp.async) into the other half
/// of the double buffer while tile j is multiplied; the query tile passes
/// through Ks[1] into registers before the loop.
__global__ void __launch_bounds__(kBlockThreads)
flashForwardKernel(FlashShape a, const bf16 *q, const bf16 *k, const bf16 *v, FloatOut o,
                   float *lse) {
  __shared__ __align__(16) bf16 Ks[2][kTile * kStride];
  __shared__ __align__(16) bf16 Vs[2][kTile * kStride];
  int64_t tiles = (a.T + kTile - 1) / kTile;
  int64_t i0 = (tiles - 1 - blockIdx.x) * kTile; // the longest causal rows first
  int64_t bh = blockIdx.y, b = bh / a.Hq, h = bh % a.Hq;
  int64_t kvh = b * a.Hkv + h / a.group;
  const bf16 *kg = k + kvh * a.S * D, *vg = v + kvh * a.S * D;
  int64_t keys = a.causal ? min(a.S, i0 + kTile + a.offset) : a.S;
  int64_t nTiles = keys > 0 ? (keys + kTile - 1) / kTile : 0;
  loadTileAsync(Ks[1], q + bh * a.T * D, i0, a.T);
  if (nTiles > 0) {
    loadTileAsync(Ks[0], kg, 0, a.S);
    loadTileAsync(Vs[0], vg, 0, a.S);
  }
  cpAsyncCommit();
  cpAsyncWait<0>();
  __syncthreads();
  uint32_t qf[D / 16][4];
  loadA(qf, Ks[1]);
  __syncthreads(); // Ks[1] is free for key tile 1
  const float sl2 = a.scale * kLog2e;
  int warpRow = (threadIdx.x >> 5) * 16;
  float acc[D / 8][4] = {};
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.f, 0.f};
  for (int64_t jt = 0; jt < nTiles; ++jt) {
    int buf = int(jt & 1);
    int64_t j0 = jt * kTile;
    nextKeyTile(Ks[buf ^ 1], Vs[buf ^ 1], kg, vg, jt, nTiles, a.S);
    float s[8][4];
    rowProducts(s, qf, Ks[buf]);
    float mx[2] = {m[0], m[1]};
    // How many of this tile's columns each row sees (col < S, and col <=
    // row + offset when causal), counted from j0: one 32-bit compare per
    // element instead of two 64-bit ones, which keeps this kernel, lse
    // store included, at 128 registers (4 blocks per SM).
    int seen[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int64_t row = i0 + warpRow + fragRow(2 * r);
      int64_t end = a.causal ? min(a.S, row + a.offset + 1) : a.S;
      seen[r] = int(max(int64_t(0), min(int64_t(kTile), end - j0)));
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        bool visible = fragCol(n, e) < seen[e >> 1];
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
    accumulateTimes(acc, s, Vs[buf]);
    __syncthreads(); // tile jt is consumed before jt + 2 overwrites it
  }
  int t = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    int64_t row = i0 + warpRow + fragRow(2 * r);
    if (row >= a.T) continue;
    // l >= 1 once a key is visible (the row's max contributes exp2(0)).
    if (t == 0) lse[bh * a.T + row] = l[r] > 0.f ? (m[r] + log2f(l[r])) * kLn2 : CUDART_INF_F;
    float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      storePair(o, (bh * a.T + row) * D + dt * 8 + 2 * t, acc[dt][2 * r] * inv,
                acc[dt][2 * r + 1] * inv);
  }
}

/// Kernel 1 of the backward, one warp per padded query row: the forward's
/// lse in the log2 domain of the kernels below, and delta = <dy, o> (o and
/// dy as stored, widened: the values the program holds, unrounded). Rows
/// past T get lse2 = +inf and delta = 0, so they drop out of kernels 2 and
/// 3 without a bounds check. Each lane takes two adjacent elements of the
/// 64; the warp's butterfly adds them in a fixed order.
__global__ void flashRowStatsKernel(FlashShape a, FloatIn o, const float *lse, FloatIn dy,
                                    float *lse2, float *delta, int64_t tpad) {
  int64_t prow = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (prow >= a.B * a.Hq * tpad) return;
  int64_t bh = prow / tpad, i = prow % tpad;
  int lane = threadIdx.x & 31;
  float dot = 0.f;
  if (i < a.T) {
    int64_t at = (bh * a.T + i) * D + 2 * lane;
    float2 g = loadPair(dy, at), y = loadPair(o, at);
    dot = g.x * y.x + g.y * y.y;
  }
  dot = warpSum(dot);
  if (lane == 0) {
    lse2[prow] = i < a.T ? lse[bh * a.T + i] * kLog2e : CUDART_INF_F;
    delta[prow] = dot;
  }
}

/// Per key tile of kv head (b, g): dk and dv, summed over the group's query
/// heads and every query tile that sees the keys. The (head, query tile)
/// pairs form one sequence; pair n + 1's q, dy, lse and delta are copied
/// into the other buffer half while pair n is multiplied.
__global__ void __launch_bounds__(kBlockThreads)
flashKeyGradKernel(FlashShape a, const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *dy,
                   const float *lse2, const float *delta, int64_t tpad, FloatOut dk, FloatOut dv) {
  __shared__ __align__(16) bf16 Qs[2][kTile * kStride];
  __shared__ __align__(16) bf16 Ds[2][kTile * kStride];
  __shared__ __align__(16) float lseS[2][kTile], deltaS[2][kTile];
  int64_t j0 = int64_t(blockIdx.x) * kTile; // the keys most queries see first
  int64_t kvh = blockIdx.y, b = kvh / a.Hkv, gk = kvh % a.Hkv;
  // Query i sees key j when j <= i + offset: tiles before the first such i are skipped.
  int64_t first = a.causal ? max(int64_t(0), j0 - a.offset) / kTile * kTile : 0;
  int64_t perHead = first < a.T ? (a.T - first + kTile - 1) / kTile : 0;
  int64_t pairs = perHead * a.group;
  auto issue = [&](int64_t n, int buf) {
    int64_t bh = b * a.Hq + gk * a.group + n / perHead, i0 = first + n % perHead * kTile;
    loadTileAsync(Qs[buf], q + bh * a.T * D, i0, a.T);
    loadTileAsync(Ds[buf], dy + bh * a.T * D, i0, a.T);
    loadRowStatsAsync(lseS[buf], lse2 + bh * tpad + i0);
    loadRowStatsAsync(deltaS[buf], delta + bh * tpad + i0);
  };
  // This warp's 16 keys and values as A fragments (staged through Qs[1], Ds[1]).
  loadTileAsync(Qs[1], k + kvh * a.S * D, j0, a.S);
  loadTileAsync(Ds[1], v + kvh * a.S * D, j0, a.S);
  if (pairs > 0) issue(0, 0);
  cpAsyncCommit();
  cpAsyncWait<0>();
  __syncthreads();
  uint32_t kf[D / 16][4], vf[D / 16][4];
  loadA(kf, Qs[1]);
  loadA(vf, Ds[1]);
  __syncthreads();
  const float sl2 = a.scale * kLog2e;
  int warpRow = (threadIdx.x >> 5) * 16;
  float dkAcc[D / 8][4] = {}, dvAcc[D / 8][4] = {};
  for (int64_t n = 0; n < pairs; ++n) {
    int buf = int(n & 1);
    int64_t i0 = first + n % perHead * kTile;
    if (n + 1 < pairs) {
      issue(n + 1, buf ^ 1);
      cpAsyncCommit();
      cpAsyncWait<1>();
    } else {
      cpAsyncWait<0>();
    }
    __syncthreads();
    // Transposed scores: rows are this warp's keys, columns the tile's queries.
    float p[8][4], ds[8][4];
    rowProducts(p, kf, Qs[buf]);
    rowProducts(ds, vf, Ds[buf]); // dP^T = V dY^T
#pragma unroll
    for (int nn = 0; nn < 8; ++nn)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t key = j0 + warpRow + fragRow(e);
        int c = fragCol(nn, e);
        bool visible = key < a.S && (!a.causal || key <= i0 + c + a.offset);
        p[nn][e] = visible ? exp2f(p[nn][e] * sl2 - lseS[buf][c]) : 0.f;
        ds[nn][e] = p[nn][e] * (ds[nn][e] - deltaS[buf][c]);
      }
    accumulateTimes(dvAcc, p, Ds[buf]);  // dV += P^T dY
    accumulateTimes(dkAcc, ds, Qs[buf]); // dK += dS^T Q
    __syncthreads();
  }
  // dk first, then dv: dkAcc's registers are free before dvAcc's stores
  // (one interleaved loop with bf16 rounding took 4 more registers).
  int t = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int64_t key = j0 + warpRow + fragRow(2 * r);
    if (key >= a.S) continue;
    int64_t at = (kvh * a.S + key) * D + 2 * t;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      storePair(dk, at + dt * 8, dkAcc[dt][2 * r] * a.scale, dkAcc[dt][2 * r + 1] * a.scale);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int64_t key = j0 + warpRow + fragRow(2 * r);
    if (key >= a.S) continue;
    int64_t at = (kvh * a.S + key) * D + 2 * t;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      storePair(dv, at + dt * 8, dvAcc[dt][2 * r], dvAcc[dt][2 * r + 1]);
  }
}

/// Per query tile: dq = scale sum_j dS K over the visible key tiles, with
/// the forward's double-buffered key/value pipeline.
__global__ void __launch_bounds__(kBlockThreads)
flashQueryGradKernel(FlashShape a, const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *dy,
                     const float *lse2, const float *delta, int64_t tpad, FloatOut dq) {
  __shared__ __align__(16) bf16 Ks[2][kTile * kStride];
  __shared__ __align__(16) bf16 Vs[2][kTile * kStride];
  int64_t tiles = (a.T + kTile - 1) / kTile;
  int64_t i0 = (tiles - 1 - blockIdx.x) * kTile;
  int64_t bh = blockIdx.y, b = bh / a.Hq, h = bh % a.Hq;
  int64_t kvh = b * a.Hkv + h / a.group;
  const bf16 *kg = k + kvh * a.S * D, *vg = v + kvh * a.S * D;
  int64_t keys = a.causal ? min(a.S, i0 + kTile + a.offset) : a.S;
  int64_t nTiles = keys > 0 ? (keys + kTile - 1) / kTile : 0;
  // q and dy pass through Ks[1], Vs[1] into registers, beside key tile 0.
  loadTileAsync(Ks[1], q + bh * a.T * D, i0, a.T);
  loadTileAsync(Vs[1], dy + bh * a.T * D, i0, a.T);
  if (nTiles > 0) {
    loadTileAsync(Ks[0], kg, 0, a.S);
    loadTileAsync(Vs[0], vg, 0, a.S);
  }
  cpAsyncCommit();
  cpAsyncWait<0>();
  __syncthreads();
  uint32_t qf[D / 16][4], gf[D / 16][4];
  loadA(qf, Ks[1]);
  loadA(gf, Vs[1]);
  __syncthreads();
  const float sl2 = a.scale * kLog2e;
  int warpRow = (threadIdx.x >> 5) * 16;
  float rowLse[2], rowDelta[2];
  for (int r = 0; r < 2; ++r) {
    int64_t row = i0 + warpRow + fragRow(2 * r);
    rowLse[r] = lse2[bh * tpad + row];
    rowDelta[r] = delta[bh * tpad + row];
  }
  float dqAcc[D / 8][4] = {};
  for (int64_t jt = 0; jt < nTiles; ++jt) {
    int buf = int(jt & 1);
    int64_t j0 = jt * kTile;
    nextKeyTile(Ks[buf ^ 1], Vs[buf ^ 1], kg, vg, jt, nTiles, a.S);
    float p[8][4], ds[8][4];
    rowProducts(p, qf, Ks[buf]);
    rowProducts(ds, gf, Vs[buf]); // dP = dY V^T
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t row = i0 + warpRow + fragRow(e), col = j0 + fragCol(n, e);
        bool visible = col < a.S && (!a.causal || col <= row + a.offset);
        float pe = visible ? exp2f(p[n][e] * sl2 - rowLse[e >> 1]) : 0.f;
        ds[n][e] = pe * (ds[n][e] - rowDelta[e >> 1]);
      }
    accumulateTimes(dqAcc, ds, Ks[buf]); // dQ += dS K
    __syncthreads();
  }
  int t = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int64_t row = i0 + warpRow + fragRow(2 * r);
    if (row >= a.T) continue;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      storePair(dq, (bh * a.T + row) * D + dt * 8 + 2 * t, dqAcc[dt][2 * r] * a.scale,
                dqAcc[dt][2 * r + 1] * a.scale);
  }
}

/// dst = bf16(src), four values a thread per step (n4 = elements / 4).
__global__ void roundToBf16Kernel(const float4 *src, uint2 *dst, int64_t n4) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    float4 f = src[i];
    dst[i] = make_uint2(pack2(f.x, f.y), pack2(f.z, f.w));
  }
}

/// Scratch regions, each 256-byte aligned: padded row statistics (backward
/// only) and bf16 copies of the f32 inputs that enter products (inputs in
/// bf16 storage need none). The tiles are copied to shared memory without
/// conversion, so each f32 operand is rounded once per call instead of once
/// per tile visit (every key tile is visited by up to T / kTile query tiles
/// of each head in its group).
struct FlashScratch {
  size_t lse2 = 0, delta = 0, q = 0, k = 0, v = 0, dy = 0, bytes = 0;
  int64_t tpad = 0;
};

/// The instruction input that holds dy in the backward (Program.h's order:
/// q, k, v, o, lse, dy), as flashScratchBytes' mask numbers it.
constexpr int kGradInputDy = 5;

FlashScratch flashScratch(const FlashShape &a, bool backward, unsigned bf16Inputs) {
  FlashScratch s;
  s.tpad = (a.T + kTile - 1) / kTile * kTile;
  size_t at = 0;
  auto take = [&](size_t bytes) { size_t off = at; at += align256(bytes); return off; };
  auto copy = [&](int input, int64_t rows) {
    return bf16Inputs & (1u << input) ? 0 : take(size_t(rows * D) * sizeof(bf16));
  };
  if (backward) {
    s.lse2 = take(size_t(a.B * a.Hq * s.tpad) * sizeof(float));
    s.delta = take(size_t(a.B * a.Hq * s.tpad) * sizeof(float));
  }
  s.q = copy(0, a.B * a.Hq * a.T);
  s.k = copy(1, a.B * a.Hkv * a.S);
  s.v = copy(2, a.B * a.Hkv * a.S);
  if (backward) s.dy = copy(kGradInputDy, a.B * a.Hq * a.T);
  s.bytes = at;
  return s;
}

/// flashScratch's mask of the given inputs, numbered by position.
unsigned bf16Mask(std::initializer_list<FloatIn> inputs) {
  unsigned mask = 0, bit = 1;
  for (const FloatIn &x : inputs) {
    if (x.bf16) mask |= bit;
    bit <<= 1;
  }
  return mask;
}

/// The bf16 values of input x (n elements): the input itself when it is
/// bf16 storage, else its copy at `offset` of scratch, rounded now.
const bf16 *bf16Operand(FloatIn x, int64_t n, void *scratch, size_t offset, cudaStream_t stream) {
  if (x.bf16) return static_cast<const bf16 *>(x.p);
  auto *dst = reinterpret_cast<bf16 *>(static_cast<char *>(scratch) + offset);
  int64_t n4 = n / 4; // n is a multiple of D
  if (n4 > 0) {
    unsigned blocks = unsigned(std::min<int64_t>((n4 + 255) / 256, 132 * 16));
    roundToBf16Kernel<<<blocks, 256, 0, stream>>>(static_cast<const float4 *>(x.p),
                                                  reinterpret_cast<uint2 *>(dst), n4);
  }
  return dst;
}

} // namespace

size_t flashScratchBytes(const FlashShape &a, bool backward, unsigned bf16Inputs) {
  return flashScratch(a, backward, bf16Inputs).bytes;
}

void launchFlashForward(const FlashShape &a, FloatIn q, FloatIn k, FloatIn v, FloatOut o,
                        float *lse, void *scratch, cudaStream_t stream) {
  if (a.B * a.Hq * a.T == 0) return;
  FlashScratch s = flashScratch(a, false, bf16Mask({q, k, v}));
  const bf16 *qb = bf16Operand(q, a.B * a.Hq * a.T * D, scratch, s.q, stream);
  const bf16 *kb = bf16Operand(k, a.B * a.Hkv * a.S * D, scratch, s.k, stream);
  const bf16 *vb = bf16Operand(v, a.B * a.Hkv * a.S * D, scratch, s.v, stream);
  dim3 grid{unsigned((a.T + kTile - 1) / kTile), unsigned(a.B * a.Hq)};
  flashForwardKernel<<<grid, kBlockThreads, 0, stream>>>(a, qb, kb, vb, o, lse);
}

void launchFlashBackward(const FlashShape &a, FloatIn q, FloatIn k, FloatIn v, FloatIn o,
                         const float *lse, FloatIn dy, FloatOut dq, FloatOut dk, FloatOut dv,
                         void *scratch, cudaStream_t stream) {
  int64_t rows = a.B * a.Hq * a.T, krows = a.B * a.Hkv * a.S;
  FlashScratch s = flashScratch(a, true, bf16Mask({q, k, v, o, FloatIn{}, dy}));
  auto *base = static_cast<char *>(scratch);
  auto *lse2 = reinterpret_cast<float *>(base + s.lse2);
  auto *delta = reinterpret_cast<float *>(base + s.delta);
  const bf16 *qb = bf16Operand(q, rows * D, scratch, s.q, stream);
  const bf16 *dyb = bf16Operand(dy, rows * D, scratch, s.dy, stream);
  const bf16 *kb = bf16Operand(k, krows * D, scratch, s.k, stream);
  const bf16 *vb = bf16Operand(v, krows * D, scratch, s.v, stream);
  if (rows > 0) {
    // Every padded row, so that kernels 2 and 3 read whole tiles of
    // statistics (rows past T drop out).
    int64_t padded = a.B * a.Hq * s.tpad;
    constexpr int kStatsWarps = 8;
    flashRowStatsKernel<<<unsigned((padded + kStatsWarps - 1) / kStatsWarps), 32 * kStatsWarps, 0,
                          stream>>>(a, o, lse, dy, lse2, delta, s.tpad);
    dim3 grid{unsigned((a.T + kTile - 1) / kTile), unsigned(a.B * a.Hq)};
    flashQueryGradKernel<<<grid, kBlockThreads, 0, stream>>>(a, qb, kb, vb, dyb, lse2, delta,
                                                             s.tpad, dq);
  }
  if (krows > 0) {
    dim3 grid{unsigned((a.S + kTile - 1) / kTile), unsigned(a.B * a.Hkv)};
    flashKeyGradKernel<<<grid, kBlockThreads, 0, stream>>>(a, qb, kb, vb, dyb, lse2, delta,
                                                           s.tpad, dk, dv);
  }
}

} // namespace loom::rt::cuda
