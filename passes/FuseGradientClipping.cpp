//===- FuseGradientClipping.cpp - One read of each gradient for the norm --===//
//
// Part of loom, under the Apache License v2.0.
//
// BuildTrainStep spells global-norm clipping out in plain ops, per
// parameter:
//     sq    = g * g                        a pass writing a copy of g
//     term  = reduce(sum, every axis, sq)  a pass reading the copy
//     ...   coef = min(1, max_norm / (sqrt(sum of terms) + 1e-6))
//     g'    = g * coef                     a pass writing another copy
//     adamw(p, g', m, v, lr, step)
// The SPMD passes need that structure (passes/TrainStepStructure.cpp finds
// the squares, the terms and the clip there), so it stays until they have
// run. Afterwards this pass folds the two copies away:
//   - reduce(sum, every axis, x * x), the product used only by the reduce,
//     becomes sum_squares(x), which reads x once. The same rewrite catches
//     BuildTrainStep's activation-sum checks and the terms the SPMD passes
//     wrapped in collectives (the square of a reduce_scatter's shard, the
//     term all_reduced afterwards): the pattern is local.
//   - adamw(p, g * s, ...), with s a rank-0 f32 tensor and the product used
//     only by the AdamW, becomes adamw(p, g, ..., grad_scale = s): the
//     kernel multiplies in registers.
// Both keep every rounding: sum_squares rounds each square to f32 before
// adding it (as the product buffer did), and AdamW rounds g * s to f32
// before its own arithmetic (as the clipped buffer did), so the step's
// results are bit-identical. Run it last on the finished training step.
//===----------------------------------------------------------------------===//
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEGRADIENTCLIPPING
#include "passes/Passes.h.inc"

namespace {

/// `r` sums over every axis of its input into a rank-0 result.
bool sumsEverything(ReduceOp r) {
  if (r.getKind() != ReduceKind::sum || r.getKeepdim())
    return false;
  int64_t rank = tensorType(r.getInput()).getRank();
  llvm::SmallBitVector seen(static_cast<unsigned>(rank));
  for (int64_t a : r.getAxes())
    if (a >= 0 && a < rank)
      seen.set(size_t(a));
  return seen.all() && tensorType(r.getResult()).getRank() == 0;
}

/// reduce(sum, all, x * x) -> sum_squares(x); true when rewritten.
bool fuseSumOfSquares(ReduceOp r, OpBuilder &b) {
  auto square = r.getInput().getDefiningOp<MulOp>();
  if (!square || square.getLhs() != square.getRhs() || !square->hasOneUse() || !sumsEverything(r))
    return false;
  Value x = square.getLhs();
  // sum_squares rounds each square to x's element type, which must be one
  // it computes in (a bf16 square would round to bf16).
  Type element = tensorType(x).getElementType();
  if (!element.isF32() && !element.isF64())
    return false;
  b.setInsertionPoint(r);
  auto fused = b.create<SumSquaresOp>(r.getLoc(), x);
  r.getResult().replaceAllUsesWith(fused.getResult());
  r.erase();
  square.erase();
  return true;
}

/// adamw(p, g * s, ...) -> adamw(p, g, ..., grad_scale = s); true when
/// rewritten.
bool fuseGradScale(AdamWOp a, OpBuilder &b) {
  if (a.getGradScale())
    return false;
  auto mul = a.getGrad().getDefiningOp<MulOp>();
  if (!mul || !mul->hasOneUse())
    return false;
  Type gradType = a.getParam().getType();
  auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
  Value g, s;
  matchEitherOrder(mul, [&](Value x, Value y) {
    if (x.getType() != gradType || y.getType() != scalarF32)
      return false;
    g = x, s = y;
    return true;
  });
  if (!g)
    return false;
  b.setInsertionPoint(a);
  auto fused = b.create<AdamWOp>(a.getLoc(), a.getParam(), g, a.getExpAvg(), a.getExpAvgSq(),
                                 a.getLr(), a.getStep(), s, a.getBeta1Attr(), a.getBeta2Attr(),
                                 a.getEpsilonAttr(), a.getWeightDecayAttr());
  a->replaceAllUsesWith(fused->getResults());
  a.erase();
  mul.erase();
  return true;
}

struct FuseGradientClippingPass : impl::FuseGradientClippingBase<FuseGradientClippingPass> {
  void runOnOperation() override {
    SmallVector<ReduceOp> reduces;
    SmallVector<AdamWOp> updates;
    getOperation().walk([&](Operation *op) {
      if (auto r = dyn_cast<ReduceOp>(op))
        reduces.push_back(r);
      else if (auto a = dyn_cast<AdamWOp>(op))
        updates.push_back(a);
    });
    OpBuilder b(&getContext());
    // Each rewrite erases only its own op and the product feeding it, which
    // has no other use, so the collected lists stay valid.
    for (ReduceOp r : reduces) fuseSumOfSquares(r, b);
    for (AdamWOp a : updates) fuseGradScale(a, b);
  }
};

} // namespace
} // namespace loom
