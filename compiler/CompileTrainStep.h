//===- CompileTrainStep.h - The one way to compile a training step -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The compiler's entry point for training: model file -> import -> fusion
// -> [bf16 autocast] -> the per-rank SPMD step (tensor, context, sequence
// and loss parallelism, fp8, autodiff, clipping, AdamW, data-parallel
// collectives, pipeline stages, recompute) -> runtime program(s), with the
// parameters' names, layouts and initial values (train::TrainProgram).
// `loom train`, `loom verify`, `loom plan --explain`'s per-rank buffer plan
// and the tests all compile through compileTrainStep, so what the planner
// sizes and what a verification compares is what training runs.
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_COMPILETRAINSTEP_H
#define LOOM_COMPILER_COMPILETRAINSTEP_H

#include "loom/train/TrainProgram.h"
#include "planner/Plan.h"

#include <functional>
#include <string>

namespace mlir {
class ModuleOp;
}

namespace loom::compiler {

using train::ParamSlot;
using train::TrainProgram;

struct TrainOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double maxGradNorm = 1.0, minLrRatio = 0.0;
  int64_t warmup = 0, totalSteps = 0;
  std::string schedule = "constant"; // constant, cosine, linear
  std::string trainable, frozen;     // regexes over parameter names
  bool bf16 = false;                 // bf16 mixed precision (autocast)
  std::string fp8;                   // "" (off), "tensorwise" or "rowwise" (issue 17)
  bool fp8LmHead = false;            // the output head's product in fp8 too
  bool returnGradients = false;      // extra outputs: unclipped gradients
  bool returnActivationSums = false; // extra outputs: sum of squares entering each norm
  // Data parallelism (issue 5): the step is compiled per rank for the local
  // batch B / (dpReplicate * dpShard) and partitioned by the SPMD passes.
  int dpReplicate = 1, dpShard = 1;
  int tp = 1; // Megatron tensor parallelism of attention and MLP
  // Issue 18: context parallelism ("allgather" or "ring"), and with tp > 1
  // sequence parallelism and the vocabulary-parallel loss.
  int cp = 1;
  std::string cpRotate = "allgather";
  bool tpSp = false, lossParallel = false;
  // On by default rather than asked for: compileTrainStep turns one off
  // (with a note) when the model cannot take it, instead of failing.
  bool tpSpDefaulted = false, lossParallelDefaulted = false;
  int64_t ddpBucketBytes = 25 << 20; // gradients per dp_replicate all_reduce (0: one each)
  bool fsdpReshardAfterForward = true; // gather again for backward
  int64_t fsdpPrefetch = 1;            // gathers issued this many parameters ahead
  // Activation checkpointing (loom-recompute): none, full, selective, budget.
  std::string ac = "none";
  int64_t acEvery = 1;           // the every-th, 2*every-th, ... layer
  double acMemoryBudgetGiB = 0;  // --ac budget
  std::string acBackend = "cpu"; // whose workspace the budget counts
  // Pipeline parallelism (issue 15): pp > 1 compiles stage programs and a
  // schedule (PipelineProgram.h) instead of one step program.
  planner::Plan pipeline; // pp, schedule, virtual stages, microbatches
  std::string ppSplit;    // --pp-split: layers that begin stages 1.. (empty: balanced)
  // The planner: weights import as zero splats of their shapes (their
  // bytes are never read), for graph-only exports and large models; the
  // parameters' initial values are then left empty.
  bool weightsAsShapes = false;
};

/// The plan's mesh (dp_replicate, dp_shard, tp), context, sequence and loss
/// parallelism, and pipeline into `o`, as `loom train --plan` and `loom
/// verify --plans` set them.
void applyPlan(const planner::Plan &plan, TrainOptions &o);

/// The options under which `loom plan` builds a plan's per-rank step: bf16
/// autocast, the plan's mesh, cp rotation, sequence and loss parallelism,
/// checkpoint policy and pipeline, weights as shapes.
TrainOptions trainOptionsForPlan(const planner::Plan &plan);

/// Compiles the training step of the model at `modelPath` (ONNX, or loom
/// IR in a .mlir file) for a global batch of `batch` sequences of `seq`
/// tokens under `opts`; false with a one-line `err` naming the file and
/// the problem. `inspectStep`, when given, sees the module once the step is
/// built, before it is lowered (the planner reads its collectives there).
bool compileTrainStep(const std::string &modelPath, int64_t batch, int64_t seq,
                      const TrainOptions &opts, TrainProgram &out, std::string &err,
                      const std::function<void(mlir::ModuleOp)> &inspectStep = nullptr);

/// compileTrainStep from the model as imported (its @forward unfused, at
/// the rank's rows, in the caller's context; it is changed in place): for
/// a caller that imported it already (the planner, which reads the same
/// import for its costs). `path` names the model in errors.
bool compileImportedTrainStep(mlir::ModuleOp imported, const std::string &path, int64_t batch,
                              int64_t seq, const TrainOptions &opts, TrainProgram &out,
                              std::string &err,
                              const std::function<void(mlir::ModuleOp)> &inspectStep = nullptr);

} // namespace loom::compiler

#endif
