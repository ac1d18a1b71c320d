//===- TrainStepStructure.cpp ---------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/TrainStepStructure.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {

FailureOr<MeshAttr> requireMesh(ModuleOp module) {
  if (MeshAttr mesh = lookupMesh(module))
    return mesh;
  module.emitError("no loom.mesh: run loom-annotate-data-parallel first");
  return failure();
}

FailureOr<TrainStepStructure> analyzeTrainStep(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return module.emitError("expected @train_step (run loom-build-train-step first)"), failure();
  Block &body = step.getBody().front();
  unsigned n = body.getNumArguments();
  if (n < 6 || (n - 3) % 3)
    return step.emitError("@train_step must take 3P + 3 arguments"), failure();
  unsigned P = (n - 3) / 3;
  TrainStepStructure s;
  s.step = step;
  s.params.resize(P);
  for (unsigned i = 0; i < P; ++i) {
    ParamUpdate &u = s.params[i];
    u.index = i;
    u.param = body.getArgument(i);
    u.expAvg = body.getArgument(P + i);
    u.expAvgSq = body.getArgument(2 * P + i);
  }
  step.walk([&](AdamWOp op) {
    if (auto arg = dyn_cast<BlockArgument>(op.getParam()); arg && arg.getOwner() == &body &&
                                                           arg.getArgNumber() < P)
      s.params[arg.getArgNumber()].adamw = op;
  });
  for (ParamUpdate &u : s.params) {
    if (!u.adamw || u.adamw.getExpAvg() != u.expAvg || u.adamw.getExpAvgSq() != u.expAvgSq)
      return step.emitError("parameter argument ") << u.index << " has no AdamW update of its own",
             failure();
    Value g = u.adamw.getGrad();
    if (auto mul = g.getDefiningOp<MulOp>(); mul && mul.getRhs().getDefiningOp<MinOp>()) {
      u.clip = mul;
      g = mul.getLhs();
    }
    u.grad = g;
    for (Operation *user : g.getUsers())
      if (auto mul = dyn_cast<MulOp>(user); mul && mul.getLhs() == g && mul.getRhs() == g)
        u.square = mul;
    if (!u.square)
      return step.emitError("the gradient of parameter argument ")
                 << u.index << " has no term in the gradient norm",
             failure();
    u.normTerm = u.square.getResult();
    if (tensorType(g).getRank() > 0) {
      if (!u.square->hasOneUse() || !isa<ReduceOp>(*u.square->user_begin()))
        return step.emitError("the squared gradient of parameter argument ")
                   << u.index << " is not summed once",
               failure();
      u.normTerm = u.square->user_begin()->getResult(0);
    }
  }
  return s;
}

void refreshFunctionType(func::FuncOp f) {
  Block &body = f.getBody().front();
  SmallVector<Type> args, results;
  for (BlockArgument a : body.getArguments()) args.push_back(a.getType());
  for (Value v : body.getTerminator()->getOperands()) results.push_back(v.getType());
  f.setFunctionType(FunctionType::get(f.getContext(), args, results));
}

} // namespace loom
