//===- InsertFsdpCollectives.cpp - Partition along dp_shard (ZeRO-3) ------===//
//
// Part of loom, under the Apache License v2.0.
//
// Turns the annotated (global-parameter) step into the rank-local one: a
// sharded parameter enters as its dim-0 shard, is all-gathered shortly
// before its first use in the forward pass (and, resharding after forward,
// again for the backward pass, so the arena can reuse the gathered bytes
// in between), and its gradient leaves through a reduce-scatter, so the
// gradient, both AdamW moments and the update are 1/S of the full size.
//
// Equivalence with one device: each rank's cross-entropy is the mean over
// its own B/dp rows, so the global mean is the mean of the rank means (equal
// sizes) and so is the gradient; hence every reduction here is a mean,
// except the gradient norm's sum of squares, which is a sum over shards.
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"
#include "passes/TrainStepStructure.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_INSERTFSDPCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

RankedTensorType withDim0(RankedTensorType t, int64_t d0) {
  SmallVector<int64_t> shape(t.getShape());
  shape[0] = d0;
  return RankedTensorType::get(shape, t.getElementType());
}

struct InsertFsdpCollectivesPass : impl::InsertFsdpCollectivesBase<InsertFsdpCollectivesPass> {
  using Base::Base;

  /// Moves each gather `prefetch` places ahead of its first reader, in the
  /// order the readers come.
  void place(SmallVector<std::pair<Operation *, AllGatherOp>> &gathers) {
    llvm::stable_sort(gathers, [](auto &a, auto &b) { return a.first->isBeforeInBlock(b.first); });
    for (size_t k = 0; k < gathers.size(); ++k) {
      size_t ahead = k >= size_t(prefetch) ? k - size_t(prefetch) : 0;
      gathers[k].second->moveBefore(gathers[ahead].first);
    }
  }

  /// Splits each gather's readers at the loss: forward readers keep it,
  /// backward readers get a second gather (reshard-after-forward), then
  /// places both sets.
  void scheduleGathers(func::FuncOp step, ArrayRef<AllGatherOp> gathers) {
    Operation *loss = nullptr;
    step.walk([&](CrossEntropyOp ce) {
      if (!loss) loss = ce;
    });
    SmallVector<std::pair<Operation *, AllGatherOp>> forward, backward;
    auto firstReader = [](Value v, function_ref<bool(Operation *)> keep) {
      Operation *first = nullptr;
      for (Operation *u : v.getUsers())
        if (keep(u) && (!first || u->isBeforeInBlock(first)))
          first = u;
      return first;
    };
    for (AllGatherOp g : gathers) {
      auto isForward = [&](Operation *u) { return !loss || !loss->isBeforeInBlock(u); };
      auto isBackward = [&](Operation *u) { return !isForward(u); };
      Operation *f = firstReader(g.getResult(), isForward);
      Operation *bw = firstReader(g.getResult(), isBackward);
      if (f && bw && reshardAfterForward) {
        OpBuilder b(g);
        auto again = cast<AllGatherOp>(b.clone(*g.getOperation()));
        g.getResult().replaceUsesWithIf(again.getResult(), [&](OpOperand &use) {
          return isBackward(use.getOwner());
        });
        forward.push_back({f, g});
        backward.push_back({bw, again});
      } else if (f || bw) {
        (f ? forward : backward).push_back({f ? f : bw, g});
      }
    }
    place(forward);
    place(backward);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    FailureOr<MeshAttr> found = requireMesh(module);
    if (failed(found))
      return signalPassFailure();
    MeshAttr mesh = *found;
    int64_t S = mesh.getDpShard();
    if (S == 1)
      return; // nothing is sharded along dp_shard
    auto s = analyzeTrainStep(module);
    if (failed(s))
      return signalPassFailure();
    func::FuncOp step = s->step;
    Block &body = step.getBody().front();
    ArrayAttr shardAxis = meshAxes(ctx, {MeshAxis::dp_shard});
    OpBuilder b(ctx);
    if (prefetch < 0) {
      module.emitError("prefetch must not be negative");
      return signalPassFailure();
    }
    SmallVector<AllGatherOp> gathers;

    for (ParamUpdate &u : s->params) {
      auto sharding = step.getArgAttrOfType<ShardingAttr>(u.index, kShardingAttrName);
      PlacementAttr along = sharding ? sharding.along(MeshAxis::dp_shard) : PlacementAttr();
      if (!along) {
        step.emitError("parameter argument ") << u.index << " has no dp_shard placement";
        return signalPassFailure();
      }
      Location loc = u.adamw.getLoc();
      Operation *gradDef = u.grad.getDefiningOp();
      if (gradDef)
        b.setInsertionPointAfter(gradDef);
      else
        b.setInsertionPointToStart(&body);

      if (along.getKind() != PlacementKind::shard) {
        // Replicated parameter: every rank updates the whole tensor with the
        // mean gradient; its norm term is then the same on every rank.
        auto avg = b.create<AllReduceOp>(loc, u.grad.getType(), u.grad, shardAxis, ReduceKind::mean);
        u.grad.replaceAllUsesExcept(avg.getResult(), avg);
        continue;
      }
      if (along.getDim() != 0) {
        step.emitError("parameter argument ") << u.index << ": only Shard(0) is partitioned";
        return signalPassFailure();
      }
      auto full = cast<RankedTensorType>(u.param.getType());
      if (full.getRank() == 0 || full.getDimSize(0) % S) {
        step.emitError("parameter argument ")
            << u.index << ": dim 0 of " << full << " does not divide by dp_shard=" << S;
        return signalPassFailure();
      }
      RankedTensorType local = withDim0(full, full.getDimSize(0) / S);

      // Gradient: reduce-scatter right where it is complete.
      auto scattered = b.create<ReduceScatterOp>(loc, local, u.grad, shardAxis, /*dim=*/0,
                                                 ReduceKind::mean);
      u.grad.replaceAllUsesExcept(scattered.getResult(), scattered);
      // The squares and the clip now see the shard: fix their types.
      u.square.getResult().setType(local);
      if (u.clip)
        u.clip.getResult().setType(local);
      // The norm term is this rank's share: sum the shares.
      b.setInsertionPointAfterValue(u.normTerm);
      auto total = b.create<AllReduceOp>(loc, u.normTerm.getType(), u.normTerm, shardAxis,
                                         ReduceKind::sum);
      u.normTerm.replaceAllUsesExcept(total.getResult(), total);

      // Parameter: the argument becomes the shard, gathered for compute.
      b.setInsertionPointToStart(&body);
      auto gathered = b.create<AllGatherOp>(loc, full, u.param, shardAxis, b.getI64IntegerAttr(0));
      gathers.push_back(gathered);
      u.param.replaceAllUsesExcept(gathered.getResult(),
                                   SmallPtrSet<Operation *, 2>{gathered, u.adamw});
      u.param.setType(local);
      u.expAvg.setType(local);
      u.expAvgSq.setType(local);
      for (Value r : u.adamw->getResults()) r.setType(local);
    }
    // The loss: the mean over the ranks' equal-size batches.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    Value loss = ret.getOperand(0);
    auto avg = b.create<AllReduceOp>(step.getLoc(), loss.getType(), loss, shardAxis, ReduceKind::mean);
    ret.setOperand(0, avg);
    scheduleGathers(step, gathers);
    refreshFunctionType(step);
  }
};

} // namespace
} // namespace loom
