//===- FuseAddRmsNorm.cpp - A residual add and the norm that reads it ----===//
//
// Part of loom, under the Apache License v2.0.
//
// A pre-norm decoder layer ends each sublayer with the residual add
//   h = h_prev + sublayer(...)
// and starts the next with rms_norm(h, w). Apart, the add reads two
// [tokens, hidden] tensors and writes h, and the norm reads h back: in
// bf16 training h is f32 and the sublayer's output bf16, so 16 bytes an
// element move where 12 do when one kernel adds, stores h and normalizes
// it from its registers (llama-1b: two per layer, 0.046 ms for each add
// on an H200).
//
// The fused op stands where the add was (the weight is an argument of the
// step, defined before it), its sum replaces the add's result for the
// other readers and its norm the rms_norm's. Where several norms read one
// add (recompute's clones), the first fuses and the rest read the sum.
// Exact: the sum is rounded to its type as the add did and the norm reads
// those values.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"
#include "passes/PatternUtils.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEADDRMSNORM
#include "passes/Passes.h.inc"

namespace {

struct FuseAddRmsNormPass : impl::FuseAddRmsNormBase<FuseAddRmsNormPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      if (!isSameTypeWideSum(add))
        continue;
      RmsNormOp norm;
      for (Operation *user : add.getResult().getUsers())
        if (auto n = dyn_cast<RmsNormOp>(user);
            n && n.getInput() == add.getResult() && n->getBlock() == add->getBlock() &&
            n.getResult().getType() == add.getType() && availableAt(n.getWeight(), add) &&
            (!norm || n->isBeforeInBlock(norm)))
          norm = n;
      if (!norm)
        continue;
      OpBuilder b(add);
      auto fused = b.create<AddRmsNormOp>(add.getLoc(), add.getLhs(), add.getRhs(),
                                          norm.getWeight(), norm.getEpsilonAttr());
      add.getResult().replaceAllUsesWith(fused.getSum());
      norm.getResult().replaceAllUsesWith(fused.getResult());
      norm.erase();
      add.erase();
    }
  }
};

} // namespace
} // namespace loom
