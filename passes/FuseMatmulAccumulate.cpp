//===- FuseMatmulAccumulate.cpp - Gradient sums into GEMM epilogues -------===//
//
// Part of loom, under the Apache License v2.0.
//
// The backward sums a value's input gradients over its readers: for the
// normed hidden state of a Llama layer that is
//   dx = dq Wq + dk Wk + dv Wv
// as two adds of f32 tensors [tokens, hidden], each a full pass over memory
// (three reads, one write of 4-byte elements), 48 of them in a 16-layer
// model's step. A GEMM computes D = A B + C for little more than D = A B
// (C is read in its epilogue, while the tensor cores are the bottleneck),
// so each add(x, matmul(a, b)) becomes matmul_accumulate(a, b, x), placed
// where the add was.
//
// Why only after the loss gradient: there every such add is a gradient sum
// (autodiff's accumulation of a value's cotangents). In the forward the same
// shape of add is a residual connection; fusing it would be as exact, but it
// would move the forward's products, which recomputation and the planner
// read as plain matmuls.
//
// Exact: the add rounded the matmul's f32 (or f64) result plus x once; the
// GEMM rounds its f32 accumulator plus x once, and the accumulator is that
// result. Under autocast the input-gradient products are already f32
// results of bf16 operands (a bf16 GEMM with an f32 result; codegen reads
// the widened operands' bf16 buffers), so this covers bf16 steps as well. A
// product rounded to bf16 before the add is left alone: fusing it would drop
// that rounding.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"
#include "passes/PatternUtils.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEMATMULACCUMULATE
#include "passes/Passes.h.inc"

namespace {

/// The matmul that produces `v` for this add alone, with the add's type.
MatmulOp productOf(Value v, Type sum) {
  auto m = v.getDefiningOp<MatmulOp>();
  return m && v.hasOneUse() && v.getType() == sum ? m : nullptr;
}

/// add(x, matmul(a, b)) -> matmul_accumulate(a, b, x), where the add was.
/// Returns whether it fused.
bool fuse(OpBuilder &b, AddOp add) {
  if (!isSameTypeWideSum(add))
    return false;
  Type sum = add.getType();
  // The later operand is the GEMM when both are products (the other is
  // ready before it): the chain dq Wq + dk Wk + dv Wv keeps its order.
  Value addend = add.getLhs();
  MatmulOp m = productOf(add.getRhs(), sum);
  if (!m) {
    m = productOf(add.getLhs(), sum);
    addend = add.getRhs();
  }
  if (!m)
    return false;
  b.setInsertionPoint(add);
  auto fused = b.create<MatmulAccumulateOp>(add.getLoc(), m.getLhs(), m.getRhs(), addend,
                                            m.getTransposeLhs(), m.getTransposeRhs());
  add.getResult().replaceAllUsesWith(fused.getResult());
  add.erase();
  m.erase();
  return true;
}

struct FuseMatmulAccumulatePass : impl::FuseMatmulAccumulateBase<FuseMatmulAccumulatePass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (!f.getBody().hasOneBlock())
      return;
    // The backward: everything after the loss gradient. A function without
    // one (a pipeline stage's backward) is left as it is.
    SmallVector<AddOp> adds;
    bool backward = false;
    for (Operation &op : f.getBody().front()) {
      if (isa<CrossEntropyGradOp, VocabShardCrossEntropyGradOp>(op))
        backward = true;
      else if (auto add = dyn_cast<AddOp>(op); add && backward)
        adds.push_back(add);
    }
    OpBuilder b(&getContext());
    for (AddOp add : adds)
      fuse(b, add);
  }
};

} // namespace
} // namespace loom
