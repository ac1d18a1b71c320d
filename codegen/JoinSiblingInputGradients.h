//===- JoinSiblingInputGradients.h - Sibling projections' dx as one GEMM -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Projections that read the same activations (a SwiGLU block's gate and
// up; attention's q, k and v) each have an input gradient, and the step
// sums them: dx = dg Wg^T + du Wu^T, one GEMM per sibling, the second
// accumulating into the first's f32 result (an addend, read and written
// again). As one product, dx = [dg | du] [Wg | Wu]^T is a single GEMM over
// K = the siblings' widths together: no addend pass, and a K wide enough
// for the tensor cores (bench/gpu/sibling_gemm_bench.cu, H200: gate/up's
// dx 0.688 -> 0.628 ms a layer at Llama-3.2-1B's shape).
//
// That needs the siblings' gradients side by side in one [rows, sum of
// widths] buffer and their weights' bf16 copies side by side in one
// [in, sum of widths] buffer. This pass makes each a column block of such
// a base (Program.h, BufferView): the instruction that writes a gradient
// writes its block in place (SwiGluGrad), each weight's rounding lands in
// its block (AdamW's kept copy, or the forward's Cast where the step keeps
// its casts: either way, so that which one the step keeps, which changes no
// bit, does not decide the join), and every GEMM that read one sibling
// reads its block through the leading dimension. The chained GEMMs become
// one, at the last one's place.
//
// A chain joins only when every reader and writer of the gradients and
// copies is a slot that takes column blocks (columnBlockSlot), the
// gradients have one writer each, the widths are multiples of 8, and
// nothing between the first GEMM and the last writes what the joined one
// reads. Programs with collectives or fp8 GEMMs are left alone. Runs on
// the lowered program after the weight-rounding fold and the reshape
// views, before placement. q, k and v would join the same way once
// rotary_grad and attention_grad write blocks (their dx GEMMs are 1.2 ms
// of llama-1b's step, bench/gpu/sibling_gemm_bench.cu). The sum's order changes (one accumulation
// over all of K), so the bits do too, within the GEMMs' rounding.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_JOINSIBLINGINPUTGRADIENTS_H
#define LOOM_CODEGEN_JOINSIBLINGINPUTGRADIENTS_H

#include "loom/runtime/Program.h"

namespace loom {

/// Joins each chain of sibling input-gradient GEMMs into one. Returns how
/// many GEMMs it removed.
int64_t joinSiblingInputGradients(rt::Program &p);

} // namespace loom

#endif
