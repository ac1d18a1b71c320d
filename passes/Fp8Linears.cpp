//===- Fp8Linears.cpp - Linear layers' products on fp8 operands -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// torchao's float8 training swaps nn.Linear for Float8Linear: the layer's
// input and weight are scaled from their current amax and rounded to fp8
// for the forward GEMM, and the output gradient likewise for the two
// backward GEMMs. Here that is a rewrite of @forward before autodiff: each
// matmul of an activation by a parameter (attention projections, MLP)
// becomes `loom.fp8_matmul`, whose gradient rule builds the backward's fp8
// products (ir/Fp8Ops.cpp). What stays in bf16/f32 is what torchao leaves
// alone by default: the embedding (a gather, not a GEMM), attention's own
// products (a fused op, or two activations), and the output head (the
// product whose result becomes the logits), unless `lm-head` says so.
//
// Under bf16 autocast the weight operand arrives rounded to bf16 (a cast
// pair on the f32 parameter); the fp8 product reads the f32 master weight
// instead, as Float8Linear quantizes the parameter itself: one rounding,
// not two, and on the GPU one pass over the weight fewer. The rounding's
// other effect, a bf16 weight gradient, is kept (`bf16_weight_grad`):
// torchao's weight-gradient GEMM writes the autocast dtype too, and the
// GEMM's result and the optimizer's read of it are half the bytes. The activation
// keeps autocast's rounding (torchao casts the input to the autocast dtype
// first), which is also the cheaper tensor to read.
//
// Run after autocast and the sharding passes (it sees the rank's local
// matmuls), before `loom-build-train-step`.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"
#include "ir/Sharding.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FP8LINEARS
#include "passes/Passes.h.inc"

namespace {

/// The f32 value an autocast cast pair (f32 -> bf16 -> f32) rounds, or v.
Value unrounded(Value v) {
  auto widen = v.getDefiningOp<CastOp>();
  if (!widen)
    return v;
  auto narrow = widen.getInput().getDefiningOp<CastOp>();
  auto elem = [](Value x) { return cast<RankedTensorType>(x.getType()).getElementType(); };
  if (!narrow || !elem(narrow.getInput()).isF32() || !elem(narrow.getResult()).isBF16() ||
      !elem(widen.getResult()).isF32())
    return v;
  return narrow.getInput();
}

/// A model parameter (a constant with #loom.param), possibly entering a
/// tensor-parallel region through copy_to_parallel.
bool isParameter(Value v) {
  if (auto c = v.getDefiningOp<CopyToParallelOp>())
    v = unrounded(c.getInput());
  auto c = v.getDefiningOp<ConstantOp>();
  return c && c.getParamAttr();
}

/// The product's result reaches the function's results through layout
/// ops, casts, bias adds and collectives only: it is the logits (the
/// output head).
bool feedsResults(Value v, llvm::SmallPtrSetImpl<Operation *> &seen) {
  for (Operation *user : v.getUsers()) {
    if (!seen.insert(user).second)
      continue;
    if (isa<func::ReturnOp>(user))
      return true;
    if (isa<CastOp, ReshapeOp, TransposeOp, AddOp, AllReduceOp, AllGatherOp>(user) &&
        feedsResults(user->getResult(0), seen))
      return true;
  }
  return false;
}

struct Fp8LinearsPass : impl::Fp8LinearsBase<Fp8LinearsPass> {
  using Fp8LinearsBase::Fp8LinearsBase;

  void runOnOperation() override {
    auto sc = symbolizeFp8Scaling(scaling);
    auto grad = symbolizeFp8Format(gradFormat);
    if (!sc || !grad) {
      getOperation().emitError() << "loom-fp8-linears: "
                                 << (!sc ? "scaling must be tensorwise or rowwise, not '" + scaling
                                         : "grad-format must be e4m3 or e5m2, not '" + gradFormat)
                                 << "'";
      return signalPassFailure();
    }
    SmallVector<MatmulOp> linears;
    getOperation().walk([&](MatmulOp m) {
      auto lhs = cast<RankedTensorType>(m.getLhs().getType());
      auto rhs = cast<RankedTensorType>(m.getRhs().getType());
      if (m.getTransposeLhs() || lhs.getRank() < 2 || rhs.getRank() != 2 ||
          !lhs.getElementType().isF32() || !isParameter(unrounded(m.getRhs())))
        return;
      llvm::SmallPtrSet<Operation *, 16> seen;
      if (!lmHead && feedsResults(m.getResult(), seen))
        return;
      linears.push_back(m);
    });
    OpBuilder b(&getContext());
    for (MatmulOp m : linears) {
      b.setInsertionPoint(m);
      Value weight = unrounded(m.getRhs());
      auto f = b.create<Fp8MatmulOp>(m.getLoc(), m.getLhs(), weight, *sc, Fp8Format::e4m3,
                                     Fp8Format::e4m3, *grad, /*transpose_lhs=*/false,
                                     m.getTransposeRhs(), /*fast_accum=*/true,
                                     /*bf16_weight_grad=*/weight != m.getRhs());
      m.getResult().replaceAllUsesWith(f.getResult());
      m.erase(); // the weight's rounding casts die with it (canonicalize)
    }
  }
};

} // namespace
} // namespace loom
