//===- InsertFp8Casts.cpp - fp8_matmul as scales, casts and a scaled GEMM -===//
//
// Part of loom, under the Apache License v2.0.
//
// Runs on the finished training step, where the forward's fp8_matmuls and
// the ones their gradient rules built sit side by side. Each becomes
//   scale_a, inv_a = fp8_scale(A)        scale_b, inv_b = fp8_scale(B)
//   qa = fp8_cast(A, scale_a)             qb = fp8_cast(B, scale_b)
//   y = scaled_matmul(qa, qb, inv_a, inv_b)        (transpose_rhs)
// in the one layout fp8 tensor cores take: both operands K-major (cuBLASLt
// calls it TN). An operand stored with its contracting dim first (x for
// the weight gradient, a weight stored [K, N], the output gradient for the
// weight gradient) is cast transposed, in the same pass over it. Under
// rowwise scaling each operand's scales run over the contracting dim (one
// per row of the K-major copy), so a tensor that enters products both
// ways gets two sets; under tensorwise one scale serves both.
//
// Operands are read at their source: through the widening casts and the
// reshapes autodiff put between an activation and its products (a bf16
// activation is read as bf16, never widened), and the scale and cast of a
// computed value are placed right after it is made. So the copies a
// tensor's products need are made while it is fresh, every copy of it is
// one CSE-able op (q, k and v share one quantized input; the weight
// gradient reuses the forward's scale), and what lives on to the backward
// is the fp8 copy, not the bf16 tensor. A parameter (a block argument) is
// cast right before each product instead, so its fp8 copies do not live
// through the whole forward. A result rounded to bf16 at once comes out
// of the GEMM in bf16.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_INSERTFP8CASTS
#include "passes/Passes.h.inc"

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The tensor whose elements, in order, `v` holds: through reshapes and
/// bf16 -> f32 widening casts (both keep the row-major element order and
/// every value).
Value elementSource(Value v) {
  while (true) {
    if (auto r = v.getDefiningOp<ReshapeOp>()) {
      v = r.getInput();
      continue;
    }
    if (auto c = v.getDefiningOp<CastOp>()) {
      Type from = tensorOf(c.getInput()).getElementType(), to = tensorOf(c.getResult()).getElementType();
      if (from.isBF16() && to.isF32() &&
          tensorOf(c.getInput()).getNumElements() == tensorOf(c.getResult()).getNumElements()) {
        v = c.getInput();
        continue;
      }
    }
    return v;
  }
}

Type fp8Type(MLIRContext *ctx, Fp8Format f) {
  return f == Fp8Format::e4m3 ? Type(Float8E4M3FNType::get(ctx)) : Type(Float8E5M2Type::get(ctx));
}

/// An operand in the K-major layout and its dequantization factors
/// ([1, 1], or [rows, 1] of the K-major copy).
struct Quantized {
  Value q, inverse;
};

struct InsertFp8CastsPass : impl::InsertFp8CastsBase<InsertFp8CastsPass> {
  /// Quantizes `operand` seen as a matrix [R, C] (`shape2d`) whose
  /// contracting dim is dim 0 (`kFirst`) or dim 1, for product `at`.
  Quantized quantize(OpBuilder &b, Operation *at, Value operand, ArrayRef<int64_t> shape2d,
                     bool kFirst, Fp8Format format, Fp8Scaling scaling) {
    Location loc = at->getLoc();
    Value src = elementSource(operand);
    if (isa<BlockArgument>(src))
      b.setInsertionPoint(at);
    else
      b.setInsertionPointAfterValue(src);
    auto srcType = tensorOf(src);
    Value x = src;
    if (srcType.getShape() != shape2d)
      x = b.create<ReshapeOp>(loc, RankedTensorType::get(shape2d, srcType.getElementType()), src);
    bool rowwise = scaling == Fp8Scaling::rowwise;
    SmallVector<int64_t> dims = !rowwise ? SmallVector<int64_t>{0, 1}
                                : kFirst ? SmallVector<int64_t>{0}
                                         : SmallVector<int64_t>{1};
    auto scale = b.create<Fp8ScaleOp>(loc, x, format, dims, /*power_of_two=*/rowwise);
    SmallVector<int64_t> qShape = kFirst ? SmallVector<int64_t>{shape2d[1], shape2d[0]}
                                         : SmallVector<int64_t>(shape2d);
    Value q = b.create<Fp8CastOp>(loc, RankedTensorType::get(qShape, fp8Type(&getContext(), format)),
                                  x, scale.getScale(), /*transpose=*/kFirst);
    Value inverse = scale.getInverse();
    if (rowwise && kFirst) // [1, C] of the source is [C, 1] of the K-major copy
      inverse = b.create<ReshapeOp>(
          loc, RankedTensorType::get({shape2d[1], 1}, b.getF32Type()), inverse);
    return {q, inverse};
  }

  void lower(Fp8MatmulOp f) {
    OpBuilder b(&getContext());
    auto lt = tensorOf(f.getLhs()), rt = tensorOf(f.getRhs()), yt = tensorOf(f.getResult());
    bool ta = f.getTransposeLhs(), tb = f.getTransposeRhs();
    ArrayRef<int64_t> ls = lt.getShape();
    int64_t rows = 1;
    for (int64_t d : ls.drop_back()) rows *= d;
    SmallVector<int64_t> l2 = {rows, ls.back()};
    Quantized a = quantize(b, f, f.getLhs(), l2, /*kFirst=*/ta, f.getLhsFormat(), f.getScaling());
    Quantized w = quantize(b, f, f.getRhs(), rt.getShape(), /*kFirst=*/!tb, f.getRhsFormat(),
                           f.getScaling());
    // A result rounded to bf16 at once (autocast) comes out of the GEMM so.
    CastOp round;
    if (f.getResult().hasOneUse())
      if (auto c = dyn_cast<CastOp>(*f.getResult().getUsers().begin());
          c && tensorOf(c.getResult()).getElementType().isBF16() &&
          tensorOf(c.getResult()).getShape() == yt.getShape())
        round = c;
    Type elem = round ? b.getBF16Type() : yt.getElementType();
    b.setInsertionPoint(f);
    // In the product's own shape ([..., M0, N] folds to [M, N]): the
    // result's readers, a rounding cast above all, meet no reshape.
    Value y = b.create<ScaledMatmulOp>(f.getLoc(), RankedTensorType::get(yt.getShape(), elem), a.q,
                                       w.q, a.inverse, w.inverse, /*transpose_lhs=*/false,
                                       /*transpose_rhs=*/true, f.getFastAccum());
    if (round) {
      round.getResult().replaceAllUsesWith(y);
      round.erase();
    } else {
      f.getResult().replaceAllUsesWith(y);
    }
    f.erase();
  }

  void runOnOperation() override {
    SmallVector<Fp8MatmulOp> products;
    getOperation().walk([&](Fp8MatmulOp f) { products.push_back(f); });
    for (Fp8MatmulOp f : products)
      lower(f);
  }
};

} // namespace
} // namespace loom
