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
  if (autocastBf16) {
    // Autocast sees attention as the graph spells it. An exported eager
    // attention (matmul, scale, mask, softmax, matmul) ran in PyTorch with
    // bf16 scores and bf16 probabilities; the fused op's kernel keeps both in
    // f32 (like SDPA), so fusing first would model a different computation.
    // The element-wise fusions above stay: each is one PyTorch kernel that
    // computes in f32 and rounds only its result.
    fn.addPass(createAutocastBf16());
  } else {
    fn.addPass(createFuseAttention());
  }
  pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  pm.addPass(mlir::createCSEPass());
}

void registerFusionPipeline() {
  mlir::PassPipelineRegistration<>(
      "loom-fusion-pipeline",
      "canonicalize, then fuse activations, rms_norm, rotary and attention",
      [](mlir::OpPassManager &pm) { buildFusionPipeline(pm); });
}

} // namespace loom
