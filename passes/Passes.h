//===- Passes.h - loom passes ------------------------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "ir/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Recompute.h"

#include <vector>

namespace loom {

struct ParallelismRefusal; // ParallelismRefusal.h

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The import-to-codegen pipeline: canonicalize, fuse, clean up. Shared by
/// `loom compile` and `loom-opt --loom-fusion-pipeline`. With `autocastBf16`
/// the pipeline ends in bf16 autocast after attention fusion (training
/// with --precision bf16; see AutocastBf16.cpp).
void buildFusionPipeline(mlir::OpPassManager &pm, bool autocastBf16 = false);

/// What follows building @train_step (and the SPMD passes): cleanup of the
/// backward's repeated constants and reshapes, bf16 GEMMs where autocast's
/// rounded operands allow (`bf16`), then fused gradient clipping. `loom
/// train` and the planner's buffer plan share it, so the planner sizes the
/// very step loom runs.
/// With `fp8`, the step's fp8_matmuls are spelled out as scales, casts and
/// scaled GEMMs (loom-insert-fp8-casts) and CSE shares the copies.
/// `foldAttentionTransposes` gives attention tokens-major operands
/// (loom-fold-attention-transposes): the same bits, fewer copies.
void buildTrainStepTail(mlir::OpPassManager &pm, bool bf16, bool fuseGradientClipping = true,
                        bool fp8 = false, bool foldAttentionTransposes = true);

/// One rank's training step under a data- and tensor-parallel plan.
struct SpmdStepOptions {
  BuildTrainStepOptions step;
  int64_t tp = 1, dpReplicate = 1, dpShard = 1;
  int64_t ddpBucketBytes = 25 << 20;   // gradients per dp_replicate all_reduce (0: one each)
  bool fsdpReshardAfterForward = true; // gather again for backward
  int64_t fsdpPrefetch = 1;            // gathers issued this many parameters ahead
  bool bf16 = false;                   // the forward went through autocast
  bool fuseGradientClipping = true;
  bool foldAttentionTransposes = true;
  // Issue 18: context parallelism over cp ranks ("allgather" or "ring"),
  // and with tp > 1 sequence parallelism and vocabulary-parallel loss.
  int64_t cp = 1;
  std::string cpRotate = "allgather";
  bool sequenceParallel = false, lossParallel = false;
  // Where the sp and vocabulary-parallel passes record that the model
  // refused them (may be null).
  ParallelismRefusal *refusal = nullptr;
  // fp8 training (issue 17): "" (off), "tensorwise" or "rowwise": linear
  // layers' products on fp8 operands (loom-fp8-linears), the output head
  // too with fp8LmHead.
  std::string fp8;
  bool fp8LmHead = false;
  RecomputeOptions recompute; // activation checkpointing, last (loom-recompute)
  // Pipeline parallelism (pipelineRanks > 1): @forward is cut into
  // pipelineStages stages (first layers of stages 1.. in pipelineCuts, or
  // even), and the finished step into stage functions and per-rank
  // optimizers (loom-split-pipeline; DDP then reduces each gradient on
  // its own, no buckets).
  int64_t pipelineRanks = 1, pipelineStages = 1, microbatches = 1;
  std::vector<int64_t> pipelineCuts;
  bool pipelineVShape = false, splitBackward = false;
};

/// From the fused @forward (at the rank's own batch) to the rank's
/// @train_step: tensor, vocabulary, context and sequence parallelism and
/// fp8's linear layers before autodiff (the collectives carry their
/// gradients), BuildTrainStep, context attention made explicit, SP's
/// regathers, the tp-split norm terms, the data-parallel placements, FSDP's
/// and DDP's collectives, the pipeline's stage functions (pp > 1: the stage
/// cuts on @forward just before autodiff), then the tail and, last,
/// recompute.
/// `loom train`, `loom verify` and the planner's per-rank memory build the
/// step through this one function, so the planner sizes the program the
/// ranks run.
void buildSpmdTrainStep(mlir::OpPassManager &pm, const SpmdStepOptions &o);
void registerFusionPipeline();

/// Every loom pass and pipeline, for loom-opt.
inline void registerAllLoomPasses() {
  registerLoomPasses();
  registerFusionPipeline();
}

} // namespace loom

#endif
