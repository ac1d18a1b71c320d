//===- FoldWeightAmax.h - AdamW finds the next step's weight amax -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// An fp8 tensorwise step scales each quantized weight from max |p| of the
// f32 parameter input p: an Fp8Scale over p, one more read of 4 bytes per
// parameter every step. The step's AdamW computes the next p anyway; this
// fold makes it also find max |p'| of the value it stores, as its last
// output a ([1, 1] f32, ints = [1]; runtime/include/loom/runtime/
// RoundedCopies.h), and the Fp8Scale reads a instead of p: the next run's
// scale comes from that one value. The maximum of the same f32 values'
// magnitude bits, so the scale does not change. Runs on the lowered
// program after the in-place updates are planned and before the arena is:
// a must then live for the whole run.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_FOLDWEIGHTAMAX_H
#define LOOM_CODEGEN_FOLDWEIGHTAMAX_H

#include "loom/runtime/Program.h"

namespace loom {

/// Points every tensorwise Fp8Scale of a parameter that AdamW updates in
/// place (reading it before that AdamW) at an amax the AdamW keeps.
/// Returns the number of Fp8Scale instructions that no longer read a
/// parameter.
int64_t foldWeightAmax(rt::Program &p);

} // namespace loom

#endif
