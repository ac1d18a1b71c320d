//===- AttentionMask.h - Which keys a query sees, and the score cap -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The Attention and AttentionGrad instructions' masking and score rule
// (Program.h), shared by the CPU forward and backward kernels. With
// offset = max(S - T, 0), query i sees key j when
//   j <= i + offset                (causal)
//   j > i + offset - window        (a sliding window, window > 0)
// and scores it s = scale q.k, or s = softcap tanh(scale q.k / softcap)
// with a softcap. The backward multiplies dS by ds/d(scale q.k) =
// 1 - (s / softcap)^2 at the capped score s.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPU_ATTENTIONMASK_H
#define LOOM_RUNTIME_CPU_ATTENTIONMASK_H

#include "loom/runtime/Program.h"

#include <algorithm>
#include <cmath>

namespace loom::rt {

struct AttentionMask {
  bool causal = false;
  int64_t window = 0, offset = 0, T = 0, S = 0;
  double scale = 1, softcap = 0;

  static AttentionMask of(const Instr &I, int64_t T, int64_t S) {
    AttentionMask m;
    m.causal = I.ints[0] != 0;
    m.window = I.ints.size() > 2 ? I.ints[2] : 0;
    m.scale = I.floats[0];
    m.softcap = I.floats.size() > 1 ? I.floats[1] : 0;
    m.T = T;
    m.S = S;
    m.offset = S > T ? S - T : 0;
    return m;
  }
  /// Query i sees keys [firstKey(i), endKey(i)).
  int64_t firstKey(int64_t i) const {
    return window > 0 ? std::clamp<int64_t>(i + offset - window + 1, 0, S) : 0;
  }
  int64_t endKey(int64_t i) const { return causal ? std::min(S, i + offset + 1) : S; }
  /// Key j is seen by queries [firstQuery(j), endQuery(j)).
  int64_t firstQuery(int64_t j) const { return causal ? std::max<int64_t>(0, j - offset) : 0; }
  int64_t endQuery(int64_t j) const {
    return window > 0 ? std::clamp<int64_t>(j - offset + window, 0, T) : T;
  }
  /// The score of a raw product q.k.
  double score(double dot) const {
    double s = scale * dot;
    return softcap > 0 ? softcap * std::tanh(s / softcap) : s;
  }
  /// d score / d (scale q.k) at score s.
  double capSlope(double s) const {
    if (softcap <= 0)
      return 1;
    double t = s / softcap;
    return 1 - t * t;
  }
};

} // namespace loom::rt

#endif
