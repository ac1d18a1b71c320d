//===- SinkWideningCasts.cpp - Move bf16 -> f32 casts below layout ops ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Autocast leaves every bf16 value as cast(bf16 -> f32)(x), and the model
// then reshapes and transposes the f32 copy: heads split before attention,
// activations flattened for a weight gradient. A layout op commutes with an
// element-wise conversion, so
//     layout(cast_f32(x))  ==  cast_f32(layout(x))
// exactly. Rewriting to the right-hand side moves half the bytes and, more
// to the point, leaves the widening cast next to its reader: the matmuls
// (`loom-use-bf16-matmuls`, and codegen's bf16-in/f32-out GEMMs) and the
// attention ops (their bf16_operands flag) recognize bf16 values only by a
// widening cast on the operand itself.
//
// Only layout chains whose every reader is a matmul, an attention op or
// another such layout op are rewritten: a widening cast in front of any
// other reader would become a real conversion pass of its own.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_SINKWIDENINGCASTS
#include "passes/Passes.h.inc"

namespace {

bool isLayout(Operation *op) { return isa<ReshapeOp, TransposeOp>(op); }

/// The bf16 tensor `v` is a widening of, or null.
Value widenedFrom(Value v) {
  auto c = v.getDefiningOp<CastOp>();
  if (!c)
    return Value();
  auto in = cast<RankedTensorType>(c.getInput().getType());
  auto out = cast<RankedTensorType>(c.getResult().getType());
  return in.getElementType().isBF16() && out.getElementType().isF32() ? c.getInput() : Value();
}

/// Every reader of `v`, through layout ops, takes bf16 values natively.
bool readByBf16Consumers(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *user) {
    if (isLayout(user))
      return readByBf16Consumers(user->getResult(0));
    return isa<MatmulOp, Fp8MatmulOp, AttentionOp, AttentionGradOp>(user);
  });
}

struct SinkWideningCastsPass : impl::SinkWideningCastsBase<SinkWideningCastsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> layouts;
    getOperation().walk([&](Operation *op) {
      if (isLayout(op))
        layouts.push_back(op);
    });
    OpBuilder b(&getContext());
    // Program order: a chain reshape -> transpose sinks one link at a time,
    // each rewrite handing the next op a widening cast to look at.
    for (Operation *op : layouts) {
      Value narrow = widenedFrom(op->getOperand(0));
      if (!narrow || !readByBf16Consumers(op->getResult(0)))
        continue;
      b.setInsertionPoint(op);
      Operation *moved = b.clone(*op);
      moved->setOperand(0, narrow);
      auto wide = cast<RankedTensorType>(op->getResult(0).getType());
      moved->getResult(0).setType(wide.clone(b.getBF16Type()));
      auto widen = b.create<CastOp>(op->getLoc(), wide, moved->getResult(0));
      op->getResult(0).replaceAllUsesWith(widen.getResult());
      op->erase();
    }
  }
};

} // namespace
} // namespace loom
