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

namespace loom {

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
void buildTrainStepTail(mlir::OpPassManager &pm, bool bf16, bool fuseGradientClipping = true);
void registerFusionPipeline();

/// Every loom pass and pipeline, for loom-opt.
inline void registerAllLoomPasses() {
  registerLoomPasses();
  registerFusionPipeline();
}

} // namespace loom

#endif
