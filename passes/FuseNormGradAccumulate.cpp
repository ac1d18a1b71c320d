//===- FuseNormGradAccumulate.cpp - Residual gradient sums into norm grads -===//
//
// Part of loom, under the Apache License v2.0.
//
// A pre-norm decoder layer reads its residual stream twice: the skip
// connection and the norm in front of attention (or the MLP). The backward
// therefore sums two gradients of the stream,
//   dh_in = dh_out + rms_norm_grad(h_in, w, dy).dx
// as an add of two f32 [tokens, hidden] tensors: three passes over memory
// (two reads, one write), twice per layer. The norm's gradient kernel holds
// each dx element in a register just before it stores it, so reading dh_out
// there and storing the sum costs one read and saves two passes.
//
// Exact: the kernel rounds dx to its type as before, then adds the addend
// in that type and rounds once more, which is what the add did. Only the
// norm's dx read by this add alone, with the add's type, fuses; the addend
// must already exist where the norm's gradient runs (in the backward it
// does: it is the gradient from the layers above), so the fused op takes
// the norm gradient's place and dw keeps its readers.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"
#include "passes/PatternUtils.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSENORMGRADACCUMULATE
#include "passes/Passes.h.inc"

namespace {

/// The norm gradient (without an addend) whose dx is `v`, read only here,
/// or null.
Operation *normGradOf(Value v) {
  Operation *op = v.getDefiningOp();
  if (!isa_and_nonnull<RmsNormGradOp, LayerNormGradOp>(op) || !v.hasOneUse() ||
      cast<OpResult>(v).getResultNumber() != 0)
    return nullptr;
  // Both ops take input, weight, output_grad, then the optional addend.
  return op->getNumOperands() == 3 ? op : nullptr;
}

/// add(x, norm_grad(...).dx) -> norm_grad(..., accumulate x): x becomes the
/// norm gradient's trailing optional operand, in place.
struct FuseNormGradAccumulatePass
    : impl::FuseNormGradAccumulateBase<FuseNormGradAccumulatePass> {
  void runOnOperation() override {
    foldAddsIntoProducers(getOperation(), normGradOf, [](Operation *grad, Value addend) {
      grad->insertOperands(grad->getNumOperands(), addend);
    });
  }
};

} // namespace
} // namespace loom
