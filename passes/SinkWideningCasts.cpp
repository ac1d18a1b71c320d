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
// A split is such a layout op too (each piece is a conversion of the
// matching piece): GPT-2's fused c_attn projection is split into q, k and
// v, and without sinking below the split attention would see f32 values
// and lose its bf16_operands flag (and with it the bf16 fused engines).
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

bool isLayout(Operation *op) { return isa<ReshapeOp, TransposeOp, SplitOp>(op); }

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
      return llvm::all_of(user->getResults(), readByBf16Consumers);
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
      if (!narrow || !llvm::all_of(op->getResults(), readByBf16Consumers))
        continue;
      b.setInsertionPoint(op);
      Operation *moved = b.clone(*op);
      moved->setOperand(0, narrow);
      for (auto [wideResult, narrowResult] : llvm::zip(op->getResults(), moved->getResults())) {
        auto wide = cast<RankedTensorType>(wideResult.getType());
        narrowResult.setType(wide.clone(b.getBF16Type()));
        auto widen = b.create<CastOp>(op->getLoc(), wide, narrowResult);
        wideResult.replaceAllUsesWith(widen.getResult());
      }
      op->erase();
    }
  }
};

} // namespace
} // namespace loom
