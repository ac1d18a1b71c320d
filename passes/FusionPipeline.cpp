//===- FusionPipeline.cpp - The import-to-codegen pass pipeline -----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/ParallelismRefusal.h"
#include "passes/PatternUtils.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <cstdlib>
#include <string>

namespace loom {

namespace {
/// The A/B switches of the step's fusions: on unless the variable is "0".
bool switchedOn(const char *env) {
  const char *v = std::getenv(env);
  return !v || std::string(v) != "0";
}
} // namespace

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

void buildTrainStepTail(mlir::OpPassManager &pm, bool bf16, bool fuseGradientClipping, bool fp8,
                        bool foldAttentionTransposes) {
  pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  pm.addPass(mlir::createCSEPass());
  if (bf16) { // autocast's rounded matmuls become bf16 GEMMs
    pm.nest<mlir::func::FuncOp>().addPass(createSinkWideningCasts());
    pm.nest<mlir::func::FuncOp>().addPass(createHoistNarrowingCasts());
    pm.nest<mlir::func::FuncOp>().addPass(createUseBf16Matmuls());
    pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  }
  // After the casts have their final places: the rebuilt q, k, v chains
  // copy them, and CSE merges the casts that sinking duplicates.
  if (foldAttentionTransposes) {
    pm.nest<mlir::func::FuncOp>().addPass(createFoldAttentionTransposes());
    pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
    pm.addPass(mlir::createCSEPass());
  }
  if (fp8) { // after the sinking: fp8 operands are read at their bf16 source
    pm.nest<mlir::func::FuncOp>().addPass(createInsertFp8Casts());
    pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
    pm.addPass(mlir::createCSEPass());
    pm.nest<mlir::func::FuncOp>().addPass(createFuseFp8Amax());
  }
  // The gradient sums into the GEMMs that produce them: after the bf16
  // rewrite, which forms the products it reads, and after the passes that
  // rebuild the q, k, v chains. LOOM_FUSE_MATMUL_ACCUMULATE=0 keeps the
  // adds (an A/B switch for timing).
  if (switchedOn("LOOM_FUSE_MATMUL_ACCUMULATE")) {
    pm.nest<mlir::func::FuncOp>().addPass(createFuseMatmulAccumulate());
    pm.addPass(mlir::createCSEPass());
  }
  // The residual stream's gradient sums into the norms' gradient kernels.
  // LOOM_FUSE_NORM_GRAD_ACCUMULATE=0 keeps the adds (an A/B switch).
  if (switchedOn("LOOM_FUSE_NORM_GRAD_ACCUMULATE"))
    pm.nest<mlir::func::FuncOp>().addPass(createFuseNormGradAccumulate());
  // A tied LM head's weight gradient into the embedding gradient's kernel.
  // LOOM_FUSE_EMBEDDING_GRAD_ACCUMULATE=0 keeps the add (an A/B switch).
  if (switchedOn("LOOM_FUSE_EMBEDDING_GRAD_ACCUMULATE"))
    pm.nest<mlir::func::FuncOp>().addPass(createFuseEmbeddingGradAccumulate());
  // Last: the SPMD passes read the unfused norm and clip (TrainStepStructure).
  if (fuseGradientClipping) {
    pm.nest<mlir::func::FuncOp>().addPass(createFuseGradientClipping());
    // The norm's sum_squares chain into one op. LOOM_FUSE_GLOBAL_SUM_SQUARES=0
    // keeps the chain (an A/B switch for timing).
    if (switchedOn("LOOM_FUSE_GLOBAL_SUM_SQUARES"))
      pm.nest<mlir::func::FuncOp>().addPass(createFuseGlobalSumSquares());
  }
}

void buildSpmdTrainStep(mlir::OpPassManager &pm, const SpmdStepOptions &o) {
  if (o.tp > 1) {
    ShardTensorParallelOptions tpo;
    tpo.tp = o.tp;
    pm.addPass(createShardTensorParallel(tpo));
  }
  // Issue 18, in this order: the vocabulary split sees the whole head, cp
  // cuts every rank's sequence, sp cuts that between tp regions.
  bool vocab = o.tp > 1 && o.lossParallel, sp = o.tp > 1 && o.sequenceParallel;
  if (vocab) {
    ShardVocabParallelOptions vo;
    vo.tp = o.tp;
    pm.addPass(createShardVocabParallel(vo, o.refusal));
  }
  if (o.cp > 1) {
    ShardContextParallelOptions co;
    co.cp = o.cp;
    co.rotate = o.cpRotate;
    pm.addPass(createShardContextParallel(co));
  }
  if (sp) {
    ShardSequenceParallelOptions so;
    so.tp = o.tp;
    pm.addPass(createShardSequenceParallel(so, o.refusal));
  }
  // After the sharding passes: fp8 sees each rank's local products (the
  // vocabulary split's head shard included), before autodiff.
  if (!o.fp8.empty()) {
    Fp8LinearsOptions f;
    f.scaling = o.fp8;
    f.lmHead = o.fp8LmHead;
    pm.nest<mlir::func::FuncOp>().addPass(createFp8Linears(f));
  }
  // Last of the @forward passes: the stage cuts see each rank's local ops.
  bool pipeline = o.pipelineRanks > 1;
  if (pipeline) {
    SplitPipelineStagesOptions stages;
    stages.stages = o.pipelineStages;
    stages.cuts.assign(o.pipelineCuts.begin(), o.pipelineCuts.end());
    pm.addPass(createSplitPipelineStages(stages));
  }
  pm.addPass(createBuildTrainStep(o.step));
  if (o.cp > 1 || vocab)
    pm.addPass(createExpandContextAttention());
  if (sp)
    pm.addPass(createRegatherSequenceParallel());
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
  buildTrainStepTail(pm, o.bf16, o.fuseGradientClipping, !o.fp8.empty(),
                     o.foldAttentionTransposes);
  // Last: recomputation clones forward ops into the backward, which CSE
  // would merge back, and reads the final forward (bf16 GEMMs, collectives).
  // (On @train_step: the drivers refuse it with pipeline plans.)
  if (o.recompute.policy != RecomputePolicy::none)
    pm.addPass(createRecompute(o.recompute));
  // After recompute, which reads the loss and its gradient as two ops: the
  // pair into one kernel that reads the logits twice instead of three
  // times. LOOM_FUSE_CROSS_ENTROPY_GRAD=0 keeps the pair (an A/B switch).
  if (switchedOn("LOOM_FUSE_CROSS_ENTROPY_GRAD"))
    pm.nest<mlir::func::FuncOp>().addPass(createFuseCrossEntropyGrad());
  // After recompute too (its clones fuse as well): each residual add with
  // the rms_norm that reads it. Not with fp8, whose tensorwise amax may be
  // the norm's extra output. LOOM_FUSE_ADD_RMS_NORM=0 keeps them apart.
  if (o.fp8.empty() && switchedOn("LOOM_FUSE_ADD_RMS_NORM"))
    pm.nest<mlir::func::FuncOp>().addPass(createFuseAddRmsNorm());
}

void registerFusionPipeline() {
  mlir::PassPipelineRegistration<>(
      "loom-fusion-pipeline",
      "canonicalize, then fuse activations, rms_norm, rotary and attention",
      [](mlir::OpPassManager &pm) { buildFusionPipeline(pm); });
}

} // namespace loom
