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

struct UseBf16MatmulsPass : impl::UseBf16MatmulsBase<UseBf16MatmulsPass> {
  void runOnOperation() override {
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
