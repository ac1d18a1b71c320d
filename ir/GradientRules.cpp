//===- GradientRules.cpp - Vector-Jacobian products of loom ops -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// For y = f(x...), given dy (the loss's gradient with respect to y), each
// rule builds dx_i = (df/dx_i)^T dy. Broadcasting ops sum the gradient back
// down to the operand's shape. Operands that are integers or frozen tables
// (token ids, rotary cos/sin, masks) get no gradient.
//===----------------------------------------------------------------------===//
#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Small builder helpers shared by the rules.
struct Grad {
  OpBuilder &b;
  Location loc;

  Value scalar(double v, Type elem) {
    auto t = RankedTensorType::get({}, elem);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getFloatAttr(elem, v)),
                                StringAttr(), ParamAttr());
  }
  Value zerosLike(Value like) {
    auto t = tensorOf(like);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)),
                                StringAttr(), ParamAttr());
  }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  Value mulScalar(Value x, double c) { return mul(x, scalar(c, tensorOf(x).getElementType())); }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (tensorOf(x).getShape() == shape)
      return x;
    return b.create<ReshapeOp>(loc, RankedTensorType::get(shape, tensorOf(x).getElementType()), x);
  }
  /// Sums `g` over the dims that broadcasting stretched to reach its shape
  /// from `shape`, then reshapes to `shape`.
  Value unbroadcast(Value g, ArrayRef<int64_t> shape) {
    ArrayRef<int64_t> gs = tensorOf(g).getShape();
    if (gs == shape)
      return g;
    SmallVector<int64_t> axes;
    size_t lead = gs.size() - shape.size();
    for (size_t d = 0; d < gs.size(); ++d)
      if (d < lead || (shape[d - lead] == 1 && gs[d] != 1))
        axes.push_back(int64_t(d));
    Value s = g;
    if (!axes.empty())
      s = b.create<ReduceOp>(loc, g, ReduceKind::sum, axes, /*keepdim=*/true);
    return reshape(s, shape);
  }
  Value matmul(Value x, Value y, bool tx, bool ty) {
    return b.create<MatmulOp>(loc, x, y, tx, ty);
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  dx.assign({g.unbroadcast(dys[0], tensorOf(getLhs()).getShape()),
        g.unbroadcast(dys[0], tensorOf(getRhs()).getShape())});
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  dx.assign({g.unbroadcast(dys[0], tensorOf(getLhs()).getShape()),
        g.unbroadcast(g.neg(dys[0]), tensorOf(getRhs()).getShape())});
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  dx.assign({g.unbroadcast(g.mul(dys[0], getRhs()), tensorOf(getLhs()).getShape()),
        g.unbroadcast(g.mul(dys[0], getLhs()), tensorOf(getRhs()).getShape())});
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  // y = a / b: da = dy / b, db = -dy y / b.
  Grad g{b, getLoc()};
  Value da = g.div(dys[0], getRhs());
  dx.assign({g.unbroadcast(da, tensorOf(getLhs()).getShape()),
        g.unbroadcast(g.neg(g.mul(da, getResult())), tensorOf(getRhs()).getShape())});
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  // y = a^c with c constant: da = dy c a^(c-1). A learned exponent is not
  // supported (no exporter emits one).
  auto c = getRhs().getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!dense || !dense.isSplat())
    return emitOpError("gradient needs a constant scalar exponent");
  double e = dense.getSplatValue<APFloat>().convertToDouble();
  Grad g{b, getLoc()};
  Type elem = tensorOf(getLhs()).getElementType();
  Value base = e == 2.0 ? getLhs()
                        : Value(b.create<PowOp>(getLoc(), getLhs(), g.scalar(e - 1.0, elem)));
  dx.assign({g.unbroadcast(g.mul(g.mulScalar(dys[0], e), base), tensorOf(getLhs()).getShape()), Value()});
  return success();
}

LogicalResult WhereOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  Value zero = g.zerosLike(dys[0]);
  Value da = b.create<WhereOp>(getLoc(), getCondition(), dys[0], zero);
  Value db = b.create<WhereOp>(getLoc(), getCondition(), zero, dys[0]);
  dx.assign({Value(), g.unbroadcast(da, tensorOf(getLhs()).getShape()),
        g.unbroadcast(db, tensorOf(getRhs()).getShape())});
  return success();
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({Grad{b, getLoc()}.neg(dys[0])});
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  dx.assign({g.div(g.mulScalar(dys[0], 0.5), getResult())}); // dy / (2 y)
  return success();
}

LogicalResult RsqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  Value y = getResult();
  dx.assign({g.mul(g.mulScalar(dys[0], -0.5), g.mul(y, g.mul(y, y)))}); // -dy y^3 / 2
  return success();
}

LogicalResult ReciprocalOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  Value y = getResult();
  dx.assign({g.neg(g.mul(dys[0], g.mul(y, y)))}); // -dy y^2
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({Grad{b, getLoc()}.mul(dys[0], getResult())});
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({Grad{b, getLoc()}.div(dys[0], getInput())});
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  Value y = getResult();
  Value one = g.scalar(1.0, tensorOf(y).getElementType());
  dx.assign({g.mul(dys[0], g.sub(one, g.mul(y, y)))}); // dy (1 - y^2)
  return success();
}

LogicalResult SigmoidOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  Value y = getResult();
  Value one = g.scalar(1.0, tensorOf(y).getElementType());
  dx.assign({g.mul(dys[0], g.mul(y, g.sub(one, y)))}); // dy y (1 - y)
  return success();
}

LogicalResult SiluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<ActivationGradOp>(getLoc(), getInput(), dys[0], ActivationKind::silu)});
  return success();
}

LogicalResult SwiGluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                       SmallVectorImpl<Value> &dx) {
  auto grad = b.create<SwiGluGradOp>(getLoc(), getGate(), getUp(), dys[0]);
  dx.assign({grad.getGateGrad(), grad.getUpGrad()});
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  ActivationKind kind = getApproximation() == GeluApproximation::tanh ? ActivationKind::gelu_tanh
                                                                      : ActivationKind::gelu_erf;
  dx.assign({b.create<ActivationGradOp>(getLoc(), getInput(), dys[0], kind)});
  return success();
}

LogicalResult CosOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  dx.assign({g.neg(g.mul(dys[0], b.create<SinOp>(getLoc(), getInput())))});
  return success();
}

LogicalResult SinOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  dx.assign({g.mul(dys[0], b.create<CosOp>(getLoc(), getInput()))});
  return success();
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  // dy where x > 0, else 0 (PyTorch's threshold_backward: 0 at x = 0 too).
  dx.assign({b.create<ActivationGradOp>(getLoc(), getInput(), dys[0], ActivationKind::relu)});
  return success();
}

LogicalResult ErfOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  // erf'(x) = 2 / sqrt(pi) e^(-x^2).
  Grad g{b, getLoc()};
  Value x = getInput();
  Value e = b.create<ExpOp>(getLoc(), g.neg(g.mul(x, x)));
  dx.assign({g.mul(dys[0], g.mulScalar(e, M_2_SQRTPI))});
  return success();
}

LogicalResult SoftplusOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  // d/dx log(1 + e^x) = sigmoid(x).
  dx.assign({Grad{b, getLoc()}.mul(dys[0], b.create<SigmoidOp>(getLoc(), getInput()))});
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  auto in = tensorOf(getInput());
  if (!isa<FloatType>(in.getElementType())) {
    dx.assign({Value()});
    return success();
  }
  dx.assign({b.create<CastOp>(getLoc(), in, dys[0])});
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra, reductions, normalization
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  // C = op(A) op(B). Untransposed: dA = dC B^T, dB = A^T dC; each transpose
  // flag flips which side the product lands on. A rank-2 operand shared by
  // a batch (a weight) gets its gradient from the flattened batch.
  Grad g{b, getLoc()};
  Value a = getLhs(), bb = getRhs(), dc = dys[0];
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  auto at = tensorOf(a), bt = tensorOf(bb), ct = tensorOf(dc);
  auto flatten = [&](Value v) {
    ArrayRef<int64_t> s = tensorOf(v).getShape();
    int64_t rows = std::accumulate(s.begin(), s.end() - 1, int64_t(1), std::multiplies<int64_t>());
    return g.reshape(v, {rows, s.back()});
  };
  Value da, db;
  {
    Value r = !ta ? (!tb ? g.matmul(dc, bb, false, true) : g.matmul(dc, bb, false, false))
                  : (!tb ? g.matmul(bb, dc, false, true) : g.matmul(bb, dc, true, true));
    da = g.unbroadcast(r, at.getShape());
  }
  // dB
  if (bt.getRank() == 2 && ct.getRank() > 2 && !ta) {
    // Weight shared by the batch: fold batch rows into one product.
    Value a2 = flatten(a), dc2 = flatten(dc);
    db = !tb ? g.matmul(a2, dc2, true, false) : g.matmul(dc2, a2, true, false);
  } else {
    Value r = !ta ? (!tb ? g.matmul(a, dc, true, false) : g.matmul(dc, a, true, false))
                  : (!tb ? g.matmul(a, dc, false, false) : g.matmul(dc, a, true, true));
    db = g.unbroadcast(r, bt.getShape());
  }
  dx.assign({da, db});
  return success();
}

LogicalResult ReduceOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  if (getKind() == ReduceKind::max)
    return emitOpError("max reduction has no gradient rule");
  Grad g{b, getLoc()};
  auto in = tensorOf(getInput());
  SmallVector<int64_t> kept(in.getShape());
  int64_t count = 1;
  for (int64_t a : getAxes()) {
    count *= kept[a];
    kept[a] = 1;
  }
  Value dy = g.reshape(dys[0], kept);
  if (getKind() == ReduceKind::mean)
    dy = g.mulScalar(dy, 1.0 / double(count));
  dx.assign({b.create<ExpandOp>(getLoc(), in, dy)});
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<SoftmaxGradOp>(getLoc(), getResult(), dys[0], getAxis())});
  return success();
}

LogicalResult RmsNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  auto op = b.create<RmsNormGradOp>(getLoc(), getInput(), getWeight(), dys[0], getEpsilonAttr());
  dx.assign({op.getInputGrad(), op.getWeightGrad()});
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  auto op = b.create<LayerNormGradOp>(getLoc(), getInput(), getWeight(), dys[0], getEpsilonAttr());
  dx.assign({op.getInputGrad(), op.getWeightGrad()});
  if (getBias())
    dx.push_back(op.getBiasGrad());
  return success();
}

//===----------------------------------------------------------------------===//
// Transformer blocks
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  int64_t rows = tensorOf(getTable()).getDimSize(0);
  dx.assign({b.create<EmbeddingGradOp>(getLoc(), dys[0], getIndices(), rows), Value()});
  return success();
}

LogicalResult RotaryOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<RotaryGradOp>(getLoc(), dys[0], getCos(), getSin()), Value(), Value()});
  return success();
}

/// The attention output `o` as its readers see it, which the backward's delta =
/// <dy, o> must use. Under autocast (AutocastBf16) the fused op stands for
/// SDPA, whose output is a bf16 tensor: the IR computes it in f32 and rounds
/// it right after the op, cast(bf16) then cast(f32). The rounded values are
/// the ones PyTorch's SDPA backward reads, and reading them leaves the
/// rounding the f32 result's only reader, so that codegen folds it into the
/// attention kernel (FoldCasts) instead of keeping an f32 copy of the
/// output alive until the backward.
Value loom::attentionOutputAsRead(Value o) {
  auto wide = cast<RankedTensorType>(o.getType());
  if (!o.hasOneUse())
    return o;
  auto narrow = dyn_cast<CastOp>(*o.getUsers().begin());
  if (!narrow || !narrow.getType().getElementType().isBF16())
    return o;
  for (Operation *user : narrow->getUsers())
    if (auto back = dyn_cast<CastOp>(user); back && back.getType() == wide)
      return back;
  return o;
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  // lse is a statistic the backward reads, not a value the loss may depend
  // on: nothing differentiates through it (its gradient would add
  // dlse_i P_ij to dS_ij, which attention_grad does not take).
  if (dys.size() > 1 && dys[1])
    return emitOpError("has a gradient for its lse result, which attention_grad does not take");
  auto op = b.create<AttentionGradOp>(getLoc(), getQuery(), getKey(), getValue(),
                                      attentionOutputAsRead(getOutput()), getLse(), dys[0],
                                      getScaleAttr(), getCausalAttr(), getWindowAttr(),
                                      getSoftcapAttr(), getLayoutAttr());
  dx.assign({op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()});
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<CrossEntropyGradOp>(getLoc(), getLogits(), getTargets(), dys[0]), Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({Grad{b, getLoc()}.reshape(dys[0], tensorOf(getInput()).getShape())});
  return success();
}

LogicalResult ExpandOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({Grad{b, getLoc()}.unbroadcast(dys[0], tensorOf(getInput()).getShape())});
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = int64_t(i);
  dx.assign({b.create<TransposeOp>(getLoc(), dys[0], inverse)});
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<SliceGradOp>(getLoc(), dys[0], tensorOf(getInput()).getShape(), getStarts(),
                              getSteps())});
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  auto out = tensorOf(getResult());
  int64_t axis = getAxis(), at = 0;
  dx.clear();
  for (Value in : getInputs()) {
    auto it = tensorOf(in);
    SmallVector<int64_t> starts(out.getRank(), 0), steps(out.getRank(), 1);
    starts[axis] = at;
    at += it.getDimSize(axis);
    dx.push_back(b.create<SliceOp>(getLoc(), dys[0], starts, it.getShape(), steps));
  }
  return success();
}

LogicalResult SplitOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys, SmallVectorImpl<Value> &dx) {
  Grad g{b, getLoc()};
  SmallVector<Value> parts;
  for (auto [k, r] : llvm::enumerate(getResults()))
    parts.push_back(dys[k] ? dys[k] : g.zerosLike(r));
  dx.assign({b.create<ConcatOp>(getLoc(), parts, getAxis())});
  return success();
}
