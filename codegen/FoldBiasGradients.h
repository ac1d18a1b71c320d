//===- FoldBiasGradients.h - Bias gradients from the weight-gradient GEMM -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Under autocast a biased projection y = x W + b has three gradients from
// one dy: dx, dW = x^T dy, and db = the column sums of dy, rounded to bf16
// (the bias was cast to bf16 for the addmm). Lowered one to one, db is a
// Reduce (bf16 dy -> f32 [1.., N]) and a Cast to bf16: a second full read
// of dy (4.7 ms of gpt2-large's step, a GEMM's worth) and a launch for a
// few kilobytes. The weight-gradient GEMM reads dy anyway, as its B
// operand [K, N]; cuBLASLt sums B over K in its epilogue (BGRADA: its A is
// our B). This fold gives that MatMul the rounded sums as a second output
// (Program.h, MatMul ints [transA, transB, 1]) and drops the Reduce and the
// Cast. The CPU backend sums in the Reduce's order and rounds twice as
// Reduce and Cast did, so its bits do not change. Runs on the lowered
// program after foldBf16Casts and before reshapes become views.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_FOLDBIASGRADIENTS_H
#define LOOM_CODEGEN_FOLDBIASGRADIENTS_H

#include "loom/runtime/Program.h"

namespace loom {

/// Folds each Reduce (sum over every dim but the last) + Cast (f32 ->
/// bf16) of a bf16 MatMul's B operand into that MatMul. Returns how many
/// pairs it removed.
int64_t foldBiasGradients(rt::Program &p);

} // namespace loom

#endif
