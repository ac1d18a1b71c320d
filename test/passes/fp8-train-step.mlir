// RUN: loom-opt %s --pass-pipeline="builtin.module(func.func(loom-fp8-linears{scaling=rowwise}),loom-build-train-step)" | FileCheck %s

// The gradient of an fp8 product is two fp8 products (a straight-through
// estimator: the rounding has no gradient of its own): dx = dy W^T with the
// output gradient in the grad format, and the weight gradient in the
// weight's stored layout, the batch folded into rows. Neither accumulates
// the fast way. The output head stays a plain matmul.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]] = loom.fp8_matmul rowwise %{{.*}}, %arg1 {fast_accum = true
// CHECK-SAME: : tensor<2x3x16xf32>, tensor<16x24xf32>
// CHECK: loom.matmul %{{.*}}, %arg0 {transpose_rhs = true} : tensor<2x3x16xf32>, tensor<7x16xf32>
// CHECK: loom.cross_entropy
// CHECK: %[[DX:.*]] = loom.fp8_matmul rowwise %[[DY:.*]], %arg1 {grad_format = #loom<fp8_format e4m3>, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, transpose_rhs = true}
// CHECK-SAME: : tensor<2x3x24xf32>, tensor<16x24xf32>
// CHECK-DAG: %[[X2:.*]] = loom.reshape %{{.*}} : tensor<2x3x16xf32> -> tensor<6x16xf32>
// CHECK-DAG: %[[DY2:.*]] = loom.reshape %[[DY]] : tensor<2x3x24xf32> -> tensor<6x24xf32>
// CHECK: %[[DW:.*]] = loom.fp8_matmul rowwise %[[X2]], %[[DY2]] {grad_format = #loom<fp8_format e4m3>, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, transpose_lhs = true}
// CHECK-SAME: : tensor<6x16xf32>, tensor<6x24xf32>
// CHECK: loom.adamw %arg1, %{{.*}}
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x16xf32>
  %w = loom.constant {param = #loom.param<"up.weight", transposed>} dense<0.25> : tensor<16x24xf32>
  %wd = loom.constant {param = #loom.param<"down.weight", transposed>} dense<0.125> : tensor<24x16xf32>
  %h = loom.embedding %emb, %tok : tensor<7x16xf32>, tensor<2x3xi64>
  %u = loom.matmul %h, %w : tensor<2x3x16xf32>, tensor<16x24xf32>
  %a = loom.silu %u : tensor<2x3x24xf32>
  %d = loom.matmul %a, %wd : tensor<2x3x24xf32>, tensor<24x16xf32>
  %l = loom.matmul %d, %emb {transpose_rhs = true} : tensor<2x3x16xf32>, tensor<7x16xf32>
  return %l : tensor<2x3x7xf32>
}
