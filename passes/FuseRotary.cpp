//===- FuseRotary.cpp - rotary embedding fusion ---------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEROTARY
#include "passes/Passes.h.inc"

namespace {

/// Whether `v` is the half [start, start + D/2) of x's last dim, whole
/// elsewhere; sets x.
bool matchHalf(Value v, bool upper, Value &x) {
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice)
    return false;
  auto in = tensorType(slice.getInput());
  int64_t rank = in.getRank(), d = in.getShape().back();
  if (d % 2)
    return false;
  for (int64_t k = 0; k < rank; ++k) {
    int64_t wantStart = k == rank - 1 && upper ? d / 2 : 0;
    int64_t wantSize = k == rank - 1 ? d / 2 : in.getDimSize(k);
    if (slice.getStarts()[k] != wantStart || slice.getSizes()[k] != wantSize ||
        slice.getSteps()[k] != 1)
      return false;
  }
  x = slice.getInput();
  return true;
}

/// Whether `v` is rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]).
bool matchRotateHalf(Value v, Value &x) {
  auto cat = v.getDefiningOp<ConcatOp>();
  if (!cat || cat.getInputs().size() != 2 ||
      cat.getAxis() != tensorType(v).getRank() - 1)
    return false;
  auto neg = cat.getInputs()[0].getDefiningOp<NegOp>();
  Value hi, lo;
  return neg && matchHalf(neg.getInput(), /*upper=*/true, hi) &&
         matchHalf(cat.getInputs()[1], /*upper=*/false, lo) && hi == lo &&
         (x = hi, true);
}

/// x * cos + rotate_half(x) * sin -> rotary(x, cos, sin).
struct FuseRotaryPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op, PatternRewriter &rewriter) const override {
    Value x, cos, sin;
    bool matched = matchEitherOrder(op, [&](Value a, Value b) {
      auto mulCos = a.getDefiningOp<MulOp>(), mulSin = b.getDefiningOp<MulOp>();
      if (!mulCos || !mulSin)
        return false;
      // Find rotate_half(x) * sin, then x * cos with the same x.
      return matchEitherOrder(mulSin, [&](Value rot, Value s) {
        Value rx;
        if (!matchRotateHalf(rot, rx))
          return false;
        return matchEitherOrder(mulCos, [&](Value xc, Value c) {
          if (xc != rx)
            return false;
          x = rx, cos = c, sin = s;
          return true;
        });
      });
    });
    if (!matched || x.getType() != op.getType())
      return failure();
    for (Value table : {cos, sin}) {
      auto b = broadcastShapes(tensorType(x).getShape(), tensorType(table).getShape());
      if (failed(b) || ArrayRef<int64_t>(*b) != tensorType(x).getShape() ||
          tensorType(table).getElementType() != tensorType(x).getElementType())
        return failure();
    }
    rewriter.replaceOpWithNewOp<RotaryOp>(op, x, cos, sin);
    return success();
  }
};

struct FuseRotaryPass : impl::FuseRotaryBase<FuseRotaryPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRotaryPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), rewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
