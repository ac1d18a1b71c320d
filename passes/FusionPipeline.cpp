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

void buildFusionPipeline(mlir::OpPassManager &pm) {
  // Canonicalize first: identity casts, reshape chains and transposes that
  // feed matmuls fold away, so the fusion patterns see one spelling.
  pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  pm.addPass(mlir::createCSEPass());
  auto &fn = pm.nest<mlir::func::FuncOp>();
  fn.addPass(createFuseActivations());
  fn.addPass(createFuseRmsNorm());
  fn.addPass(createFuseRotary());
  fn.addPass(createFuseAttention());
  pm.addPass(mlir::createCanonicalizerPass(rewriteConfig()));
  pm.addPass(mlir::createCSEPass());
}

void registerFusionPipeline() {
  mlir::PassPipelineRegistration<>(
      "loom-fusion-pipeline",
      "canonicalize, then fuse activations, rms_norm, rotary and attention",
      buildFusionPipeline);
}

} // namespace loom
