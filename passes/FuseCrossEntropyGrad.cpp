//===- FuseCrossEntropyGrad.cpp - The loss and dlogits in one pass -------===//
//
// Part of loom, under the Apache License v2.0.
//
// The training step computes the loss and, right after it, the logits'
// gradient: (softmax(x) - onehot(t)) dloss / N. Both kernels first find
// each row's max and sum of exp(x - max), so the logits, [tokens,
// vocabulary] and the step's largest activation (2 GiB in bf16 for
// Llama-3.2-1B at 8,192 tokens), are read three times: once for the loss,
// twice for the gradient. cross_entropy_with_grad reads them twice: the
// row statistics once, for both the loss term and the gradient, then each
// element again to write its gradient.
//
// The fused op stands where the loss was, so its loss gradient must exist
// there. In a built step that gradient is the backward's seed: a constant,
// or a product of constants under tensor parallelism, which moves up to
// the loss; a seed computed from the loss or anything after it leaves the
// pair alone.
// Exact: both kernels' statistics come from the same row reduction, so
// the fused op gives the loss and gradient bits of the pair.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"
#include "passes/PatternUtils.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSECROSSENTROPYGRAD
#include "passes/Passes.h.inc"

namespace {

/// Makes `v` available before `at`: it already is, or it is computed by
/// side-effect-free ops (chains at most `budget` deep) from values that
/// are, and those ops move up in front of `at`. The seed is such a chain:
/// a constant, or under tensor parallelism 1 * (1 / tp), made where the
/// backward starts.
bool hoistAbove(Value v, Operation *at, int budget) {
  if (availableAt(v, at))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || def == at || def->getBlock() != at->getBlock() || budget <= 0 ||
      def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return false;
  for (Value operand : def->getOperands())
    if (!hoistAbove(operand, at, budget - 1))
      return false;
  def->moveBefore(at);
  return true;
}

struct FuseCrossEntropyGradPass : impl::FuseCrossEntropyGradBase<FuseCrossEntropyGradPass> {
  void runOnOperation() override {
    SmallVector<CrossEntropyGradOp> grads;
    getOperation().walk([&](CrossEntropyGradOp g) { grads.push_back(g); });
    for (CrossEntropyGradOp grad : grads) {
      CrossEntropyOp loss;
      for (Operation *user : grad.getLogits().getUsers())
        if (auto ce = dyn_cast<CrossEntropyOp>(user);
            ce && ce.getTargets() == grad.getTargets() && ce->getBlock() == grad->getBlock() &&
            ce->isBeforeInBlock(grad))
          loss = ce;
      if (!loss || !hoistAbove(grad.getLossGrad(), loss, /*budget=*/8))
        continue;
      OpBuilder b(loss);
      auto fused = b.create<CrossEntropyWithGradOp>(loss.getLoc(), grad.getLogits(),
                                                    grad.getTargets(), grad.getLossGrad());
      loss.getResult().replaceAllUsesWith(fused.getLoss());
      grad.getResult().replaceAllUsesWith(fused.getLogitsGrad());
      loss.erase();
      grad.erase();
    }
  }
};

} // namespace
} // namespace loom
