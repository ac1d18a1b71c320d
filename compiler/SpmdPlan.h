//===- SpmdPlan.h - Plans on the command line, and what they shard -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_SPMDPLAN_H
#define LOOM_COMPILER_SPMDPLAN_H

#include "compiler/CompileTrainStep.h"
#include "loom/train/StepRunner.h"
#include "planner/Plan.h"

#include <string>

namespace loom::compiler {

/// Parses a --plan value and checks it can run: known keys, positive
/// values, only executable axes, and (when worldSize > 0) the identity
/// dp_replicate * dp_shard * cp * tp * pp = worldSize.
bool parseSpmdPlan(const std::string &text, int worldSize, planner::Plan &plan, std::string &err);

/// Prints the plan, which parameters stay whole along dp_shard and why,
/// and the per-rank state bytes beside one device's.
void printSpmdSummary(const planner::Plan &plan, const TrainProgram &tp, const train::StepRunner &r,
                      const std::string &ranksAre = "simulated ranks on the cpu backend");

/// Prints each rank's device memory by category (the compiler's buffer
/// plan split at its peak, plus the backend's workspace and the
/// communicator's staging), what the rank allocated and, for simulated
/// ranks on one GPU, what the GPU lost while the rank was created.
/// Nothing when the runner holds no device memory (the CPU backend).
void printRankDeviceMemory(const TrainProgram &tp, const train::StepRunner &r);

/// What a training run's runner holds: device memory (all ranks'), and for
/// a plan of several ranks printSpmdSummary (the ranks named as processes
/// or simulated ranks on `backend`) and printRankDeviceMemory.
void printRunnerSummary(const planner::Plan &plan, const TrainProgram &tp,
                        const train::StepRunner &r, const std::string &backend, bool multiProcess);

} // namespace loom::compiler

#endif
