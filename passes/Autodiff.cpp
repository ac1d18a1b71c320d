//===- Autodiff.cpp -------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/Autodiff.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace loom {

LogicalResult buildReverseMode(OpBuilder &b, ArrayRef<Operation *> ops, ArrayRef<Value> wrt,
                               Value y, Value seed, llvm::DenseMap<Value, Value> &grads) {
  // Active values: those that depend on `wrt`. Others (token ids, masks,
  // rotary tables) need no gradient.
  llvm::DenseSet<Value> active(wrt.begin(), wrt.end());
  for (Operation *op : ops)
    if (llvm::any_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
      for (Value r : op->getResults()) active.insert(r);
  grads[y] = seed;
  for (Operation *op : llvm::reverse(ops)) {
    if (!llvm::any_of(op->getResults(), [&](Value r) { return grads.count(r); }))
      continue;
    if (!llvm::any_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
      continue;
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff)
      return op->emitError("has no gradient rule");
    SmallVector<Value> dys, dxs;
    for (Value r : op->getResults()) dys.push_back(grads.lookup(r));
    if (failed(diff.buildGradients(b, dys, dxs)))
      return failure();
    for (auto [operand, dx] : llvm::zip(op->getOperands(), dxs)) {
      if (!dx || !active.contains(operand))
        continue;
      Value &g = grads[operand];
      g = g ? b.create<AddOp>(op->getLoc(), g, dx).getResult() : dx;
    }
  }
  return success();
}

} // namespace loom
