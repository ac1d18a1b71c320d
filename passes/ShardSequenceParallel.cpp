//===- ShardSequenceParallel.cpp - Megatron sequence parallelism ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// Runs after loom-shard-tensor-parallel has made its regions (copy_to_
// parallel in, all_reduce (sum) out) and after the vocabulary and context
// passes. Between tensor-parallel regions every tp rank holds the same
// activations; Megatron's sequence parallelism keeps 1/tp of the tokens
// there instead:
//   entry  copy_to_parallel(x)  ->  all_gather(x) over tp along the sequence
//          (gradient: reduce_scatter (sum) of the ranks' shares);
//   exit   all_reduce(sum)(y)   ->  reduce_scatter(sum)(y) along it
//          (gradient: all_gather).
// The same bytes move (an all_reduce is a reduce_scatter plus an
// all_gather), and norms, residual and bias adds, an unsplit embedding or
// head run on T/tp rows. The parameters those read get partial gradients
// (each rank saw its own rows): they enter through copy_to_parallel over
// tp, which sums them. Without loss parallelism the token ids themselves
// are split (each rank embeds and scores its own rows, and the loss is
// averaged over tp); with it, the vocabulary-parallel embedding's
// all_reduce is an exit like the others and the head's input an entry.
// A flattened [B T, D] operand is viewed as [B, T, D] around its
// collective, so that each rank's rows are positions, not whole sequences.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/ParallelismRefusal.h"
#include "passes/PatternUtils.h"
#include "passes/SequenceSharding.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_SHARDSEQUENCEPARALLEL
#include "passes/Passes.h.inc"

namespace {

bool overTpOnly(ArrayAttr axes) {
  return axes.size() == 1 && cast<MeshAxisAttr>(axes[0]).getValue() == MeshAxis::tp;
}

struct ShardSequenceParallelPass : impl::ShardSequenceParallelBase<ShardSequenceParallelPass> {
  using Base::Base;
  ShardSequenceParallelPass(const ShardSequenceParallelOptions &o, ParallelismRefusal *r)
      : Base(o), refusal(r) {}
  ParallelismRefusal *refusal = nullptr; // where a refusal is recorded (may be null)

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (tp <= 1)
      return;
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd || fwd.getNumArguments() != 1 || fwd.getNumResults() != 1 ||
        tensorType(fwd.getArgument(0)).getRank() != 2) {
      module.emitError("expected @forward(tokens [B, T]) -> logits");
      return signalPassFailure();
    }
    MeshAttr mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
    if (!mesh || mesh.getTp() != tp) {
      module.emitError("sequence parallelism runs after loom-shard-tensor-parallel with the "
                       "same tp");
      return signalPassFailure();
    }
    // From here on, a failure is the model refusing sp.
    RefusalRecorder recorder(ctx, refusal, RefusedParallelism::Sequence);
    auto refuse = [&] {
      recorder.refused();
      signalPassFailure();
    };
    Value tokens = fwd.getArgument(0);
    int64_t T = tensorType(tokens).getDimSize(1); // this cp rank's tokens
    if (T % tp) {
      fwd.emitError() << "sequence parallelism: the sequence of " << T
                      << (mesh.getCp() > 1 ? " tokens per cp rank" : " tokens")
                      << " does not divide by tp=" << int64_t(tp);
      return refuse();
    }
    // Where the sequence is in every value.
    SequenceRegion all;
    if (failed(followSequence(fwd, T, {{tokens, 1}}, [](OpOperand &) { return false; },
                              /*allowAttention=*/true, "sequence parallelism", all)))
      return refuse();
    SmallVector<CopyToParallelOp> entries;
    SmallVector<AllReduceOp> exits;
    fwd.walk([&](Operation *op) {
      if (auto c = dyn_cast<CopyToParallelOp>(op); c && overTpOnly(c.getAxes()) &&
                                                   all.dims.count(c.getInput()))
        entries.push_back(c);
      if (auto r = dyn_cast<AllReduceOp>(op); r && overTpOnly(r.getAxes()) &&
                                              r.getKind() == ReduceKind::sum &&
                                              all.dims.count(r.getInput()))
        exits.push_back(r);
    });
    if (entries.empty()) {
      fwd.emitError("sequence parallelism: tensor parallelism split no layer to gather into");
      return refuse();
    }
    ArrayAttr tpAxis = meshAxes(ctx, {MeshAxis::tp});
    // Collectives along the sequence, typed whole for now: the region's
    // local types are set below, on both sides of them.
    SmallVector<std::pair<Value, int64_t>> seeds;
    for (AllReduceOp r : exits) {
      OpBuilder b(r);
      int64_t d = all.dims.lookup(r.getInput());
      Value x = splitSequenceDim(b, r.getInput(), d, T);
      int64_t at = x == r.getInput() ? d : d + 1;
      auto rs = b.create<ReduceScatterOp>(r.getLoc(), x.getType(), x, tpAxis, at, ReduceKind::sum);
      seeds.push_back({rs.getResult(), at});
      Value y = mergeSequenceDim(b, rs.getResult(), d, at == d ? 1 : tensorType(x).getDimSize(d));
      r.getResult().replaceAllUsesWith(y);
      r.erase();
    }
    llvm::SmallPtrSet<Operation *, 16> gathers;
    for (CopyToParallelOp c : entries) {
      OpBuilder b(c);
      int64_t d = all.dims.lookup(c.getInput());
      Value x = splitSequenceDim(b, c.getInput(), d, T);
      int64_t at = x == c.getInput() ? d : d + 1;
      auto ag = b.create<AllGatherOp>(c.getLoc(), x.getType(), x, tpAxis, b.getI64IntegerAttr(at));
      gathers.insert(ag);
      Value y = mergeSequenceDim(b, ag.getResult(), d, at == d ? 1 : tensorType(x).getDimSize(d));
      c.getResult().replaceAllUsesWith(y);
      c.erase();
    }
    // Without loss parallelism each rank embeds and scores its own tokens.
    ShardingAttr logits = fwd.getResultAttrOfType<ShardingAttr>(0, kShardingAttrName);
    PlacementAttr vocab = logits ? logits.along(MeshAxis::tp) : PlacementAttr();
    if (!vocab)
      seeds.push_back({tokens, 1});
    SequenceRegion region;
    if (failed(followSequence(
            fwd, T, seeds, [&](OpOperand &use) { return gathers.contains(use.getOwner()); },
            /*allowAttention=*/false, "sequence parallelism", region)))
      return refuse();
    Value result = fwd.getBody().front().getTerminator()->getOperand(0);
    int64_t logitsDim = region.dims.lookup(result);
    bool tokensSplit = region.dims.count(tokens);
    applySequenceRegion(fwd, region, tp, tpAxis, [&](OpBuilder &b, Value table, int64_t d) {
      auto t = tensorType(table);
      SmallVector<int64_t> local(t.getShape());
      local[d] /= tp;
      return b.create<ShardSliceOp>(table.getLoc(), RankedTensorType::get(local, t.getElementType()),
                                    table, tpAxis, b.getI64IntegerAttr(d));
    });
    auto shard = [&](int64_t dim) {
      return PlacementAttr::get(ctx, MeshAxis::tp, PlacementKind::shard, dim, ReduceKind::sum, 1);
    };
    if (tokensSplit)
      addSharding(fwd, 0, /*argument=*/true, shard(1));
    if (region.reachesReturn)
      addSharding(fwd, 0, /*argument=*/false, shard(logitsDim));
  }
};

} // namespace

std::unique_ptr<Pass> createShardSequenceParallel(const ShardSequenceParallelOptions &o,
                                                  ParallelismRefusal *refusal) {
  return std::make_unique<ShardSequenceParallelPass>(o, refusal);
}

} // namespace loom
