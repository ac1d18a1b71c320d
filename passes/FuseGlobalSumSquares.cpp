//===- FuseGlobalSumSquares.cpp - The gradient norm's sums in one op ------===//
//
// Part of loom, under the Apache License v2.0.
//
// After loom-fuse-gradient-clipping the global gradient norm is a chain
//     sumSq = ((sum_squares(g0) + sum_squares(g1)) + sum_squares(g2)) + ...
// one small reduction and one scalar add per parameter: 146 of each in
// llama-1b's step, 2.7 ms of kernels on an H200, most of them waiting on
// their own launch and latency (a [2048, 512] gradient's sum ran at 218
// GB/s). This pass turns the chain into one loom.global_sum_squares over
// the gradients, placed where the chain's last add was; a backend sums
// every tensor in a few launches.
//
// Exact by definition: global_sum_squares is the value of the ops it
// replaces (each tensor's sum rounded to the element type, the adds in
// chain order), and the backends compute each tensor's sum in SumSquares'
// own order. An add is commutative in IEEE arithmetic, so the running sum
// may be either operand of each add.
//
// Only a chain whose every term is a sum_squares read by that add alone
// folds, from its first term: the SPMD passes' terms that pass through a
// collective (tensor-parallel slices, FSDP shards) end a chain, and a
// rank-0 parameter's term (a plain square) does too.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEGLOBALSUMSQUARES
#include "passes/Passes.h.inc"

namespace {

/// v's defining sum_squares when v is read by one op only, else null.
SumSquaresOp soleTerm(Value v) {
  auto s = v.getDefiningOp<SumSquaresOp>();
  return s && s->hasOneUse() ? s : SumSquaresOp();
}

/// The chain of adds starting at `first` (both operands terms) and each
/// add's sole user that adds one more term; its terms in order.
SmallVector<AddOp> chainFrom(AddOp first, SmallVector<SumSquaresOp> &terms) {
  SmallVector<AddOp> adds;
  SumSquaresOp a = soleTerm(first.getLhs()), b = soleTerm(first.getRhs());
  Type type = first.getType();
  if (!a || !b || a.getType() != type || b.getType() != type)
    return adds;
  terms = {a, b};
  adds.push_back(first);
  while (adds.back()->hasOneUse()) {
    auto next = dyn_cast<AddOp>(*adds.back()->user_begin());
    if (!next || next.getType() != type)
      break;
    Value running = adds.back().getResult();
    Value other = next.getLhs() == running ? next.getRhs() : next.getLhs();
    SumSquaresOp t = other == running ? SumSquaresOp() : soleTerm(other);
    if (!t || t.getType() != type)
      break;
    terms.push_back(t);
    adds.push_back(next);
  }
  return adds;
}

struct FuseGlobalSumSquaresPass : impl::FuseGlobalSumSquaresBase<FuseGlobalSumSquaresPass> {
  void runOnOperation() override {
    SmallVector<AddOp> starts;
    getOperation().walk([&](AddOp add) {
      if (soleTerm(add.getLhs()) && soleTerm(add.getRhs()))
        starts.push_back(add);
    });
    OpBuilder b(&getContext());
    // A start's adds and terms belong to its chain only (each term and each
    // add but the last has one use), so the chains are disjoint.
    for (AddOp first : starts) {
      SmallVector<SumSquaresOp> terms;
      SmallVector<AddOp> adds = chainFrom(first, terms);
      if (adds.empty())
        continue;
      SmallVector<Value> inputs;
      for (SumSquaresOp t : terms) inputs.push_back(t.getInput());
      AddOp last = adds.back();
      b.setInsertionPoint(last);
      auto fused = b.create<GlobalSumSquaresOp>(last.getLoc(), last.getType(), inputs);
      last.getResult().replaceAllUsesWith(fused.getResult());
      for (AddOp a : llvm::reverse(adds)) a.erase();
      for (SumSquaresOp t : terms) t.erase();
    }
  }
};

} // namespace
} // namespace loom
