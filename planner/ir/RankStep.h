//===- RankStep.h - One rank's training step, for the planner ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Internal to planner/ir (MLIR types): the per-rank @train_step of a plan,
// compiled by the compiler's entry point as `loom train --precision bf16
// --plan ...` compiles it, for the buffer plan (IrCost.cpp) and the
// partitioned IR's own costs (PartitionedCost.cpp).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_IR_RANKSTEP_H
#define LOOM_PLANNER_IR_RANKSTEP_H

#include "planner/Plan.h"
#include "planner/ir/PartitionedCost.h"
#include "loom/train/TrainProgram.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>

namespace loom::planner {

/// One rank's training step of `plan` at `microbatch` rows of `seq` tokens,
/// compiled by compiler::compileTrainStep under the plan's options
/// (compiler::trainOptionsForPlan); `inspectStep` sees the built step's IR
/// before it is lowered. False with a one-line `err`.
bool compileRankStep(const std::string &path, int64_t microbatch, int64_t seq, const Plan &plan,
                     train::TrainProgram &out, std::string &err,
                     const std::function<void(mlir::ModuleOp)> &inspectStep);

/// PartitionedCost.cpp's reading of a built rank step.
void partitionedCostOf(mlir::ModuleOp module, const HardwareProfile &hw, int gpusPerNode,
                       PartitionedCost &out);

} // namespace loom::planner

#endif
