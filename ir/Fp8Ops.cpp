//===- Fp8Ops.cpp - fp8 ops: shapes, verifiers, the fp8_matmul gradient ---===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ir/LoomOps.h"

#include "mlir/IR/Diagnostics.h"

#include <numeric>

using namespace mlir;

namespace loom {
namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string shapeText(ArrayRef<int64_t> s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t + "]";
}

bool flag(BoolAttr a) { return a && a.getValue(); }

/// [M, N] of op(lhs) op(rhs) for rank-2 operands, or failure with why.
FailureOr<std::pair<int64_t, int64_t>> productDims(ArrayRef<int64_t> ls, ArrayRef<int64_t> rs,
                                                   bool ta, bool tb, std::string &why) {
  int64_t m = ls[ls.size() - 2], k = ls.back();
  if (ta)
    std::swap(m, k);
  int64_t k2 = rs[0], n = rs[1];
  if (tb)
    std::swap(k2, n);
  if (k != k2) {
    why = "contracting dims differ (" + std::to_string(k) + " vs " + std::to_string(k2) +
          ") for " + shapeText(ls) + " x " + shapeText(rs);
    return failure();
  }
  return std::make_pair(m, n);
}

} // namespace

//===----------------------------------------------------------------------===//
// fp8_matmul
//===----------------------------------------------------------------------===//

LogicalResult Fp8MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  if (lhs.getRank() < 2 || rhs.getRank() != 2)
    return emitOptionalError(loc, "loom.fp8_matmul: lhs needs rank >= 2 and rhs rank 2 (a "
                                  "linear layer's weight), got ",
                             shapeText(lhs.getShape()), " and ", shapeText(rhs.getShape()));
  std::string why;
  auto mn = productDims(lhs.getShape(), rhs.getShape(), flag(adaptor.getTransposeLhsAttr()),
                        flag(adaptor.getTransposeRhsAttr()), why);
  if (failed(mn))
    return emitOptionalError(loc, "loom.fp8_matmul: ", why);
  SmallVector<int64_t> shape(lhs.getShape().drop_back(2));
  shape.push_back(mn->first);
  shape.push_back(mn->second);
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult Fp8MatmulOp::verify() {
  auto lhs = tensorOf(getLhs()), rhs = tensorOf(getRhs());
  if (!lhs.getElementType().isF32() || !rhs.getElementType().isF32())
    return emitOpError("operands must be f32 (the values fp8 rounds), got ") << lhs << " and " << rhs;
  if (getTransposeLhs() && lhs.getRank() != 2)
    return emitOpError("transpose_lhs needs a rank-2 lhs, got ") << lhs;
  return success();
}

/// The straight-through gradient, as fp8 products (see Fp8.td): with op(B)
/// the weight as the forward reads it,
///   dA = dy op(B)^T             (dy in grad_format, B in rhs_format)
///   dB = A2^T dy2, or dy2^T A2   (A2, dy2: the batch folded into rows)
/// so that dB has B's stored layout.
LogicalResult Fp8MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &dx) {
  if (getTransposeLhs())
    return emitOpError("with transpose_lhs has no gradient rule (only the products of "
                       "loom-fp8-linears are differentiated)");
  Location loc = getLoc();
  Value a = getLhs(), w = getRhs(), dy = dys[0];
  bool tb = getTransposeRhs();
  Fp8Format fa = getLhsFormat(), fw = getRhsFormat(), fg = getGradFormat();
  Fp8Scaling sc = getScaling();
  auto product = [&](Value l, Value r, Fp8Format lf, Fp8Format rf, bool tl, bool tr) -> Value {
    return b.create<Fp8MatmulOp>(loc, l, r, sc, lf, rf, fg, tl, tr, /*fast_accum=*/false,
                                 /*bf16_weight_grad=*/false);
  };
  auto flatten = [&](Value v) -> Value {
    ArrayRef<int64_t> s = tensorOf(v).getShape();
    if (s.size() == 2)
      return v;
    int64_t rows = std::accumulate(s.begin(), s.end() - 1, int64_t(1), std::multiplies<int64_t>());
    auto t = RankedTensorType::get({rows, s.back()}, tensorOf(v).getElementType());
    return b.create<ReshapeOp>(loc, t, v);
  };
  Value da = product(dy, w, fg, fw, false, !tb);
  Value a2 = flatten(a), dy2 = flatten(dy);
  Value dw = !tb ? product(a2, dy2, fa, fg, true, false) : product(dy2, a2, fg, fa, true, false);
  if (getBf16WeightGrad()) { // the bf16 step's rounding of the weight's gradient
    auto t = tensorOf(dw);
    Value low = b.create<CastOp>(loc, RankedTensorType::get(t.getShape(), b.getBF16Type()), dw);
    dw = b.create<CastOp>(loc, t, low);
  }
  dx.assign({da, dw});
  return success();
}

//===----------------------------------------------------------------------===//
// fp8_scale, fp8_cast, scaled_matmul
//===----------------------------------------------------------------------===//

LogicalResult Fp8ScaleOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  if (in.getRank() != 2)
    return emitOptionalError(loc, "loom.fp8_scale: input must have rank 2, got ",
                             shapeText(in.getShape()));
  SmallVector<int64_t> shape(in.getShape());
  ArrayRef<int64_t> dims = adaptor.getReduceDims();
  bool valid = dims == ArrayRef<int64_t>{0, 1} || dims == ArrayRef<int64_t>{0} ||
               dims == ArrayRef<int64_t>{1};
  if (!valid)
    return emitOptionalError(loc, "loom.fp8_scale: reduce_dims must be [0, 1] (per tensor), [1] "
                                  "(per row) or [0] (per column), got ",
                             shapeText(dims));
  for (int64_t d : dims) shape[size_t(d)] = 1;
  auto t = RankedTensorType::get(shape, Float32Type::get(ctx));
  types.assign({t, t});
  return success();
}

LogicalResult Fp8AmaxOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  if (in.getRank() != 2)
    return emitOptionalError(loc, "loom.fp8_amax: input must have rank 2, got ",
                             shapeText(in.getShape()));
  types.assign({RankedTensorType::get({1, 1}, Float32Type::get(ctx))});
  return success();
}

/// A scale for x[R, C]: [1, 1], [R, 1] or [1, C].
static bool isScaleOf(ArrayRef<int64_t> s, ArrayRef<int64_t> x) {
  return s.size() == 2 && x.size() == 2 && (s[0] == 1 || s[0] == x[0]) &&
         (s[1] == 1 || s[1] == x[1]) && (s[0] == 1 || s[1] == 1);
}

LogicalResult Fp8CastOp::verify() {
  auto in = tensorOf(getInput()), s = tensorOf(getScale()), out = tensorOf(getResult());
  if (in.getRank() != 2)
    return emitOpError("input must have rank 2, got ") << in;
  if (!isScaleOf(s.getShape(), in.getShape()))
    return emitOpError("scale ") << s << " is not one per tensor, row or column of " << in;
  SmallVector<int64_t> want(in.getShape());
  if (getTranspose())
    std::swap(want[0], want[1]);
  if (out.getShape() != ArrayRef<int64_t>(want))
    return emitOpError("result shape ") << shapeText(out.getShape()) << " should be "
                                        << shapeText(want)
                                        << (getTranspose() ? " (transposed)" : "");
  return success();
}

LogicalResult ScaledMatmulOp::verify() {
  auto l = tensorOf(getLhs()), r = tensorOf(getRhs());
  auto li = tensorOf(getLhsInverse()), ri = tensorOf(getRhsInverse());
  if (l.getRank() != 2 || r.getRank() != 2)
    return emitOpError("operands must have rank 2, got ") << l << " and " << r;
  std::string why;
  auto mn = productDims(l.getShape(), r.getShape(), getTransposeLhs(), getTransposeRhs(), why);
  if (failed(mn))
    return emitOpError(why);
  auto [m, n] = *mn;
  SmallVector<int64_t> rowL = getTransposeLhs() ? SmallVector<int64_t>{1, m} : SmallVector<int64_t>{m, 1};
  SmallVector<int64_t> colR = getTransposeRhs() ? SmallVector<int64_t>{n, 1} : SmallVector<int64_t>{1, n};
  SmallVector<int64_t> one = {1, 1};
  if (li.getShape() != ArrayRef<int64_t>(one) && li.getShape() != ArrayRef<int64_t>(rowL))
    return emitOpError("lhs_inverse ") << li << " should be [1x1] or " << shapeText(rowL);
  if (ri.getShape() != ArrayRef<int64_t>(one) && ri.getShape() != ArrayRef<int64_t>(colR))
    return emitOpError("rhs_inverse ") << ri << " should be [1x1] or " << shapeText(colR);
  // [M, N], or [..., N] with the leading dims folding to M: the rows of a
  // batched linear layer, stored alike.
  ArrayRef<int64_t> ys = tensorOf(getResult()).getShape();
  int64_t rows = std::accumulate(ys.begin(), ys.end() - 1, int64_t(1), std::multiplies<int64_t>());
  if (ys.size() < 2 || ys.back() != n || rows != m)
    return emitOpError("result should be ") << shapeText({m, n}) << " or [...x" << n << "] of "
                                            << m << " rows, got " << tensorOf(getResult());
  return success();
}

} // namespace loom
