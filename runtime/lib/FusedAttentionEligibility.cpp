//===- FusedAttentionEligibility.cpp - Which attention runs fused ---------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/FusedAttentionEligibility.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/AttentionLayout.h"

#include <algorithm>

namespace loom::rt {
namespace {

/// Whether any buffer of `p` is bf16 storage: autocast ran on it.
bool holdsBf16(const Program &p) {
  return std::any_of(p.buffers.begin(), p.buffers.end(),
                     [](const BufferDesc &b) { return b.dtype == DType::BF16; });
}

FusedAttentionCheck refuse(std::string why) {
  FusedAttentionCheck c;
  c.why = std::move(why);
  return c;
}

} // namespace

FusedAttentionCheck checkFusedAttention(const Program &p, const Instr &I) {
  // The signatures that carry the forward's lse (the engines' statistics):
  // Attention -> (o, lse), AttentionGrad (q, k, v, o, lse, dy) -> (dq, dk, dv).
  if (I.op != OpCode::Attention && I.op != OpCode::AttentionGrad)
    return refuse(cat(opcodeName(I.op), " is not an attention"));
  if (I.op == OpCode::Attention ? I.out.size() != 2 : I.in.size() != 6)
    return refuse("not the signature with the forward's lse statistics");
  if (I.floats.empty())
    return refuse("no scale");
  // The engines bind either layout in place (strides): the checks and the
  // shape are in heads-major terms.
  AttentionLayout layout = attentionLayout(I);
  const std::vector<int64_t> qs = headsMajorDims(p.buffers[I.in[0]].shape, layout),
                             ks = headsMajorDims(p.buffers[I.in[1]].shape, layout),
                             vs = headsMajorDims(p.buffers[I.in[2]].shape, layout);
  // bf16_operands (Program.h): the products may run on bf16; without it
  // they must be exact f32 products.
  if (I.ints.size() < 2 || I.ints[1] == 0) {
    FusedAttentionCheck c = refuse("q, k, v are not marked as bf16 values (bf16_operands = 0)");
    c.f32Program = !holdsBf16(p);
    return c;
  }
  if (I.ints[0] == 0)
    return refuse("not causal");
  // The engines' graph (CudnnAttention.cpp) is plain causal.
  if (I.ints.size() > 2 && I.ints[2] != 0)
    return refuse(cat("a sliding window of ", I.ints[2]));
  if (I.floats.size() > 1)
    return refuse(cat("a softcap of ", I.floats[1]));
  if (qs.size() != 4 || ks.size() != 4 || vs.size() != 4)
    return refuse(cat("q, k, v of rank ", qs.size(), ", ", ks.size(), ", ", vs.size(),
                      " (not [B, H, T, D])"));
  if (vs != ks)
    return refuse(cat("v ", shapeStr(vs), " unlike k ", shapeStr(ks)));
  if (ks[0] != qs[0] || ks[2] != qs[2])
    return refuse(cat("keys ", shapeStr(ks), " not as many as queries ", shapeStr(qs)));
  if (ks[3] != qs[3])
    return refuse(cat("head dims ", qs[3], " (q) and ", ks[3], " (k)"));
  if (ks[1] == 0 || qs[1] % ks[1] != 0)
    return refuse(cat(ks[1], " kv heads do not divide ", qs[1], " query heads"));
  FusedAttentionCheck c;
  c.eligible = true;
  c.shape = {qs[0], qs[1], ks[1], qs[2], qs[3], float(I.floats[0]),
             layout == AttentionLayout::TokensMajor};
  return c;
}

} // namespace loom::rt
