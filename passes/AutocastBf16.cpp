//===- AutocastBf16.cpp - bf16 compute for matmul and attention -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// torch.autocast(bfloat16) runs matmuls and attention in bf16 and keeps
// norms, softmax, the loss and the optimizer in f32. We express that with
// explicit rounding: x -> cast(bf16) -> cast(f32) on each operand and on the
// result. Keeping the op itself in f32 lets every backend run the graph
// (the CPU reference accumulates in f32, as bf16 GEMMs do with an f32
// accumulator); a GPU backend can fuse the casts into a bf16 kernel. The
// casts are ordinary ops, so autodiff rounds the gradients flowing through
// them to bf16 too, like bf16 backward GEMMs.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_AUTOCASTBF16
#include "passes/Passes.h.inc"

namespace {

/// round_bf16(v): f32 -> bf16 -> f32 (round to nearest even).
Value roundToBf16(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  auto bf = RankedTensorType::get(t.getShape(), b.getBF16Type());
  Value low = b.create<CastOp>(loc, bf, v);
  return b.create<CastOp>(loc, t, low);
}

struct AutocastBf16Pass : impl::AutocastBf16Base<AutocastBf16Pass> {
  void runOnOperation() override {
    SmallVector<Operation *> targets;
    getOperation().walk([&](Operation *op) {
      if (!isa<MatmulOp, AttentionOp>(op))
        return;
      auto isF32 = [](Value v) {
        return cast<RankedTensorType>(v.getType()).getElementType().isF32();
      };
      if (llvm::all_of(op->getOperands(), isF32) && isF32(op->getResult(0)))
        targets.push_back(op);
    });
    OpBuilder b(&getContext());
    for (Operation *op : targets) {
      b.setInsertionPoint(op);
      for (OpOperand &operand : op->getOpOperands())
        operand.set(roundToBf16(b, op->getLoc(), operand.get()));
      b.setInsertionPointAfter(op);
      Value result = op->getResult(0);
      Value rounded = roundToBf16(b, op->getLoc(), result);
      result.replaceAllUsesExcept(rounded, rounded.getDefiningOp()->getOperand(0).getDefiningOp());
    }
  }
};

} // namespace
} // namespace loom
