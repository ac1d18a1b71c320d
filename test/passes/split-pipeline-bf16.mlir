// RUN: loom-opt %s --loom-split-pipeline-stages="stages=2" --loom-build-train-step --loom-split-pipeline="ranks=2 microbatches=2" | FileCheck %s

// Autocast's shape of a layer: a bf16 product widened back to f32 for the
// f32 ops after it. Stage 0's backward reads the widened value (swiglu's
// gradient reads its inputs); the stage saves the bf16 value behind it,
// at 2 bytes, and its backward widens it again.
// CHECK-LABEL: func.func @stage0.forward
// CHECK-SAME: -> ({{.*}}tensor<2x3x4xbf16> {loom.name = "saved.{{[0-9]+}}"
// CHECK-NOT: tensor<2x3x4xf32> {loom.name = "saved.{{[0-9]+}}", loom.pipeline_value = #loom.pipeline_value<saved, {{[0-9]+}}>}{{.*}}-> tensor
// CHECK-LABEL: func.func @stage0.backward
// CHECK: loom.cast %{{.*}} : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
// CHECK: loom.swiglu_grad
// CHECK-LABEL: func.func @stage1.forward

func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"model.embed_tokens.weight">} dense<0.5> : tensor<7x4xf32>
  %a0 = loom.constant {param = #loom.param<"model.layers.0.input_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %o0 = loom.constant {param = #loom.param<"model.layers.0.mlp.up_proj.weight">} dense<0.1> : tensor<4x4xf32>
  %a1 = loom.constant {param = #loom.param<"model.layers.1.input_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %o1 = loom.constant {param = #loom.param<"model.layers.1.mlp.up_proj.weight">} dense<0.3> : tensor<4x4xf32>
  %nf = loom.constant {param = #loom.param<"model.norm.weight">} dense<1.0> : tensor<4xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %x0 = loom.rms_norm %h, %a0 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %x0b = loom.cast %x0 : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
  %o0b = loom.cast %o0 : tensor<4x4xf32> -> tensor<4x4xbf16>
  %y0b = loom.matmul %x0b, %o0b : tensor<2x3x4xbf16>, tensor<4x4xbf16>
  %y0 = loom.cast %y0b : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
  %s0 = loom.swiglu %y0, %y0 : tensor<2x3x4xf32>
  %h0 = loom.add %h, %s0 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %x1 = loom.rms_norm %h0, %a1 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %x1b = loom.cast %x1 : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
  %o1b = loom.cast %o1 : tensor<4x4xf32> -> tensor<4x4xbf16>
  %y1b = loom.matmul %x1b, %o1b : tensor<2x3x4xbf16>, tensor<4x4xbf16>
  %y1 = loom.cast %y1b : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
  %s1 = loom.swiglu %y1, %y1 : tensor<2x3x4xf32>
  %h1 = loom.add %h0, %s1 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %f = loom.rms_norm %h1, %nf {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %l = loom.matmul %f, %e {transpose_rhs = true} : tensor<2x3x4xf32>, tensor<7x4xf32>
  return %l : tensor<2x3x7xf32>
}
