//===- FoldNormGradRounding.h - Norm gradients store dx's bf16 copy -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Under autocast a norm gradient's dx is both the residual stream's f32
// gradient (the next norm gradient's addend) and, rounded, an operand of
// the bf16 GEMMs of the layer below: y = Cast(dx: f32 -> bf16). Two
// readers, so foldBf16Casts' producer fold cannot apply, and the Cast
// reads dx back (6 bytes an element) right after the norm gradient wrote
// it. This fold makes the norm gradient store dx a second time, rounded,
// as one more output (Program.h, storesRoundedDx: 2 bytes an element from
// the registers dx was stored from). Same value, same rounding, so the
// bits do not change. Runs on the lowered program after foldBf16Casts and
// before fp8 amax outputs are fused.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_FOLDNORMGRADROUNDING_H
#define LOOM_CODEGEN_FOLDNORMGRADROUNDING_H

#include "loom/runtime/Program.h"

namespace loom {

/// Folds each f32 -> bf16 Cast of a norm gradient's dx whose readers are
/// all bf16 GEMMs (or a bias gradient's column sum) into that norm
/// gradient. Returns the number of casts removed.
int64_t foldNormGradRounding(rt::Program &p);

} // namespace loom

#endif
