//===- FusedAttentionEligibility.h - Which attention runs fused -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Whether an attention instruction can run on fused bf16 flash-attention
// engines (cuDNN's SDPA on the CUDA backend, CudnnAttentionLaunch.cu), and
// if not, why. It is a property of the program, not of the device, so it
// lives here: `loom train --print-program-stats` reports it and tests check
// it without a GPU. The engines compute in bf16 with f32 accumulation, so
// an instruction qualifies when autocast marked its q, k, v (and dy) as
// bf16 values (the bf16_operands flag; their storage may be bf16 or f32),
// the mask is plain causal with as many keys as queries (no sliding window,
// no softcap), and q, k, v are [B, H, T, D] in heads-major terms (either
// layout, AttentionLayout.h) with kv heads dividing query heads. Whether
// the engines accept the head dim and sizes is the device's word, asked
// when the plan is built.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_FUSEDATTENTIONELIGIBILITY_H
#define LOOM_RUNTIME_FUSEDATTENTIONELIGIBILITY_H

#include "loom/runtime/Program.h"

#include <string>

namespace loom::rt {

/// An attention as the fused engines see it: q [B, Hq, T, D], k and v
/// [B, Hkv, T, D] in heads-major terms, stored heads-major or (`tokensMajor`)
/// as q [B, T, Hq, D], k and v [B, T, Hkv, D] (AttentionLayout.h).
struct FusedAttentionShape {
  int64_t B = 0, Hq = 0, Hkv = 0, T = 0, D = 0;
  float scale = 1.f;
  bool tokensMajor = false;
};

struct FusedAttentionCheck {
  bool eligible = false;
  /// Set with `eligible`.
  FusedAttentionShape shape;
  /// Why not, one phrase ("" when eligible).
  std::string why;
  /// The refusal is the expected one of an f32 computation: no bf16 values
  /// anywhere in the program (--precision fp32), so exact f32 kernels are
  /// what was asked for. Every other refusal in a program that holds bf16
  /// values is worth saying: it is usually a pass that lost autocast's mark.
  bool f32Program = false;
};

/// The verdict on instruction `I` of `p`; `I` must be an Attention or
/// AttentionGrad (anything else is refused, saying so).
FusedAttentionCheck checkFusedAttention(const Program &p, const Instr &I);

} // namespace loom::rt

#endif
