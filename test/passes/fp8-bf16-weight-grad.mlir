// RUN: loom-opt %s --pass-pipeline="builtin.module(func.func(loom-fp8-linears),loom-build-train-step)" | FileCheck %s
// RUN: loom-opt %s --pass-pipeline="builtin.module(func.func(loom-fp8-linears),loom-build-train-step,canonicalize,cse,func.func(loom-insert-fp8-casts),canonicalize,cse)" | FileCheck %s --check-prefix=GEMM

// Under autocast the bf16 step rounds a weight's gradient to bf16 (the
// gradient of the weight's rounding cast pair). The fp8 product reads the
// f32 weight, dropping that pair, and keeps the gradient's rounding
// instead (bf16_weight_grad): the weight-gradient product is rounded to
// bf16 and widened, as torchao's grad_weight GEMM writes the autocast
// dtype; the product of dx is not (autocast rounds the activation's
// gradient through the activation's own cast pair). Once spelled out, the
// weight gradient's scaled_matmul writes bf16, which AdamW reads widened.
// CHECK-LABEL: func.func @train_step
// CHECK: loom.fp8_matmul tensorwise %{{.*}}, %arg1 {bf16_weight_grad = true, fast_accum = true
// CHECK: loom.fp8_matmul tensorwise %{{.*}}, %arg2 {fast_accum = true
// CHECK: %[[DW:.*]] = loom.fp8_matmul tensorwise %{{.*}}, %{{.*}} {grad_format = #loom<fp8_format e4m3>, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, transpose_lhs = true} : tensor<6x16xf32>, tensor<6x24xf32>
// CHECK-NEXT: %[[LOW:.*]] = loom.cast %[[DW]] : tensor<16x24xf32> -> tensor<16x24xbf16>
// CHECK-NEXT: %[[WIDE:.*]] = loom.cast %[[LOW]] : tensor<16x24xbf16> -> tensor<16x24xf32>
// CHECK: loom.mul %[[WIDE]], %[[WIDE]]
// The down projection's weight was not rounded: its gradient stays f32.
// CHECK-NOT: tensor<24x16xbf16>
// GEMM-LABEL: func.func @train_step
// GEMM: %[[DW:.*]] = loom.scaled_matmul %{{.*}} : tensor<16x6xf8E4M3FN>, tensor<24x6xf8E4M3FN>, tensor<1x1xf32>, tensor<1x1xf32> -> tensor<16x24xbf16>
// GEMM: %[[WIDE:.*]] = loom.cast %[[DW]] : tensor<16x24xbf16> -> tensor<16x24xf32>
// GEMM: loom.mul %[[WIDE]], %[[WIDE]]
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x16xf32>
  %w = loom.constant {param = #loom.param<"up.weight", transposed>} dense<0.25> : tensor<16x24xf32>
  %wd = loom.constant {param = #loom.param<"down.weight", transposed>} dense<0.125> : tensor<24x16xf32>
  %h = loom.embedding %emb, %tok : tensor<7x16xf32>, tensor<2x3xi64>
  %hb = loom.cast %h : tensor<2x3x16xf32> -> tensor<2x3x16xbf16>
  %hr = loom.cast %hb : tensor<2x3x16xbf16> -> tensor<2x3x16xf32>
  %wb = loom.cast %w : tensor<16x24xf32> -> tensor<16x24xbf16>
  %wr = loom.cast %wb : tensor<16x24xbf16> -> tensor<16x24xf32>
  %u = loom.matmul %hr, %wr : tensor<2x3x16xf32>, tensor<16x24xf32>
  %a = loom.silu %u : tensor<2x3x24xf32>
  %d = loom.matmul %a, %wd : tensor<2x3x24xf32>, tensor<24x16xf32>
  %l = loom.matmul %d, %emb {transpose_rhs = true} : tensor<2x3x16xf32>, tensor<7x16xf32>
  return %l : tensor<2x3x7xf32>
}
