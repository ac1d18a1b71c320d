//===- IrCost.h - The planner's view of a model, read off the IR -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Imports the model the way the compiler does (ONNX import, fusion), builds
// the training step with the same BuildTrainStep pass `loom train` uses and
// walks @train_step: FLOPs and bytes per op, the layer each op belongs to
// (from the parameter names on the IR), forward/backward/optimizer phase,
// the activations the backward pass reads, the tensor-parallel rule of each
// parameter and the collectives those rules imply. When the training step
// cannot be built, the forward IR is costed instead with backward taken as
// 2x forward (the ModelCost says so). The compiler's buffer plan of the
// single-device step is attached when it compiles.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_IR_IRCOST_H
#define LOOM_PLANNER_IR_IRCOST_H

#include "planner/ModelCost.h"
#include "planner/Plan.h"
#include "planner/ir/PartitionedCost.h"
#include "loom/runtime/Program.h"

#include <string>

namespace loom::planner {

struct IrCostOptions {
  int64_t batch = 0;        // the microbatch to cost
  int64_t seq = 0;
  bool forwardOnly = false; // cost the forward IR (backward = 2x forward)
  bool bufferPlan = true;   // also compile the step and read its buffer plan
  // With the buffer plan: also compile the fp8 (tensorwise) step, whose
  // program prices fp8 one-GPU plans (off when only bf16 plans are asked for).
  bool fp8Program = false;
};

/// MODEL.onnx (or a .mlir file holding @forward) to a ModelCost. A model
/// exported with a static batch is imported at its own batch and its costs
/// rescaled to `batch` (exact: the walk tracks which dim of every value is
/// the batch); a static sequence length must match.
bool buildModelCost(const std::string &path, const IrCostOptions &opts, ModelCost &out,
                    std::string &err);

/// The compiler's buffer plan of one rank's training step under a data-
/// and tensor-parallel plan (pp = cp = 1, one microbatch, no fp8) with the
/// recompute policy `checkpoint` (planner::Checkpoint: 0 none, 1
/// selective, 2 full): the model imported at `microbatch` rows (each
/// rank's own), fused with bf16 autocast and built through
/// buildSpmdTrainStep exactly as `loom train --precision bf16 --plan ...
/// --ac ...` builds it, lowered, split at its
/// peak (bufferPlanMemory), plus what the CUDA backend allocates beside the
/// arena (kernel scratch and GEMM workspace, collective staging). What a
/// rank of the plan allocates on its GPU, for `loom plan --explain`.
bool rankBufferPlan(const std::string &path, int64_t microbatch, int64_t seq, int dpReplicate,
                    int dpShard, int tp, int checkpoint, MemoryBreakdown &out, std::string &err);

/// The same for any plan the compiler builds per rank, with context,
/// sequence and loss parallelism as `plan` says (cp, cp_rotate, tp_sp,
/// loss_parallel; issue 18) and its checkpoint policy. With `program`, also the rank's program
/// itself (its buffers are what a rank holds).
/// With `partitioned` (and `hw`), also the costs read off the same rank's
/// partitioned IR (PartitionedCost.h).
struct RankIrCosts {
  PartitionedCost *partitioned = nullptr;
  const HardwareProfile *hw = nullptr;
  int gpusPerNode = 8;
};
bool rankBufferPlan(const std::string &path, int64_t microbatch, int64_t seq, const Plan &plan,
                    MemoryBreakdown &out, std::string &err, rt::Program *program = nullptr,
                    const RankIrCosts &irCosts = RankIrCosts());

} // namespace loom::planner

#endif
