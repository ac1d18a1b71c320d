//===- ParallelLoss.cpp - Cross-entropy of sharded logits -----------------===//
//
// Part of loom, under the Apache License v2.0.
//
// BuildTrainStep's loss when @forward's logits are sharded (issue 18):
//  - along the vocabulary over tp (loss parallelism): each rank holds
//    logits [N, V/tp]. With m the row maximum over the whole vocabulary
//    (each rank's maximum, gathered: tp numbers per row), every rank sums
//    exp(x - m) over its columns and picks x[t] - m if it holds column t
//    (vocab_shard_cross_entropy); an all_reduce (sum) of both gives row n's
//    loss log(sum) - (x[t] - m). The shift m cancels, so it needs no
//    gradient, and nothing the size of [N, V] is communicated or gathered.
//  - along the rows (tokens) over cp, or over tp under sequence parallelism
//    without loss parallelism: each rank's mean over its rows, then the
//    all_reduce (mean) over those axes (equal row counts make the mean of
//    means the global mean). Built before autodiff, so the seed of every
//    rank's backward is 1 / ranks, as one device's mean gives each token.
//===----------------------------------------------------------------------===//
#include "passes/ParallelLoss.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {

Value buildParallelLoss(OpBuilder &b, Location loc, Value logits, Value targets,
                        ShardingAttr sharding, int64_t vocabDim) {
  MLIRContext *ctx = b.getContext();
  SmallVector<MeshAxis> vocabAxes, rowAxes;
  if (sharding)
    for (PlacementAttr p : sharding.getPlacements())
      if (p.getKind() == PlacementKind::shard)
        (p.getDim() == vocabDim ? vocabAxes : rowAxes).push_back(p.getAxis());
  Value loss;
  if (vocabAxes.empty()) {
    loss = b.create<CrossEntropyOp>(loc, logits, targets);
  } else {
    ArrayAttr axes = meshAxes(ctx, vocabAxes);
    MeshAttr mesh = lookupMesh(logits.getParentBlock()->getParentOp());
    auto t = tensorType(logits);
    int64_t N = t.getDimSize(0), Vl = t.getDimSize(1), n = mesh.groupSize(axes);
    Type f = t.getElementType();
    // This rank's first column: a table of every rank's, sliced per rank.
    SmallVector<int64_t> offsets;
    for (int64_t k = 0; k < n; ++k) offsets.push_back(k * Vl);
    Value table = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get({n}, b.getI64Type()),
                                    ArrayRef<int64_t>(offsets)),
        StringAttr(), ParamAttr());
    Value first = b.create<ShardSliceOp>(loc, RankedTensorType::get({1}, b.getI64Type()), table,
                                         axes, b.getI64IntegerAttr(0));
    Value localMax = b.create<ReduceOp>(loc, logits, ReduceKind::max, ArrayRef<int64_t>{1},
                                        /*keepdim=*/true);
    Value maxes = b.create<AllGatherOp>(loc, RankedTensorType::get({N, n}, f), localMax, axes,
                                        b.getI64IntegerAttr(1));
    Value shift = b.create<ReduceOp>(loc, maxes, ReduceKind::max, ArrayRef<int64_t>{1},
                                     /*keepdim=*/false);
    auto parts = b.create<VocabShardCrossEntropyOp>(loc, logits, targets, first, shift, Vl * n);
    Value sum = b.create<AllReduceOp>(loc, parts.getSumexp().getType(), parts.getSumexp(), axes,
                                      ReduceKind::sum);
    Value target = b.create<AllReduceOp>(loc, parts.getTarget().getType(), parts.getTarget(),
                                         axes, ReduceKind::sum);
    Value rows = b.create<SubOp>(loc, b.create<LogOp>(loc, sum), target);
    loss = b.create<ReduceOp>(loc, rows, ReduceKind::mean, ArrayRef<int64_t>{0}, /*keepdim=*/false);
  }
  if (!rowAxes.empty())
    loss = b.create<AllReduceOp>(loc, loss.getType(), loss, meshAxes(ctx, rowAxes),
                                 ReduceKind::mean);
  return loss;
}

} // namespace loom
