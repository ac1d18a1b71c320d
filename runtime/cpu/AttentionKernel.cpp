//===- AttentionKernel.cpp - Causal grouped-query attention ---------------===//
//
// Part of loom, under the Apache License v2.0.
//
// q[B, Hq, T, D], k[B, Hkv, S, D], v[B, Hkv, S, Dv] -> o[B, Hq, T, Dv],
// lse[B, Hq, T], or the same tensors tokens-major (q[B, T, Hq, D] ...,
// AttentionLayout.h): rows are found through their strides, so both
// layouts give the same bits. For batch b, query head h and query position i, with kv
// head g = h / (Hq / Hkv) (consecutive query heads share one kv head):
//   s_j = scale * <q[b,h,i], k[b,g,j]>            for visible keys j
//   m = max_j s_j,  l = sum_j exp(s_j - m)
//   o[b,h,i] = sum_j exp(s_j - m) v[b,g,j] / l,  lse[b,h,i] = m + log l
// Key j is visible to query i unless causal and j > i + (S - T) (the offset
// applies when S > T: the queries are the last T of S positions), or, with
// a sliding window w, j <= i + (S - T) - w; a softcap c scores
// s_j = c tanh(scale <q, k_j> / c) (AttentionMask.h). A row
// with no visible key (S == 0) gets o = 0 and lse = +inf, so that the
// backward's exp(s - lse) is 0 there too.
// Subtracting the max keeps exp() <= 1. Dot products, the softmax and the
// weighted sum of values all accumulate in double; o and lse are rounded
// once.
// Work is split over (b, h, i) rows; causal rows differ in length, which
// the pool's dynamic chunks balance.
//===----------------------------------------------------------------------===//
#include "cpu/AttentionMask.h"
#include "cpu/Kernels.h"
#include "loom/runtime/AttentionLayout.h"

#include <algorithm>
#include <cmath>

namespace loom::rt {

namespace {

template <typename Elem>
bool attentionTyped(const KernelCall &c, ThreadPool &pool, std::string &) {
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
  const Elem *q = c.in[0].as<Elem>(), *k = c.in[1].as<Elem>(), *v = c.in[2].as<Elem>();
  Elem *o = c.out[0].as<Elem>(), *lse = c.out[1].as<Elem>();

  pool.parallelFor(B * Hq * T, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> p(static_cast<size_t>(S)), acc(static_cast<size_t>(Dv));
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row % T, bh = row / T, b = bh / Hq, h = bh % Hq;
      int64_t g = h / group;
      const Elem *qi = q + qst.row(b, h, i);
      Elem *oi = o + ost.row(b, h, i);
      int64_t first = mask.firstKey(i), end = mask.endKey(i);
      bool visible = first < end;

      double mx = -INFINITY;
      for (int64_t j = first; j < end; ++j) {
        const Elem *kj = k + kst.row(b, g, j);
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(qi[d]) * kj[d];
        p[j] = mask.score(dot);
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = first; j < end; ++j) sum += p[j] = std::exp(p[j] - mx);

      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = first; j < end; ++j) {
        const Elem *vj = v + vst.row(b, g, j);
        for (int64_t d = 0; d < Dv; ++d) acc[d] += p[j] * vj[d];
      }
      // No visible key (S == 0): an empty softmax; write zeros, not 0/0.
      double inv = visible ? 1.0 / sum : 0.0;
      for (int64_t d = 0; d < Dv; ++d) oi[d] = Elem(acc[d] * inv);
      lse[row] = visible ? Elem(mx + std::log(sum)) : Elem(INFINITY);
    }
  });
  return true;
}

} // namespace

// The entry points: f32 or f64 by the output dtype, the same code for both.
bool runAttention(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.out[0].dtype() == DType::F64)
    return attentionTyped<double>(c, pool, err);
  return attentionTyped<float>(c, pool, err);
}

} // namespace loom::rt
