//===- AttentionLayout.h - Where attention's operands keep heads -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Attention and AttentionGrad (Program.h) read their q, k, v, o and dy in
// one of two layouts, named by ints[3]:
//   heads-major  (0, the default): q [B, Hq, T, D], k and v [B, Hkv, S, D];
//   tokens-major (1):              q [B, T, Hq, D], k and v [B, S, Hkv, D].
// Tokens-major is what a projection's [B, T, H * D] result is once reshaped,
// so an attention that reads it needs no transpose on either side of it
// (the FoldAttentionTransposes pass makes that choice). lse is [B, Hq, T]
// in both. Kernels see every operand through its heads-major dims and the
// element strides of (batch, head, token) below; the head dim is always
// contiguous.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ATTENTIONLAYOUT_H
#define LOOM_RUNTIME_ATTENTIONLAYOUT_H

#include "loom/runtime/Program.h"

#include <cstdint>
#include <vector>

namespace loom::rt {

enum class AttentionLayout : int64_t { HeadsMajor = 0, TokensMajor = 1 };

/// The layout attention instruction `I` names (ints[3]; heads-major without it).
inline AttentionLayout attentionLayout(const Instr &I) {
  return I.ints.size() > 3 && I.ints[3] == 1 ? AttentionLayout::TokensMajor
                                             : AttentionLayout::HeadsMajor;
}

/// `s` (an operand's stored rank-4 shape) as heads-major dims [B, H, T, D]:
/// tokens-major swaps dims 1 and 2. Other ranks are returned as they are.
inline std::vector<int64_t> headsMajorDims(const std::vector<int64_t> &s, AttentionLayout l) {
  std::vector<int64_t> d = s;
  if (l == AttentionLayout::TokensMajor && d.size() == 4)
    std::swap(d[1], d[2]);
  return d;
}

/// Element strides of batch, head and token for an operand whose
/// heads-major dims are `dims` ([B, H, T, D]) and whose storage is `l`.
struct AttentionStrides {
  int64_t batch = 0, head = 0, token = 0;
  /// The offset of row (b, h, t): its D values follow contiguously.
  int64_t row(int64_t b, int64_t h, int64_t t) const { return b * batch + h * head + t * token; }
};

inline AttentionStrides attentionStrides(const std::vector<int64_t> &dims, AttentionLayout l) {
  int64_t H = dims[1], T = dims[2], D = dims[3];
  if (l == AttentionLayout::TokensMajor)
    return {T * H * D, D, H * D};
  return {H * T * D, T * D, D};
}

} // namespace loom::rt

#endif
