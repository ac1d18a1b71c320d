//===- UseBf16Matmuls.cpp - Autocast matmuls on bf16 tensors --------------===//
//
// Part of loom, under the Apache License v2.0.
//
// AutocastBf16 expresses bf16 compute as rounding: a matmul of
// cast_f32(a_bf16) and cast_f32(b_bf16) whose result is immediately cast to
// bf16. A matmul on a_bf16 and b_bf16 with a bf16 result computes exactly
// that (the widening is exact, the accumulation is f32 either way, the
// result is rounded once), so the rewrite changes no value; it lets a
// backend call a bf16 tensor-core GEMM and drops the f32 copies.
//
// A biased projection (torch's addmm) is round(matmul(a, b) + bias) with the
// bias rounded to bf16 first (AutocastBf16): one matmul_bias on the bf16
// tensors computes exactly that too, the bias added to the f32 accumulator
// and the sum rounded once, as cuBLASLt's bias epilogue does.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_USEBF16MATMULS
#include "passes/Passes.h.inc"

namespace {

bool isBf16(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isBF16();
}

/// `v` as the bf16 tensor it was widened from, or null.
Value widenedFromBf16(Value v) {
  auto c = v.getDefiningOp<CastOp>();
  return c && isBf16(c.getInput()) ? c.getInput() : Value();
}

/// The single user of `v` if it is a cast to bf16, else null.
CastOp roundingUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  auto round = dyn_cast<CastOp>(*v.getUsers().begin());
  return round && isBf16(round.getResult()) ? round : nullptr;
}

/// round(matmul(widen(a), widen(b)) + widen(bias)) -> matmul_bias(a, b, bias),
/// the bias a vector over the product's last dim. Returns whether it fused.
bool fuseBiasedMatmul(OpBuilder &b, MatmulOp m) {
  if (!m.getResult().hasOneUse() || !widenedFromBf16(m.getLhs()) || !widenedFromBf16(m.getRhs()))
    return false;
  auto add = dyn_cast<AddOp>(*m.getResult().getUsers().begin());
  if (!add || add.getType() != m.getType())
    return false;
  Value bias = widenedFromBf16(add.getLhs() == m.getResult() ? add.getRhs() : add.getLhs());
  CastOp round = roundingUser(add.getResult());
  auto out = cast<RankedTensorType>(m.getType());
  if (!bias || !round ||
      cast<RankedTensorType>(bias.getType()).getShape() != ArrayRef<int64_t>{out.getShape().back()})
    return false;
  b.setInsertionPoint(add);
  auto fused = b.create<MatmulBiasOp>(m.getLoc(), widenedFromBf16(m.getLhs()),
                                      widenedFromBf16(m.getRhs()), bias, m.getTransposeLhs(),
                                      m.getTransposeRhs());
  round.getResult().replaceAllUsesWith(fused.getResult());
  round.erase();
  add.erase();
  m.erase();
  return true;
}

struct UseBf16MatmulsPass : impl::UseBf16MatmulsBase<UseBf16MatmulsPass> {
  void runOnOperation() override {
    SmallVector<MatmulOp> biased;
    getOperation().walk([&](MatmulOp m) { biased.push_back(m); });
    OpBuilder builder(&getContext());
    for (MatmulOp m : biased)
      fuseBiasedMatmul(builder, m);
    SmallVector<MatmulOp> targets;
    getOperation().walk([&](MatmulOp m) {
      if (!m.getResult().hasOneUse() || !widenedFromBf16(m.getLhs()) ||
          !widenedFromBf16(m.getRhs()))
        return;
      auto round = dyn_cast<CastOp>(*m.getResult().getUsers().begin());
      if (round && isBf16(round.getResult()))
        targets.push_back(m);
    });
    OpBuilder b(&getContext());
    for (MatmulOp m : targets) {
      auto round = cast<CastOp>(*m.getResult().getUsers().begin());
      b.setInsertionPoint(m);
      auto bf = b.create<MatmulOp>(m.getLoc(), widenedFromBf16(m.getLhs()),
                                   widenedFromBf16(m.getRhs()), m.getTransposeLhs(),
                                   m.getTransposeRhs());
      round.getResult().replaceAllUsesWith(bf.getResult());
      round.erase();
      m.erase();
      // The widening casts die with their last user (canonicalize removes them).
    }
  }
};

} // namespace
} // namespace loom
