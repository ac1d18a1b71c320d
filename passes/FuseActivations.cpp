//===- FuseActivations.cpp - silu, swiglu and gelu fusion -----------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEACTIVATIONS
#include "passes/Passes.h.inc"

namespace {

/// x * sigmoid(x) -> silu(x).
struct FuseSilu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    Value x;
    bool matched = matchEitherOrder(op, [&](Value a, Value b) {
      auto sig = b.getDefiningOp<SigmoidOp>();
      if (!sig || sig.getInput() != a)
        return false;
      x = a;
      return true;
    });
    if (!matched || x.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<SiluOp>(op, x);
    return success();
  }
};

/// Whether `op` is (x * 0.5) * (1 + u) (in either order at each step)
/// where `isInner(u's producer input, x)` holds for the single-input op
/// OpTy producing u; sets x. Both GELU spellings share this shape.
template <typename OpTy, typename Pred>
bool matchHalfXTimesOnePlus(MulOp op, Value &x, Pred &&isInner) {
  return matchEitherOrder(op, [&](Value half, Value onePlus) {
    Value candidate;
    if (!matchMulByConstant(half, 0.5, candidate))
      return false;
    auto add = onePlus.getDefiningOp<AddOp>();
    if (!add)
      return false;
    return matchEitherOrder(add, [&](Value u, Value one) {
      auto f = u.getDefiningOp<OpTy>();
      if (!f || !isConstantNear(one, 1.0) || !isInner(f.getInput(), candidate))
        return false;
      x = candidate;
      return true;
    });
  });
}

/// (x * 0.5) * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> gelu(x, tanh).
struct FuseGeluTanh : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// Whether `v` is sqrt(2/pi) * (x + 0.044715 * x^3) for the given x.
  static bool isInner(Value v, Value x) {
    Value sum;
    if (!matchMulByConstant(v, std::sqrt(2.0 / M_PI), sum))
      return false;
    auto add = sum.getDefiningOp<AddOp>();
    if (!add)
      return false;
    return matchEitherOrder(add, [&](Value a, Value b) {
      Value cube;
      if (a != x || !matchMulByConstant(b, 0.044715, cube))
        return false;
      auto pow = cube.getDefiningOp<PowOp>();
      if (pow)
        return pow.getLhs() == x && isConstantNear(pow.getRhs(), 3.0);
      auto mul = cube.getDefiningOp<MulOp>(); // x * x * x
      if (!mul)
        return false;
      return matchEitherOrder(mul, [&](Value p, Value q) {
        auto sq = q.getDefiningOp<MulOp>();
        return p == x && sq && sq.getLhs() == x && sq.getRhs() == x;
      });
    });
  }

  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    Value x;
    if (!matchHalfXTimesOnePlus<TanhOp>(op, x, isInner) || x.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(op, x, GeluApproximation::tanh);
    return success();
  }
};

/// (x * 0.5) * (1 + erf(x / sqrt 2)) -> gelu(x, erf): the exact GELU as
/// older exports and hand-written models spell it (the division may be a
/// multiplication by 1 / sqrt 2).
struct FuseGeluErf : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// Whether `v` is x / sqrt 2 for the given x.
  static bool isInner(Value v, Value x) {
    Value scaled;
    if (auto div = v.getDefiningOp<DivOp>())
      return isConstantNear(div.getRhs(), M_SQRT2) && div.getLhs() == x;
    return matchMulByConstant(v, M_SQRT1_2, scaled) && scaled == x;
  }

  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    Value x;
    if (!matchHalfXTimesOnePlus<ErfOp>(op, x, isInner) || x.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(op, x, GeluApproximation::erf);
    return success();
  }
};

/// silu(gate) * up -> swiglu(gate, up), where the silu has no other user
/// (else its values must stay in memory anyway) and nothing broadcasts.
struct FuseSwiGlu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    Value gate, up;
    bool matched = matchEitherOrder(op, [&](Value a, Value b) {
      auto silu = a.getDefiningOp<SiluOp>();
      if (!silu || !silu->hasOneUse() || a == b)
        return false;
      gate = silu.getInput();
      up = b;
      return true;
    });
    if (!matched || gate.getType() != op.getType() || up.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<SwiGluOp>(op, gate, up);
    return success();
  }
};

struct FuseActivationsPass : impl::FuseActivationsBase<FuseActivationsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseSilu, FuseGeluTanh, FuseGeluErf, FuseSwiGlu>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), rewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
