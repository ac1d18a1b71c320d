//===- ParallelLoss.h - Cross-entropy of sharded logits ---------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_PARALLELLOSS_H
#define LOOM_PASSES_PARALLELLOSS_H

#include "ir/Sharding.h"

namespace loom {

/// The mean cross-entropy of `logits` [N, V] against `targets` [N] for
/// logits placed by `sharding` (@forward's result; null: one device's
/// cross_entropy). A shard placement of `vocabDim` (the unflattened
/// logits' last dim) makes the loss vocabulary-parallel over its axes;
/// a shard placement of another dim (rows) averages the per-rank loss
/// over its axes. Built before autodiff (ParallelLoss.cpp).
mlir::Value buildParallelLoss(mlir::OpBuilder &b, mlir::Location loc, mlir::Value logits,
                              mlir::Value targets, ShardingAttr sharding, int64_t vocabDim);

} // namespace loom

#endif
