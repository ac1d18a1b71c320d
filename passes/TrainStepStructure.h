//===- TrainStepStructure.h - Finding parameters, gradients and the norm -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The SPMD passes rewrite @train_step as BuildTrainStep leaves it (before
// canonicalization and CSE): for parameter i, argument i is the parameter,
// P + i and 2P + i its AdamW moments; the AdamW op's gradient operand is the
// unclipped gradient g_i times the clip coefficient (a loom.min), or g_i
// itself without clipping; the global norm's term for g_i is
// reduce_sum(g_i * g_i) (or g_i * g_i for a scalar). This file recovers
// those pieces, and fails with a diagnostic when the function has another
// shape, so a pass never guesses. loom-fuse-gradient-clipping removes the
// squares and the clip, so it runs after every pass that uses this.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_TRAINSTEPSTRUCTURE_H
#define LOOM_PASSES_TRAINSTEPSTRUCTURE_H

#include "ir/LoomOps.h"
#include "ir/Sharding.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace loom {

struct ParamUpdate {
  unsigned index = 0;
  mlir::BlockArgument param, expAvg, expAvgSq;
  AdamWOp adamw;
  mlir::Value grad;          // unclipped gradient
  MulOp clip;                // grad * coef feeding AdamW; null without clipping
  MulOp square;              // grad * grad
  mlir::Value normTerm;      // this parameter's sum of squares (a scalar)
};

struct TrainStepStructure {
  mlir::func::FuncOp step;
  llvm::SmallVector<ParamUpdate> params;
};

/// The structure of @train_step in `module`; failure after a diagnostic.
mlir::FailureOr<TrainStepStructure> analyzeTrainStep(mlir::ModuleOp module);

/// The module's device mesh (set by loom-annotate-data-parallel), or
/// failure after a diagnostic naming the pass to run first.
mlir::FailureOr<MeshAttr> requireMesh(mlir::ModuleOp module);

/// Sets the function type from its block arguments and return operands
/// (after a pass changed local types).
void refreshFunctionType(mlir::func::FuncOp f);

} // namespace loom

#endif
