//===- PipelineProgram.h - Compiling a pipelined training step --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// compileTrainStep's pipeline branch: the plan's schedule decides how the
// stages sit on the ranks (a loop, or ZBV's V) and whether the backward is
// split; the SPMD pipeline (buildSpmdTrainStep with pipeline options) cuts
// the step into stage functions and per-rank optimizers; each is lowered to
// a program whose inputs and outputs carry their roles, for the runtime's
// schedule executor (rt::PipelineRank).
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_PIPELINEPROGRAM_H
#define LOOM_COMPILER_PIPELINEPROGRAM_H

#include "compiler/CompileTrainStep.h"
#include "loom/runtime/PipelineExecutor.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>

namespace loom::compiler {

struct PipelineLayout {
  int pp = 1, microbatches = 1;
  rt::PipelineSchedule schedule;
  bool vshape = false;
  std::vector<int64_t> cuts; // --pp-split: first layer of stages 1..
  /// Sets the pipeline options of the SPMD pipeline (nothing for pp = 1).
  void apply(SpmdStepOptions &o) const;
};

/// Refuses, for a pipeline plan (o.pipeline.pp > 1), what does not combine
/// with pipelines yet: fp8 and activation checkpointing. One line naming
/// the plan. (cp, sequence and loss parallelism: planner::checkExecutable.)
bool checkPipelineOptions(const TrainOptions &o, std::string &err);

/// The plan's schedule and placement; checks that the batch splits into
/// the microbatches on every data-parallel rank and parses --pp-split
/// (after checkPipelineOptions).
bool planPipelineLayout(const TrainOptions &o, int64_t batch, PipelineLayout &out,
                        std::string &err);

/// Lowers the module's pipeline functions into `out.pipeline` and fills
/// the parameter slots (initial values through `initialValue`).
bool lowerPipelineStep(mlir::ModuleOp module, const std::string &path, int64_t batch, int64_t seq,
                       const TrainOptions &o, const PipelineLayout &layout,
                       const std::function<bool(const std::string &, ParamSlot &)> &initialValue,
                       TrainProgram &out, std::string &err);

} // namespace loom::compiler

#endif
