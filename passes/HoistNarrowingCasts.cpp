//===- HoistNarrowingCasts.cpp - Round to bf16 before layout ops ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// The mirror of SinkWideningCasts. Autocast rounds a value to bf16 where a
// bf16 consumer reads it, which is often after the model has moved it
// around in f32: the attention's output gradient is the o_proj input
// gradient with its heads split (reshape, transpose) and then rounded, and
// GPT-2's fused c_attn gradient is attention_grad's dq, dk, dv with their
// heads merged and concatenated (transpose, reshape, concat) and then
// rounded. Rounding is element-wise and a layout op only moves elements, so
//     cast_bf16(layout(x0, x1, ...))  ==  layout(cast_bf16(x0), ...)
// exactly. With the rounding hoisted onto the producer's result the layout
// ops move half the bytes, a matmul whose only user is now the rounding
// becomes a bf16 GEMM (loom-use-bf16-matmuls), and a producer that may
// write bf16 storage (attention_grad's dq, dk, dv; codegen's FoldCasts)
// writes it directly, so no f32 copy is made at all.
//
// Only a layout op whose result is read by nothing but the rounding is
// rewritten: another reader would still need the f32 value.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_HOISTNARROWINGCASTS
#include "passes/Passes.h.inc"

namespace {

bool isElement(Value v, bool bf16) {
  Type t = cast<RankedTensorType>(v.getType()).getElementType();
  return bf16 ? t.isBF16() : t.isF32();
}

/// The layout op (reshape, transpose, concat) that `round`, an f32 -> bf16
/// cast, is the only reader of, or null.
Operation *hoistableLayout(CastOp round) {
  if (!isElement(round.getInput(), false) || !isElement(round.getResult(), true))
    return nullptr;
  Operation *op = round.getInput().getDefiningOp();
  if (!op || !isa<ReshapeOp, TransposeOp, ConcatOp>(op) || !round.getInput().hasOneUse())
    return nullptr;
  return op;
}

struct HoistNarrowingCastsPass : impl::HoistNarrowingCastsBase<HoistNarrowingCastsPass> {
  void runOnOperation() override {
    SmallVector<CastOp> worklist;
    getOperation().walk([&](CastOp c) { worklist.push_back(c); });
    OpBuilder b(&getContext());
    // Each rewrite leaves new roundings on the layout op's operands, which
    // may sit below another layout op: a chain is hoisted link by link.
    while (!worklist.empty()) {
      CastOp round = worklist.pop_back_val();
      Operation *layout = hoistableLayout(round);
      if (!layout)
        continue;
      b.setInsertionPoint(layout);
      SmallVector<Value> narrowed;
      for (Value in : layout->getOperands()) {
        auto t = cast<RankedTensorType>(in.getType());
        auto c = b.create<CastOp>(round.getLoc(), t.clone(b.getBF16Type()), in);
        narrowed.push_back(c.getResult());
        worklist.push_back(c);
      }
      Operation *moved = b.clone(*layout);
      moved->setOperands(narrowed);
      moved->getResult(0).setType(round.getResult().getType());
      round.getResult().replaceAllUsesWith(moved->getResult(0));
      round.erase();
      layout->erase();
    }
  }
};

} // namespace
} // namespace loom
