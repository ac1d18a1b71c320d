//===- FoldWeightRounding.h - AdamW stores the next step's bf16 weights -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A bf16 step rounds every f32 master weight to bf16 where its GEMMs read
// it: y = Cast(p: f32 -> bf16) of the parameter input p, each step, one
// more pass over 6 bytes per parameter. The step's AdamW computes the next
// p anyway; this fold makes it store that value a second time, rounded,
// as its fourth output y (runtime/include/loom/runtime/RoundedCopies.h):
// the next run reads y as it was left, and the Cast is gone. The rounding
// is the same round-to-nearest-even of the same f32 value, so the bits do
// not change. Runs on the lowered program after the in-place updates are
// planned and before the arena is: y must then live for the whole run.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_FOLDWEIGHTROUNDING_H
#define LOOM_CODEGEN_FOLDWEIGHTROUNDING_H

#include "loom/runtime/Program.h"

namespace loom {

/// Folds each parameter's rounding Cast into the AdamW that updates the
/// parameter in place, where every reader of the rounded value runs before
/// that AdamW. Returns the number of casts removed.
int64_t foldWeightRounding(rt::Program &p);

} // namespace loom

#endif
