// RUN: not loom-opt %s --split-input-file --loom-build-train-step --loom-recompute="policy=full every=0" 2>&1 >/dev/null | FileCheck %s --check-prefix=EVERY
// RUN: not loom-opt %s --split-input-file --loom-build-train-step --loom-recompute="policy=budget" 2>&1 >/dev/null | FileCheck %s --check-prefix=NOBUDGET
// RUN: not loom-opt %s --split-input-file --loom-build-train-step --loom-recompute="policy=budget memory-budget=1 backend=tpu" 2>&1 >/dev/null | FileCheck %s --check-prefix=BACKEND
// RUN: not loom-opt %s --split-input-file --loom-recompute="policy=full" 2>&1 >/dev/null | FileCheck %s --check-prefix=NOSTEP
// RUN: not loom-opt %s --split-input-file --loom-build-train-step --loom-recompute="policy=full" 2>&1 >/dev/null | FileCheck %s --check-prefix=LAYERS

// Bad options and steps the pass cannot read: one error line each.
// EVERY: error: loom-recompute: every must be at least 1, not 0
// NOBUDGET: error: loom-recompute: the budget policy needs memory-budget > 0 (GiB)
// BACKEND: error: loom-recompute: unknown backend 'tpu' (cpu, cuda)
// NOSTEP: error: loom-recompute: no @train_step (run loom-build-train-step first)

// The first model has a numbered layer (no error); the second none, so
// no policy can say what a layer keeps.
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x7xf32> {
  %emb = loom.constant {param = #loom.param<"model.embed_tokens.weight">} dense<0.5> : tensor<7x4xf32>
  %w = loom.constant {param = #loom.param<"model.layers.0.mlp.up_proj.weight">} dense<0.1> : tensor<4x4xf32>
  %head = loom.constant {param = #loom.param<"lm_head.weight">} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %emb, %tok : tensor<7x4xf32>, tensor<1x3xi64>
  %a = loom.matmul %h, %w : tensor<1x3x4xf32>, tensor<4x4xf32>
  %s = loom.silu %a : tensor<1x3x4xf32>
  %l = loom.matmul %s, %head : tensor<1x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<1x3x7xf32>
}

// -----

// LAYERS: recompute-errors.mlir:[[@LINE+2]]:1: error: loom-recompute: no transformer layers: no parameter name carries a layer index (model.layers.N..., transformer.h.N...)
// LAYERS-NOT: error:
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x7xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %w = loom.constant {param = #loom.param<"up">} dense<0.1> : tensor<4x4xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %emb, %tok : tensor<7x4xf32>, tensor<1x3xi64>
  %a = loom.matmul %h, %w : tensor<1x3x4xf32>, tensor<4x4xf32>
  %s = loom.silu %a : tensor<1x3x4xf32>
  %l = loom.matmul %s, %head : tensor<1x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<1x3x7xf32>
}
