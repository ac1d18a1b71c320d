//===- FuseRmsNorm.cpp - RMSNorm fusion -----------------------------------===//
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
#define GEN_PASS_DEF_FUSERMSNORM
#include "passes/Passes.h.inc"

namespace {

/// Whether `v` is mean(x^2) over the last dim (keepdim), with x^2 spelled
/// pow(x, 2) or x * x; sets x.
bool matchMeanSquare(Value v, Value &x) {
  auto mean = v.getDefiningOp<ReduceOp>();
  if (!mean || mean.getKind() != ReduceKind::mean || !mean.getKeepdim())
    return false;
  int64_t rank = tensorType(mean.getInput()).getRank();
  if (mean.getAxes().size() != 1 || mean.getAxes()[0] != rank - 1)
    return false;
  Value sq = mean.getInput();
  if (auto pow = sq.getDefiningOp<PowOp>(); pow && isConstantNear(pow.getRhs(), 2.0)) {
    x = pow.getLhs();
    return true;
  }
  if (auto mul = sq.getDefiningOp<MulOp>(); mul && mul.getLhs() == mul.getRhs()) {
    x = mul.getLhs();
    return true;
  }
  return false;
}

/// Whether `v` is mean(x^2) + eps; sets x and eps.
bool matchVariancePlusEps(Value v, Value &x, double &eps) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return false;
  return matchEitherOrder(add, [&](Value a, Value b) {
    std::optional<double> e = splatValue(b);
    if (!e || !matchMeanSquare(a, x))
      return false;
    eps = *e;
    return true;
  });
}

/// Whether `v` is x * rsqrt(mean(x^2) + eps) (rsqrt spelled rsqrt(.),
/// reciprocal(sqrt(.)) or a division by sqrt(.)); sets x and eps.
bool matchNormalized(Value v, Value &x, double &eps) {
  if (auto div = v.getDefiningOp<DivOp>()) {
    auto sqrt = div.getRhs().getDefiningOp<SqrtOp>();
    return sqrt && matchVariancePlusEps(sqrt.getInput(), x, eps) && x == div.getLhs();
  }
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  return matchEitherOrder(mul, [&](Value a, Value r) {
    Value var;
    if (auto rsqrt = r.getDefiningOp<RsqrtOp>()) {
      var = rsqrt.getInput();
    } else if (auto recip = r.getDefiningOp<ReciprocalOp>()) {
      auto sqrt = recip.getInput().getDefiningOp<SqrtOp>();
      if (!sqrt)
        return false;
      var = sqrt.getInput();
    } else {
      return false;
    }
    return matchVariancePlusEps(var, x, eps) && x == a;
  });
}

/// weight * normalized(x) -> rms_norm(x, weight, eps).
struct FuseWeightedRmsNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    Value x, weight;
    double eps = 0;
    bool matched = matchEitherOrder(op, [&](Value w, Value n) {
      auto wt = tensorType(w);
      if (wt.getRank() != 1 || !matchNormalized(n, x, eps))
        return false;
      if (tensorType(x).getShape().back() != wt.getDimSize(0))
        return false;
      weight = w;
      return true;
    });
    if (!matched || x.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<RmsNormOp>(op, x, weight, rewriter.getF64FloatAttr(eps));
    return success();
  }
};

struct FuseRmsNormPass : impl::FuseRmsNormBase<FuseRmsNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseWeightedRmsNorm>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), rewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
