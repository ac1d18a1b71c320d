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
#include "passes/PatternUtils.h"
#include "passes/TrainStepStructure.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_INSERTDDPCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

struct InsertDdpCollectivesPass : impl::InsertDdpCollectivesBase<InsertDdpCollectivesPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    FailureOr<MeshAttr> found = requireMesh(module);
    if (failed(found))
      return signalPassFailure();
    MeshAttr mesh = *found;
    if (mesh.getDpReplicate() == 1)
      return;
    auto s = analyzeTrainStep(module);
    if (failed(s))
      return signalPassFailure();
    func::FuncOp step = s->step;
    Block &body = step.getBody().front();
    ArrayAttr axis = meshAxes(ctx, {MeshAxis::dp_replicate});
    OpBuilder b(ctx);
    // Gradients in the order the backward pass completes them.
    SmallVector<Value> grads;
    for (ParamUpdate &u : s->params) grads.push_back(u.grad);
    auto position = [&](Value v) -> Operation * { return v.getDefiningOp(); };
    llvm::stable_sort(grads, [&](Value a, Value b) {
      Operation *pa = position(a), *pb = position(b);
      if (!pa || !pb)
        return !pa && pb; // block arguments are ready first
      return pa != pb && pa->isBeforeInBlock(pb);
    });
    // Buckets of consecutive gradients up to bucketBytes (at least one each).
    SmallVector<SmallVector<Value>> buckets;
    int64_t filled = 0;
    for (Value g : grads) {
      auto t = tensorType(g);
      int64_t bytes = t.getNumElements() * int64_t(t.getElementTypeBitWidth() / 8);
      if (buckets.empty() || bucketBytes <= 0 || filled + bytes > bucketBytes ||
          tensorType(buckets.back().front()).getElementType() != t.getElementType()) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(g);
      filled += bytes;
    }
    for (ArrayRef<Value> bucket : buckets) {
      Value last = bucket.back();
      if (Operation *def = last.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&body);
      Location loc = step.getLoc();
      if (bucket.size() == 1) {
        auto avg = b.create<AllReduceOp>(loc, last.getType(), last, axis, ReduceKind::mean);
        last.replaceAllUsesExcept(avg.getResult(), avg);
        continue;
      }
      // Flatten, join, reduce once, cut apart, restore the shapes.
      SmallVector<Value> flat;
      SmallVector<int64_t> sizes;
      SmallPtrSet<Operation *, 8> readers;
      for (Value g : bucket) {
        auto t = tensorType(g);
        auto r = b.create<ReshapeOp>(
            loc, RankedTensorType::get({t.getNumElements()}, t.getElementType()), g);
        readers.insert(r);
        flat.push_back(r);
        sizes.push_back(t.getNumElements());
      }
      Value joined = b.create<ConcatOp>(loc, flat, b.getI64IntegerAttr(0));
      Value avg = b.create<AllReduceOp>(loc, joined.getType(), joined, axis, ReduceKind::mean);
      auto pieces = b.create<SplitOp>(loc, avg, b.getI64IntegerAttr(0),
                                      b.getDenseI64ArrayAttr(sizes));
      for (auto [g, piece] : llvm::zip(bucket, pieces.getResults())) {
        Value back = b.create<ReshapeOp>(loc, g.getType(), piece);
        Value(g).replaceAllUsesExcept(back, readers);
      }
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
