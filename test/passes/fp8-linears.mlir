// RUN: loom-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(loom-fp8-linears))" | FileCheck %s
// RUN: loom-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(loom-fp8-linears{scaling=rowwise lm-head=true grad-format=e5m2}))" | FileCheck %s --check-prefix=ROW
// RUN: not loom-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(loom-fp8-linears{scaling=blockwise}))" 2>&1 | FileCheck %s --check-prefix=BAD

// A decoder block's shape after bf16 autocast: the projections by
// parameters become fp8 products reading the f32 master weight (the
// weight's rounding casts are left for canonicalize) and the activation as
// autocast rounded it; attention's product of two activations and the
// output head (its result is the function's result) stay matmuls unless
// lm-head is set. A weight autocast had rounded keeps the rounding of its
// gradient (bf16_weight_grad); the head, read unrounded, does not.
// CHECK-LABEL: func.func @forward
// CHECK: %[[WQ:.*]] = loom.constant {param = #loom.param<"layers.0.q_proj.weight", transposed>}
// CHECK: %[[WH:.*]] = loom.constant {param = #loom.param<"lm_head.weight">}
// CHECK: %[[XR:.*]] = loom.cast %{{.*}} : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
// CHECK: %[[Q:.*]] = loom.fp8_matmul tensorwise %[[XR]], %[[WQ]]
// CHECK-SAME: {bf16_weight_grad = true, fast_accum = true, grad_format = #loom<fp8_format e4m3>, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>
// CHECK-SAME: : tensor<2x4x16xf32>, tensor<16x16xf32>
// CHECK: loom.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<2x4x16xf32>, tensor<2x4x16xf32>
// CHECK: %[[LOGITS:.*]] = loom.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<2x4x16xf32>, tensor<32x16xf32>
// CHECK-NOT: fp8_matmul
// CHECK: return %[[LOGITS]]
// ROW-LABEL: func.func @forward
// ROW: loom.fp8_matmul rowwise %{{.*}}, %{{.*}} {bf16_weight_grad = true, fast_accum = true, grad_format = #loom<fp8_format e5m2>
// ROW-SAME: : tensor<2x4x16xf32>, tensor<16x16xf32>
// ROW: loom.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<2x4x16xf32>, tensor<2x4x16xf32>
// ROW: loom.fp8_matmul rowwise %{{.*}}, %{{.*}} {fast_accum = true, grad_format = #loom<fp8_format e5m2>, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, transpose_rhs = true}
// ROW-SAME: : tensor<2x4x16xf32>, tensor<32x16xf32>
// BAD: error: loom-fp8-linears: scaling must be tensorwise or rowwise, not 'blockwise'
func.func @forward(%x: tensor<2x4x16xf32>) -> tensor<2x4x32xf32> {
  %wq = loom.constant {param = #loom.param<"layers.0.q_proj.weight", transposed>} dense<0.5> : tensor<16x16xf32>
  %wh = loom.constant {param = #loom.param<"lm_head.weight">} dense<0.25> : tensor<32x16xf32>
  %xb = loom.cast %x : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %xr = loom.cast %xb : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %wb = loom.cast %wq : tensor<16x16xf32> -> tensor<16x16xbf16>
  %wr = loom.cast %wb : tensor<16x16xbf16> -> tensor<16x16xf32>
  %q = loom.matmul %xr, %wr : tensor<2x4x16xf32>, tensor<16x16xf32>
  %s = loom.matmul %q, %q {transpose_rhs = true} : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %h = loom.matmul %s, %q : tensor<2x4x4xf32>, tensor<2x4x16xf32>
  %logits = loom.matmul %h, %wh {transpose_rhs = true} : tensor<2x4x16xf32>, tensor<32x16xf32>
  return %logits : tensor<2x4x32xf32>
}

// -----

// A product by a constant that is not a parameter (a folded table) is not
// a linear layer.
// CHECK-LABEL: func.func @not_a_parameter
// CHECK-NOT: fp8_matmul
// CHECK: loom.matmul
func.func @not_a_parameter(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %t = loom.constant dense<1.0> : tensor<8x8xf32>
  %y = loom.matmul %x, %t : tensor<3x8xf32>, tensor<8x8xf32>
  %z = loom.neg %y : tensor<3x8xf32>
  %w = loom.add %z, %y : tensor<3x8xf32>, tensor<3x8xf32>
  %r = loom.exp %w : tensor<3x8xf32>
  return %r : tensor<3x8xf32>
}
