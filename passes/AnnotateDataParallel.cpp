//===- AnnotateDataParallel.cpp - Mesh and shardings for DDP/FSDP/HSDP ----===//
//
// Part of loom, under the Apache License v2.0.
//
// The seed of the SPMD pipeline: decides, per argument and result of
// @train_step, how the rank-local value relates to the global one. The
// later passes read only these annotations, so what is sharded is decided
// in one place (and printed by the driver from the same attributes).
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"
#include "passes/TrainStepStructure.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_ANNOTATEDATAPARALLEL
#include "passes/Passes.h.inc"

namespace {

struct AnnotateDataParallelPass : impl::AnnotateDataParallelBase<AnnotateDataParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (dpReplicate < 1 || dpShard < 1) {
      module.emitError("dp-replicate and dp-shard must be at least 1");
      return signalPassFailure();
    }
    auto s = analyzeTrainStep(module);
    if (failed(s))
      return signalPassFailure();
    func::FuncOp step = s->step;
    // Tensor and context parallelism (if any) were applied to @forward
    // before: keep their axes and their placements.
    MeshAttr old = module->getAttrOfType<MeshAttr>(kMeshAttrName);
    module->setAttr(kMeshAttrName, MeshAttr::get(ctx, 1, dpReplicate, dpShard,
                                                 old ? old.getCp() : 1, old ? old.getTp() : 1));

    auto placement = [&](MeshAxis axis, PlacementKind kind, int64_t dim = -1) {
      return PlacementAttr::get(ctx, axis, kind, dim, ReduceKind::sum, /*blocks=*/1);
    };
    // Parameters (and everything shaped like them): Replicate along
    // dp_replicate, Shard(0) along dp_shard when dim 0 divides.
    auto paramSharding = [&](RankedTensorType t, ShardingAttr existing) {
      SmallVector<PlacementAttr> p;
      if (existing)
        p.append(existing.getPlacements().begin(), existing.getPlacements().end());
      if (dpReplicate > 1)
        p.push_back(placement(MeshAxis::dp_replicate, PlacementKind::replicate));
      if (dpShard > 1) {
        bool divisible = t.getRank() > 0 && t.getDimSize(0) % dpShard == 0;
        p.push_back(divisible ? placement(MeshAxis::dp_shard, PlacementKind::shard, 0)
                              : placement(MeshAxis::dp_shard, PlacementKind::replicate));
      }
      return ShardingAttr::get(ctx, p);
    };
    // The batch: each data-parallel rank holds its own rows.
    SmallVector<PlacementAttr> batch;
    if (dpReplicate > 1)
      batch.push_back(placement(MeshAxis::dp_replicate, PlacementKind::shard, 0));
    if (dpShard > 1)
      batch.push_back(placement(MeshAxis::dp_shard, PlacementKind::shard, 0));
    auto replicated = ShardingAttr::get(ctx, {});

    unsigned P = s->params.size();
    for (unsigned a = 0; a < 3 * P; ++a)
      step.setArgAttr(a, kShardingAttrName,
                      paramSharding(cast<RankedTensorType>(step.getArgument(a).getType()),
                                    step.getArgAttrOfType<ShardingAttr>(a, kShardingAttrName)));
    step.setArgAttr(3 * P, kShardingAttrName, replicated); // step counter
    step.setArgAttr(3 * P + 1, kShardingAttrName, ShardingAttr::get(ctx, batch));
    step.setArgAttr(3 * P + 2, kShardingAttrName, ShardingAttr::get(ctx, batch));
    // Results: loss, grad_norm and lr are reduced to the global values;
    // updated state and returned gradients are placed like their parameter.
    // Activation sums of squares (checks) stay per-rank partial sums over
    // the data-parallel axes: the driver adds them up.
    SmallVector<PlacementAttr> partial;
    if (dpReplicate > 1)
      partial.push_back(PlacementAttr::get(ctx, MeshAxis::dp_replicate, PlacementKind::partial, -1,
                                           ReduceKind::sum, 1));
    if (dpShard > 1)
      partial.push_back(PlacementAttr::get(ctx, MeshAxis::dp_shard, PlacementKind::partial, -1,
                                           ReduceKind::sum, 1));
    for (unsigned r = 0; r < step.getNumResults(); ++r) {
      Attribute sh = replicated;
      auto name = step.getResultAttrOfType<StringAttr>(r, "loom.name");
      if (name && name.getValue().starts_with("act_sumsq."))
        sh = ShardingAttr::get(ctx, partial);
      else if (r >= 3 && r < 3 + 3 * P)
        sh = step.getArgAttr(r - 3, kShardingAttrName);
      else if (r >= 3 + 3 * P && r < 3 + 4 * P)
        sh = step.getArgAttr(r - 3 - 3 * P, kShardingAttrName);
      step.setResultAttr(r, kShardingAttrName, sh);
    }
  }
};

} // namespace
} // namespace loom
