//===- InsertDdpCollectives.cpp - Average over dp_replicate ---------------===//
//
// Part of loom, under the Apache License v2.0.
//
// DDP, and the outer (replicated) axis of HSDP. Runs after the FSDP pass,
// so under HSDP the gradient it averages is already the reduce-scattered
// shard: the inter-replica traffic is 1/S of the parameter size. Each
// all-reduce sits right after its gradient is complete, which is where a
// backend can overlap it with the rest of the backward pass.
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"
#include "passes/Passes.h"
#include "passes/TrainStepStructure.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_INSERTDDPCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

struct InsertDdpCollectivesPass : impl::InsertDdpCollectivesBase<InsertDdpCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    MeshAttr mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
    if (!mesh) {
      module.emitError("no loom.mesh: run loom-annotate-data-parallel first");
      return signalPassFailure();
    }
    if (mesh.getDpReplicate() == 1)
      return;
    auto s = analyzeTrainStep(module);
    if (failed(s))
      return signalPassFailure();
    func::FuncOp step = s->step;
    Block &body = step.getBody().front();
    ArrayAttr axis = meshAxes(ctx, {MeshAxis::dp_replicate});
    OpBuilder b(ctx);
    for (ParamUpdate &u : s->params) {
      if (Operation *def = u.grad.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&body);
      auto avg = b.create<AllReduceOp>(u.adamw.getLoc(), u.grad.getType(), u.grad, axis,
                                       ReduceKind::mean);
      u.grad.replaceAllUsesExcept(avg.getResult(), avg);
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    Value loss = ret.getOperand(0);
    ret.setOperand(0, b.create<AllReduceOp>(step.getLoc(), loss.getType(), loss, axis,
                                            ReduceKind::mean));
  }
};

} // namespace
} // namespace loom
