//===- TrainingKernels.cpp - Backward kernels and the AdamW optimizer -----===//
//
// Part of loom, under the Apache License v2.0.
//
// One kernel per training opcode (Program.h, opcodes 80-89). Each takes the
// forward inputs it needs plus the output gradient dy and returns the
// vector-Jacobian product; the math is spelled out above each kernel.
//
// Precision: f32 or f64 in and out (AdamW: f32 only, as Program.h says).
// Every sum (row statistics, dot products, the dw/db column sums, attention
// rows, scatter-adds) accumulates in double and is rounded once on the
// store, so f32 results track an fp64 reference to a few f32 roundings.
//
// Determinism: results are bitwise identical for every thread count. No two
// threads ever add into the same output element: reductions over rows (dw,
// db of the norms, dk/dv of attention, the embedding scatter-add) are
// instead computed by whoever owns the output element, summing its terms in
// a fixed order.
//===----------------------------------------------------------------------===//
#include "cpu/AdamWMath.h"
#include "cpu/AttentionMask.h"
#include "cpu/Kernels.h"
#include "cpu/Strided.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/AttentionLayout.h"
#include "loom/runtime/Fp8.h"
#include "loom/runtime/RoundedCopies.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

namespace loom::rt {
namespace {

/// Rows of length `d` per task such that a task covers ~16K elements.
int64_t rowGrain(int64_t d) {
  return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, d));
}

/// Element `i` of an index tensor (i64 or i32) as int64.
int64_t indexAt(const Tensor &t, int64_t i) {
  return t.dtype() == DType::I64 ? t.as<int64_t>()[i] : t.as<int32_t>()[i];
}

/// out[i] = sum over rows r (in order) of term(r, i), for i < cols, in
/// double. Threads own blocks of columns, so each sum has one fixed order
/// whatever the thread count; a block of 32 columns reads 128 contiguous
/// bytes per row.
template <typename T, typename Term>
void columnSums(ThreadPool &pool, int64_t rows, int64_t cols, T *out, const Term &term) {
  constexpr int64_t kBlock = 32;
  int64_t blocks = (cols + kBlock - 1) / kBlock;
  pool.parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    double acc[kBlock];
    for (int64_t blk = begin; blk < end; ++blk) {
      int64_t c0 = blk * kBlock, c1 = std::min(cols, c0 + kBlock);
      std::fill(acc, acc + kBlock, 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = c0; i < c1; ++i) acc[i - c0] += term(r, i);
      for (int64_t i = c0; i < c1; ++i) out[i] = T(acc[i - c0]);
    }
  });
}

/// A gradient plus the optional addend `a` summed into it, rounded to T as
/// a separate Add would (the fused gradient sums: the norms' dx,
/// loom-fuse-norm-grad-accumulate; a tied head's weight gradient into the
/// embedding gradient, loom-fuse-embedding-grad-accumulate).
template <typename T> T plusAddend(T dx, const T *addend, int64_t i) {
  return addend ? T(dx + addend[i]) : dx;
}

// EmbeddingGrad: dtable[v, :] = sum over positions n with ids[n] == v of
// dy[n, :]; rows no id picks are zero. With a third input a (the table's
// shape), each row is a + that row, rounded once more (plusAddend).
// The positions are bucketed by id with a stable counting sort, then each
// vocab row is summed by one thread in position order.
template <typename T>
bool embeddingGradTyped(const KernelCall &c, ThreadPool &pool, std::string &err) {
  const Tensor &dyT = c.in[0], &ids = c.in[1];
  int64_t V = c.out[0].shape()[0], D = c.out[0].shape()[1], N = ids.numel();
  std::vector<int64_t> first(size_t(V) + 1, 0), order(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    int64_t id = indexAt(ids, n);
    if (id < 0 || id >= V) {
      err = cat("id ", id, " at position ", n, " out of range [0, ", V, ")");
      return false;
    }
    ++first[size_t(id) + 1];
  }
  for (int64_t v = 0; v < V; ++v) first[v + 1] += first[v];
  std::vector<int64_t> cursor(first.begin(), first.end() - 1);
  for (int64_t n = 0; n < N; ++n) order[size_t(cursor[size_t(indexAt(ids, n))]++)] = n;

  const T *dy = dyT.as<T>();
  const T *addend = c.in.size() > 2 ? c.in[2].as<T>() : nullptr;
  T *out = c.out[0].as<T>();
  pool.parallelFor(V, rowGrain(D), [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(D));
    for (int64_t v = begin; v < end; ++v) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = first[v]; k < first[v + 1]; ++k) {
        const T *row = dy + order[k] * D;
        for (int64_t i = 0; i < D; ++i) acc[i] += row[i];
      }
      for (int64_t i = 0; i < D; ++i) out[v * D + i] = plusAddend(T(acc[i]), addend, v * D + i);
    }
  });
  return true;
}

// RmsNormGrad, per row of length D, with r = 1/sqrt(mean(x^2) + eps),
// n = x r (the normalized row) and g = dy w:
//   dx = r (g - n mean(g n))
//   dw = sum over rows of dy n
// (y = n w; dy/dx of n is r (I - n n^T / D).) With a fourth input a, dx is
// a + dx, each rounded to T as a separate Add would (the residual stream's
// gradient sum, loom-fuse-norm-grad-accumulate).
template <typename T>
bool rmsNormGradTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const T *x = c.in[0].as<T>(), *w = c.in[1].as<T>(), *dy = c.in[2].as<T>();
  const T *addend = c.in.size() > 3 ? c.in[3].as<T>() : nullptr;
  T *dx = c.out[0].as<T>(), *dw = c.out[1].as<T>();
  int64_t D = c.in[0].shape().back(), rows = D ? c.in[0].numel() / D : 0;
  double eps = c.instr->floats[0];
  std::vector<double> rstd(static_cast<size_t>(rows));
  pool.parallelFor(rows, rowGrain(D), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T *xr = x + row * D, *gr = dy + row * D;
      double ss = 0;
      for (int64_t i = 0; i < D; ++i) ss += double(xr[i]) * xr[i];
      double r = 1.0 / std::sqrt(ss / double(D) + eps);
      double gn = 0; // sum of g n
      for (int64_t i = 0; i < D; ++i) gn += double(gr[i]) * w[i] * (xr[i] * r);
      double meanGn = gn / double(D);
      for (int64_t i = 0; i < D; ++i)
        dx[row * D + i] =
            plusAddend(T(r * (double(gr[i]) * w[i] - xr[i] * r * meanGn)), addend, row * D + i);
      rstd[row] = r;
    }
  });
  columnSums(pool, rows, D, dw, [&](int64_t row, int64_t i) {
    return double(dy[row * D + i]) * x[row * D + i] * rstd[row];
  });
  return true;
}

// LayerNormGrad, per row of length D, with mean and biased var of x,
// r = 1/sqrt(var + eps), xhat = (x - mean) r and g = dy w:
//   dx = r (g - mean(g) - xhat mean(g xhat))
//   dw = sum over rows of dy xhat;  db = sum over rows of dy
template <typename T>
bool layerNormGradTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const T *x = c.in[0].as<T>(), *w = c.in[1].as<T>(), *dy = c.in[2].as<T>();
  const T *addend = c.in.size() > 3 ? c.in[3].as<T>() : nullptr; // as in RmsNormGrad
  T *dx = c.out[0].as<T>(), *dw = c.out[1].as<T>(), *db = c.out[2].as<T>();
  int64_t D = c.in[0].shape().back(), rows = D ? c.in[0].numel() / D : 0;
  double eps = c.instr->floats[0];
  std::vector<double> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  pool.parallelFor(rows, rowGrain(D), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T *xr = x + row * D, *gr = dy + row * D;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < D; ++i) sum += xr[i];
      double mu = sum / double(D);
      for (int64_t i = 0; i < D; ++i) sq += (xr[i] - mu) * (xr[i] - mu);
      double r = 1.0 / std::sqrt(sq / double(D) + eps);
      double g = 0, gx = 0; // sums of g and of g xhat
      for (int64_t i = 0; i < D; ++i) {
        double gi = double(gr[i]) * w[i];
        g += gi;
        gx += gi * (xr[i] - mu) * r;
      }
      double meanG = g / double(D), meanGx = gx / double(D);
      for (int64_t i = 0; i < D; ++i) {
        double xhat = (xr[i] - mu) * r;
        dx[row * D + i] =
            plusAddend(T(r * (double(gr[i]) * w[i] - meanG - xhat * meanGx)), addend, row * D + i);
      }
      mean[row] = mu;
      rstd[row] = r;
    }
  });
  columnSums(pool, rows, D, dw, [&](int64_t row, int64_t i) {
    return double(dy[row * D + i]) * (x[row * D + i] - mean[row]) * rstd[row];
  });
  columnSums(pool, rows, D, db, [&](int64_t row, int64_t i) { return double(dy[row * D + i]); });
  return true;
}

// AttentionGrad. Per (b, query head h, query i), with kv head g as in the
// forward kernel and keys j visible as there (causal: j <= i + max(S-T, 0),
// and inside the sliding window if there is one; AttentionMask.h), from the
// forward's output o and logsumexp lse, with s_ij the forward's score
// (scale <q_i, k_j>, or its softcap c tanh(scale <q_i, k_j> / c)):
//   P_ij  = exp(s_ij - lse_i)                  (the forward's softmax)
//   delta_i = <dy_i, o_i>                      (= sum_j P_ij dP_ij, as o_i = sum_j P_ij v_j)
//   dP_ij = <dy_i, v_j>
//   dS_ij = P_ij (dP_ij - delta_i) (1 - (s_ij / c)^2 with a softcap)
//   dq_i  = scale sum_j dS_ij k_j
//   dk_j  = scale sum_{h in group(g), i} dS_ij q_i
//   dv_j  = sum_{h in group(g), i} P_ij dy_i
// Two passes, each owning its outputs (so no two threads add into the same
// row): pass 1 over query rows computes delta_i and dq; pass 2 over key rows
// (b, g, j) computes P_ij and dS_ij for the visible (h, i) in a fixed order
// and sums dk_j and dv_j. The dot products are computed once more than a
// single pass would need, in exchange for B * Hkv * S independent tasks.
// The saved statistics spare the softmax's max and sum over every row.
template <typename Elem>
bool attentionGradTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  // Either layout (AttentionLayout.h): rows are found through their strides.
  AttentionLayout layout = attentionLayout(*c.instr);
  std::vector<int64_t> qs = headsMajorDims(c.in[0].shape(), layout),
                       ks = headsMajorDims(c.in[1].shape(), layout),
                       vs = headsMajorDims(c.in[2].shape(), layout);
  int64_t B = qs[0], Hq = qs[1], T = qs[2], D = qs[3];
  int64_t Hkv = ks[1], S = ks[2], Dv = vs[3];
  int64_t group = Hq / Hkv;
  AttentionStrides qst = attentionStrides(qs, layout), kst = attentionStrides(ks, layout),
                   vst = attentionStrides(vs, layout),
                   ost = attentionStrides({B, Hq, T, Dv}, layout);
  AttentionMask mask = AttentionMask::of(*c.instr, T, S);
  double scale = mask.scale;
  const Elem *q = c.in[0].as<Elem>(), *k = c.in[1].as<Elem>(), *v = c.in[2].as<Elem>();
  const Elem *o = c.in[3].as<Elem>(), *lse = c.in[4].as<Elem>(), *dy = c.in[5].as<Elem>();
  Elem *dq = c.out[0].as<Elem>(), *dk = c.out[1].as<Elem>(), *dv = c.out[2].as<Elem>();
  auto dot = [](const Elem *a, const Elem *b, int64_t n) {
    double s = 0;
    for (int64_t d = 0; d < n; ++d) s += double(a[d]) * b[d];
    return s;
  };

  // Pass 1: delta_i per query row, and dq.
  std::vector<double> delta(static_cast<size_t>(B * Hq * T));
  pool.parallelFor(B * Hq * T, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(D));
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row % T, bh = row / T, b = bh / Hq, h = bh % Hq;
      int64_t g = h / group;
      const Elem *qi = q + qst.row(b, h, i), *dyi = dy + ost.row(b, h, i);
      double dlt = dot(dyi, o + ost.row(b, h, i), Dv);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = mask.firstKey(i); j < mask.endKey(i); ++j) {
        const Elem *kj = k + kst.row(b, g, j);
        double s = mask.score(dot(qi, kj, D));
        double p = std::exp(s - lse[row]);
        double ds = p * (dot(dyi, v + vst.row(b, g, j), Dv) - dlt) * mask.capSlope(s);
        for (int64_t d = 0; d < D; ++d) acc[d] += ds * kj[d];
      }
      Elem *dqi = dq + qst.row(b, h, i);
      for (int64_t d = 0; d < D; ++d) dqi[d] = Elem(scale * acc[d]);
      delta[row] = dlt;
    }
  });

  // Pass 2: dk, dv per key row, over the group's query heads in order.
  pool.parallelFor(B * Hkv * S, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> ak(static_cast<size_t>(D)), av(static_cast<size_t>(Dv));
    for (int64_t krow = begin; krow < end; ++krow) {
      int64_t j = krow % S, bg = krow / S, b = bg / Hkv, g = bg % Hkv;
      const Elem *kj = k + kst.row(b, g, j), *vj = v + vst.row(b, g, j);
      std::fill(ak.begin(), ak.end(), 0.0);
      std::fill(av.begin(), av.end(), 0.0);
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t i = mask.firstQuery(j); i < mask.endQuery(j); ++i) {
          int64_t row = (b * Hq + h) * T + i;
          const Elem *qi = q + qst.row(b, h, i), *dyi = dy + ost.row(b, h, i);
          double s = mask.score(dot(qi, kj, D));
          double p = std::exp(s - lse[row]);
          double ds = p * (dot(dyi, vj, Dv) - delta[row]) * mask.capSlope(s);
          for (int64_t d = 0; d < Dv; ++d) av[d] += p * dyi[d];
          for (int64_t d = 0; d < D; ++d) ak[d] += ds * qi[d];
        }
      Elem *dkj = dk + kst.row(b, g, j), *dvj = dv + vst.row(b, g, j);
      for (int64_t d = 0; d < D; ++d) dkj[d] = Elem(scale * ak[d]);
      for (int64_t d = 0; d < Dv; ++d) dvj[d] = Elem(av[d]);
    }
  });
  return true;
}

// RotaryGrad: the forward is y = x cos + rotate_half(x) sin, linear in x, so
//   dx = dy cos + rotate_half^T(dy sin),
//   rotate_half^T(z) = concat(z[..., D/2:], -z[..., :D/2]), i.e.
//   dx[d] = dy[d] cos[d] + dy[d + D/2] sin[d + D/2]   for d < D/2
//   dx[d] = dy[d] cos[d] - dy[d - D/2] sin[d - D/2]   for d >= D/2.
// cos and sin broadcast to dy as in the forward kernel.
template <typename T>
bool rotaryGradTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Tensor &dyT = c.in[0], &cosT = c.in[1], &sinT = c.in[2];
  const Shape &shape = dyT.shape();
  int64_t D = shape.back(), half = D / 2, rows = D ? dyT.numel() / D : 0;
  Shape rowShape(shape.begin(), shape.end() - 1);
  Shape cs = broadcastStrides(cosT.shape(), shape), ss = broadcastStrides(sinT.shape(), shape);
  int64_t cd = cs.back(), sd = ss.back(); // 0 when the table has one column
  cs.pop_back();
  ss.pop_back();
  const T *dy = dyT.as<T>(), *cp = cosT.as<T>(), *sp = sinT.as<T>();
  T *dx = c.out[0].as<T>();
  pool.parallelFor(rows, rowGrain(D), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *g = dy + r * D;
      const T *cr = cp + offsetOf(r, rowShape, cs), *sr = sp + offsetOf(r, rowShape, ss);
      T *o = dx + r * D;
      for (int64_t d = 0; d < half; ++d)
        o[d] = T(double(g[d]) * cr[d * cd] + double(g[d + half]) * sr[(d + half) * sd]);
      for (int64_t d = half; d < D; ++d)
        o[d] = T(double(g[d]) * cr[d * cd] - double(g[d - half]) * sr[(d - half) * sd]);
    }
  });
  return true;
}

// ActivationGrad: dx = f'(x) dy, elementwise, with
//   silu      f = x s,  s = sigmoid(x):     f' = s (1 + x (1 - s))
//   gelu erf  f = x Phi(x):                 f' = Phi(x) + x phi(x),
//             Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2/2) / sqrt(2 pi)
//   gelu tanh f = x (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3):
//             f' = (1 + tanh u) / 2 + x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 x^2) / 2
//   relu      f = max(x, 0):                dx = dy where x > 0, else 0 (PyTorch's
//             threshold_backward: a select, so an infinite dy does not become NaN)
template <typename T>
bool activationGradTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const T *x = c.in[0].as<T>(), *dy = c.in[1].as<T>();
  T *dx = c.out[0].as<T>();
  int kind = int(c.instr->ints[0]);
  constexpr double kSqrt2OverPi = 0.7978845608028654; // sqrt(2 / pi)
  constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)
  auto derivative = [kind](double v) {
    switch (kind) {
    case 0: return siluDerivative(v);
    // Phi(v) as erfc(-v / sqrt 2) / 2: 1 + erf cancels for negative v.
    // Below 1e-300 (v < -37) erfc and exp return subnormals, which libms
    // round differently; as +0 the CUDA backend gets the same bits.
    case 1: {
      double d = 0.5 * std::erfc(-v * M_SQRT1_2) + v * kInvSqrt2Pi * std::exp(-0.5 * v * v);
      return std::fabs(d) < 1e-300 ? 0.0 : d;
    }
    default: {
      double t = std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v));
      return 0.5 * (1.0 + t) +
             0.5 * v * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * v * v);
    }
    }
  };
  pool.parallelFor(c.out[0].numel(), 1 << 12, [&](int64_t begin, int64_t end) {
    if (kind == 3) {
      for (int64_t i = begin; i < end; ++i) dx[i] = x[i] > T(0) ? dy[i] : T(0);
      return;
    }
    for (int64_t i = begin; i < end; ++i) dx[i] = T(derivative(x[i]) * double(dy[i]));
  });
  return true;
}

// SwiGlu and its gradient, elementwise in double, rounded once per output:
//   y = silu(g) u,  silu(g) = g s,  s = sigmoid(g)
//   du = dy silu(g);  dg = dy u silu'(g),  silu'(g) = s (1 + g (1 - s))
template <typename T> void swiGluTyped(const KernelCall &c, ThreadPool &pool) {
  const T *g = c.in[0].as<T>(), *u = c.in[1].as<T>();
  T *y = c.out[0].as<T>();
  pool.parallelFor(c.out[0].numel(), 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = T(siluValue(g[i]) * double(u[i]));
  });
}

template <typename T> void swiGluGradTyped(const KernelCall &c, ThreadPool &pool) {
  const T *g = c.in[0].as<T>(), *u = c.in[1].as<T>(), *dy = c.in[2].as<T>();
  T *dg = c.out[0].as<T>(), *du = c.out[1].as<T>();
  pool.parallelFor(c.out[0].numel(), 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double d = dy[i];
      du[i] = T(d * siluValue(g[i]));
      dg[i] = T(d * double(u[i]) * siluDerivative(g[i]));
    }
  });
}

// SoftmaxGrad along one axis, given the forward output y:
//   dx_i = y_i (dy_i - sum_j dy_j y_j)
// The tensor is viewed as [outer, len, inner] lines as in runSoftmax.
template <typename T>
bool softmaxGradTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Shape &shape = c.in[0].shape();
  size_t axis = size_t(c.instr->ints[0]);
  int64_t outer = 1, len = shape[axis], inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const T *y = c.in[0].as<T>(), *dy = c.in[1].as<T>();
  T *dx = c.out[0].as<T>();
  pool.parallelFor(outer * inner, rowGrain(len), [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      int64_t base = (line / inner) * len * inner + line % inner;
      double dot = 0;
      for (int64_t i = 0; i < len; ++i) dot += double(dy[base + i * inner]) * y[base + i * inner];
      for (int64_t i = 0; i < len; ++i) {
        int64_t at = base + i * inner;
        dx[at] = T(double(y[at]) * (double(dy[at]) - dot));
      }
    }
  });
  return true;
}

// CrossEntropyGrad of loss = mean_n (logsumexp(x_n) - x_n[t_n]):
//   dx[n, v] = (softmax(x_n)[v] - [v == t_n]) dloss / N
// with the softmax shifted by the row max as in the forward kernel.
template <typename T>
bool crossEntropyGradTyped(const KernelCall &c, ThreadPool &pool, std::string &err) {
  const Tensor &logits = c.in[0], &targets = c.in[1];
  int64_t N = logits.shape()[0], V = logits.shape()[1];
  for (int64_t n = 0; n < N; ++n) {
    int64_t t = indexAt(targets, n);
    if (t < 0 || t >= V) {
      err = cat("target ", t, " at row ", n, " out of range [0, ", V, ")");
      return false;
    }
  }
  const Tensor &dloss = c.in[2];
  double g = dloss.dtype() == DType::F64 ? *dloss.as<double>() : double(*dloss.as<float>());
  double factor = g / double(N);
  const T *x = logits.as<T>();
  T *dx = c.out[0].as<T>();
  pool.parallelFor(N, rowGrain(V), [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const T *row = x + n * V;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
      int64_t t = indexAt(targets, n);
      for (int64_t v = 0; v < V; ++v)
        dx[n * V + v] = T((std::exp(row[v] - mx) / sum - (v == t ? 1.0 : 0.0)) * factor);
    }
  });
  return true;
}

} // namespace

// The entry points: f32 or f64 by the output dtype, the same code for both.
bool runEmbeddingGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return embeddingGradTyped<double>(c, pool, err);
  return embeddingGradTyped<float>(c, pool, err);
}

/// dx's rounded copy (storesRoundedDx: the last output): the executor
/// staged that bf16 buffer as f32 and rounds it back after the call, so the
/// copy is dx itself here, rounded as a Cast of dx would round it.
static void copyDx(const KernelCall &c) {
  if (storesRoundedDx(*c.instr))
    std::memcpy(c.out.back().data, c.out[0].data, c.out[0].desc->bytes);
}

bool runRmsNormGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return rmsNormGradTyped<double>(c, pool, err);
  bool ok = rmsNormGradTyped<float>(c, pool, err);
  copyDx(c);
  return ok;
}

bool runLayerNormGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return layerNormGradTyped<double>(c, pool, err);
  bool ok = layerNormGradTyped<float>(c, pool, err);
  copyDx(c);
  return ok;
}

bool runAttentionGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return attentionGradTyped<double>(c, pool, err);
  return attentionGradTyped<float>(c, pool, err);
}

bool runRotaryGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return rotaryGradTyped<double>(c, pool, err);
  return rotaryGradTyped<float>(c, pool, err);
}

bool runActivationGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return activationGradTyped<double>(c, pool, err);
  return activationGradTyped<float>(c, pool, err);
}

bool runSwiGlu(const KernelCall &c, ThreadPool &pool, std::string &) {
  if (c.out[0].dtype() == DType::F64)
    swiGluTyped<double>(c, pool);
  else
    swiGluTyped<float>(c, pool);
  return true;
}

bool runSwiGluGrad(const KernelCall &c, ThreadPool &pool, std::string &) {
  if (c.out[0].dtype() == DType::F64)
    swiGluGradTyped<double>(c, pool);
  else
    swiGluGradTyped<float>(c, pool);
  return true;
}

bool runSoftmaxGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return softmaxGradTyped<double>(c, pool, err);
  return softmaxGradTyped<float>(c, pool, err);
}

bool runCrossEntropyGrad(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out.size() == 2) { // the fused loss first: CrossEntropy's kernel, its bits
    KernelCall loss{c.instr, {c.in[0], c.in[1]}, {c.out[1]}};
    if (!runCrossEntropy(loss, pool, err))
      return false;
  }
  if (c.out[0].dtype() == DType::F64)
    return crossEntropyGradTyped<double>(c, pool, err);
  return crossEntropyGradTyped<float>(c, pool, err);
}

// SliceGrad: out = 0, then out[start_d + i_d step_d ...] = dy[i ...] for
// every index i of dy. Steps are nonzero, so the positions are distinct and
// a plain store (no add) is the adjoint of Slice. Any dtype: zero is all
// zero bytes in every dtype, and elements move as raw words.
namespace {
template <typename Word>
void scatterTyped(const Tensor &dy, const Tensor &out, int64_t base, const Shape &outStrides,
                  ThreadPool &pool) {
  const Shape &shape = dy.shape();
  StridedLoop loop(shape, {contiguousStrides(shape), outStrides});
  int64_t n = loop.innerSize(), s = loop.innerStride(1);
  const Word *src = dy.as<Word>();
  Word *dst = out.as<Word>() + base;
  loop.forEachRow(pool, [&](int64_t row) {
    const Word *x = src + loop.rowOffset(0, row);
    Word *y = dst + loop.rowOffset(1, row);
    for (int64_t i = 0; i < n; ++i) y[i * s] = x[i];
  });
}
} // namespace

bool runSliceGrad(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Tensor &dy = c.in[0], &out = c.out[0];
  std::memset(out.data, 0, out.desc->bytes);
  if (dy.numel() == 0) // an empty window may start anywhere
    return true;
  Shape own = contiguousStrides(out.shape()), strides;
  int64_t base = 0;
  for (size_t d = 0; d < own.size(); ++d) {
    base += c.instr->ints[2 * d] * own[d];
    strides.push_back(c.instr->ints[2 * d + 1] * own[d]);
  }
  switch (dtypeSize(out.dtype())) {
  case 1: scatterTyped<uint8_t>(dy, out, base, strides, pool); break;
  case 2: scatterTyped<uint16_t>(dy, out, base, strides, pool); break;
  case 4: scatterTyped<uint32_t>(dy, out, base, strides, pool); break;
  case 8: scatterTyped<uint64_t>(dy, out, base, strides, pool); break;
  }
  return true;
}

// AdamW with PyTorch semantics (torch.optim.AdamW, no amsgrad), with
// t = step + 1 and lr, step read from rank-0 buffers at run time:
//   p' = p (1 - lr wd)                                  decoupled decay
//   m' = b1 m + (1 - b1) g
//   v' = b2 v + (1 - b2) g^2
//   p' = p' - lr / (1 - b1^t) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps)
// Each element is computed in f32, one rounding per operation in this
// order (AdamWMath.h; the CUDA kernels share the function, so both
// backends give the same bits), as PyTorch's fused AdamW does in f32: the
// double arithmetic this replaced made the GPU kernel compute-bound (13.2 ms
// against 9.8 ms in f32 for 1.24e9 parameters on an H200,
// bench/gpu/elementwise_bench.cu). With a seventh input (the clip
// coefficient) g is first the f32 product g * scale, the value a Mul in
// front of AdamW would have stored. Its kept outputs
// (RoundedCopies.h): the rounded copy of p', and max |p'| as the unsigned
// maximum of fp8AbsBits(p'[i]) (exact in any order, so the chunks' maxima
// combine atomically), what Fp8Scale would find reading p' next run.
bool runAdamW(const KernelCall &c, ThreadPool &pool, std::string &) {
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>();
  bool scaled = c.in.size() > 6;
  float scale = scaled ? *c.in[6].as<float>() : 1.0f;
  const float *m = c.in[2].as<float>(), *v = c.in[3].as<float>();
  const AdamWScalars k = adamwScalars(*c.in[4].as<float>(), *c.in[5].as<float>(),
                                      c.instr->floats[0], c.instr->floats[1],
                                      c.instr->floats[2], c.instr->floats[3]);
  float *po = c.out[0].as<float>(), *mo = c.out[1].as<float>(), *vo = c.out[2].as<float>();
  // The rounded copy (RoundedCopies.h): staged as f32 scratch that the
  // executor rounds to bf16 after the kernel, as a Cast would.
  float *copy = adamwKeepsCopy(*c.instr) ? c.out[3].as<float>() : nullptr;
  float *amax = adamwKeepsAmax(*c.instr) ? c.out.back().as<float>() : nullptr;
  std::atomic<uint32_t> amaxBits{0};
  pool.parallelFor(c.in[0].numel(), 1 << 12, [&](int64_t begin, int64_t end) {
    uint32_t chunkMax = 0;
    for (int64_t i = begin; i < end; ++i) {
      float pi = p[i], mi = m[i], vi = v[i];
      adamwElement(k, scaled ? g[i] * scale : g[i], pi, mi, vi);
      po[i] = pi;
      if (copy)
        copy[i] = pi;
      if (amax)
        chunkMax = std::max(chunkMax, fp8AbsBits(pi));
      mo[i] = mi;
      vo[i] = vi;
    }
    uint32_t seen = amaxBits.load();
    while (chunkMax > seen && !amaxBits.compare_exchange_weak(seen, chunkMax)) {
    }
  });
  if (amax)
    amax[0] = fp8BitsFloat(amaxBits.load());
  return true;
}

} // namespace loom::rt
