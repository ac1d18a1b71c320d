//===- RankStep.h - One rank's training step, for the planner ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Internal to planner/ir (MLIR types): the per-rank @train_step of a plan,
// built exactly as `loom train --precision bf16 --plan ...` builds it, for
// the buffer plan (IrCost.cpp) and the partitioned IR's own costs
// (PartitionedCost.cpp).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_IR_RANKSTEP_H
#define LOOM_PLANNER_IR_RANKSTEP_H

#include "planner/Plan.h"
#include "planner/ir/PartitionedCost.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace loom::planner {

/// The model imported at `microbatch` rows of `seq` tokens, fused with bf16
/// autocast and built through buildSpmdTrainStep for `plan`; null with a
/// one-line `err`.
mlir::OwningOpRef<mlir::ModuleOp> buildRankStep(mlir::MLIRContext &ctx, const std::string &path,
                                                int64_t microbatch, int64_t seq, const Plan &plan,
                                                std::string &err);

/// PartitionedCost.cpp's reading of a built rank step.
void partitionedCostOf(mlir::ModuleOp module, const HardwareProfile &hw, int gpusPerNode,
                       PartitionedCost &out);

} // namespace loom::planner

#endif
