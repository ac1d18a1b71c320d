//===- SequencePlan.h - Context, sequence and loss parallel plans -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The compiler's side of issue 18: the plan's choices into the compile
// options, the dims a plan must divide (checked before any pass runs, so
// the error names the plan) and the token layout the compiled step
// expects (each rank's token ids: train::rankTokens in RankSlices.h).
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_SEQUENCEPLAN_H
#define LOOM_COMPILER_SEQUENCEPLAN_H

#include "compiler/CompileTrainStep.h"
#include "planner/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace loom::compiler {

/// cp, cp_rotate, tp_sp and loss_parallel of `plan` into `o` (sequence and
/// loss parallelism only with tp > 1).
void applySequencePlan(const planner::Plan &plan, TrainOptions &o);

/// The plan as `o` spells it ("cp=2,tp=2"), for error messages.
std::string planNameOf(const TrainOptions &o);

/// Refuses, naming the dim and the plan, a sequence of `seq` tokens that
/// does not cut into 2 cp load-balanced chunks (or, under sequence
/// parallelism, whose cp share does not divide by tp), and attention heads
/// (query, or key/value where tp does not replicate them) that do not
/// divide by tp. `fused` is the model after fusion, before the SPMD passes.
bool checkSequencePlan(mlir::ModuleOp fused, const TrainOptions &o, int64_t seq, std::string &err);

/// After the SPMD passes: which ranks hold which tokens (from @forward's
/// token sharding) and the plan's cp.
void recordSequenceLayout(mlir::ModuleOp module, const TrainOptions &o, TrainProgram &out);

/// Prints what cp, sequence and loss parallelism do under `plan` (nothing
/// when the plan has neither cp nor tp).
void printSequenceSummary(const planner::Plan &plan, const TrainProgram &tp);

} // namespace loom::compiler

#endif
