//===- FusionPipeline.cpp - The import-to-codegen pass pipeline -----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace loom {

void buildFusionPipeline(mlir::OpPassManager &pm, bool autocastBf16) {
  // Canonicalize first: identity casts, reshape chains and transposes that
  // feed matmuls fold away, so the fusion patterns see one spelling.
  pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  pm.addPass(mlir::createCSEPass());
  auto &fn = pm.nest<mlir::func::FuncOp>();
  fn.addPass(createFuseActivations());
  fn.addPass(createFuseRmsNorm());
  fn.addPass(createFuseRotary());
  fn.addPass(createFuseAttention());
  if (autocastBf16) {
    // After attention fusion: the fused op is modelled as SDPA (bf16 q/k/v
    // and output, f32 inside), the kernel a production run uses and the only
    // form that keeps T x T scores out of memory. An exported eager
    // attention also rounds its scores and probabilities to bf16; loom does
    // not copy that (docs/architecture.md, Training).
    fn.addPass(createAutocastBf16());
  }
  pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  pm.addPass(mlir::createCSEPass());
}

void buildTrainStepTail(mlir::OpPassManager &pm, bool bf16, bool fuseGradientClipping) {
  pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  pm.addPass(mlir::createCSEPass());
  if (bf16) { // autocast's rounded matmuls become bf16 GEMMs
    pm.nest<mlir::func::FuncOp>().addPass(createSinkWideningCasts());
    pm.nest<mlir::func::FuncOp>().addPass(createUseBf16Matmuls());
    pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  }
  // Last: the SPMD passes read the unfused norm and clip (TrainStepStructure).
  if (fuseGradientClipping)
    pm.nest<mlir::func::FuncOp>().addPass(createFuseGradientClipping());
}

void buildSpmdTrainStep(mlir::OpPassManager &pm, const SpmdStepOptions &o) {
  if (o.tp > 1) {
    ShardTensorParallelOptions tpo;
    tpo.tp = o.tp;
    pm.addPass(createShardTensorParallel(tpo));
  }
  bool pipeline = o.pipelineRanks > 1;
  if (pipeline) {
    SplitPipelineStagesOptions stages;
    stages.stages = o.pipelineStages;
    stages.cuts.assign(o.pipelineCuts.begin(), o.pipelineCuts.end());
    pm.addPass(createSplitPipelineStages(stages));
  }
  pm.addPass(createBuildTrainStep(o.step));
  if (o.tp > 1)
    pm.addPass(createReduceTensorParallelNorm());
  if (o.dpReplicate * o.dpShard > 1) {
    AnnotateDataParallelOptions ann;
    ann.dpReplicate = o.dpReplicate;
    ann.dpShard = o.dpShard;
    pm.addPass(createAnnotateDataParallel(ann));
    InsertFsdpCollectivesOptions fsdp;
    fsdp.reshardAfterForward = o.fsdpReshardAfterForward;
    fsdp.prefetch = o.fsdpPrefetch;
    pm.addPass(createInsertFsdpCollectives(fsdp));
    InsertDdpCollectivesOptions ddp;
    ddp.bucketBytes = pipeline ? 0 : o.ddpBucketBytes;
    pm.addPass(createInsertDdpCollectives(ddp));
  }
  if (pipeline) {
    SplitPipelineOptions split;
    split.ranks = o.pipelineRanks;
    split.vshape = o.pipelineVShape;
    split.splitBackward = o.splitBackward;
    split.microbatches = o.microbatches;
    pm.addPass(createSplitPipeline(split));
    pm.addPass(createOutlineTransfers());
  }
  buildTrainStepTail(pm, o.bf16, o.fuseGradientClipping);
}

void registerFusionPipeline() {
  mlir::PassPipelineRegistration<>(
      "loom-fusion-pipeline",
      "canonicalize, then fuse activations, rms_norm, rotary and attention",
      [](mlir::OpPassManager &pm) { buildFusionPipeline(pm); });
}

} // namespace loom
