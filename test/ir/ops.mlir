// RUN: loom-opt %s | loom-opt | FileCheck %s
// Every op prints and parses back with its inferred types.

// CHECK-LABEL: func.func @roundtrip
func.func @roundtrip(%ids: tensor<2x4xi64>, %table: tensor<16x8xf32>, %w: tensor<8xf32>,
                     %cos: tensor<4x8xf32>, %t: tensor<8xi64>) -> tensor<f32> {
  // CHECK: loom.embedding %{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<2x4xi64>
  %x = loom.embedding %table, %ids : tensor<16x8xf32>, tensor<2x4xi64>
  // CHECK: loom.rms_norm
  %n = loom.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: loom.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon
  %l = loom.layer_norm %n, %w, %w {epsilon = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: loom.gelu %{{.*}} tanh
  %g0 = loom.gelu %l tanh : tensor<2x4x8xf32>
  // CHECK: loom.relu
  %g1 = loom.relu %g0 : tensor<2x4x8xf32>
  // CHECK: loom.erf
  %g2 = loom.erf %g1 : tensor<2x4x8xf32>
  // CHECK: loom.softplus
  %g = loom.softplus %g2 : tensor<2x4x8xf32>
  %h = loom.reshape %g : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
  // CHECK: loom.rotary
  %r = loom.rotary %h, %cos, %cos : tensor<2x1x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: %{{.*}}, %[[LSE:.*]] = loom.attention {{.*}} {causal = true, scale = 5.000000e-01 : f64}
  %a, %lse = loom.attention %r, %r, %r {causal = true, scale = 0.5 : f64} : tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>
  // CHECK: loom.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LSE]], %{{.*}} {causal = true
  %dq, %dk, %dv = loom.attention_grad %r, %r, %r, %a, %lse, %a {causal = true, scale = 0.5 : f64} : tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4xf32>
  // Tokens-major operands [B, T, H, D] (here H = 1 over T = 4): o keeps q's
  // layout, lse is [B, Hq, T] either way.
  // CHECK: %[[TO:.*]], %[[TL:.*]] = loom.attention {{.*}} {causal = true, layout = #loom<attention_layout tokens_major>, scale = 5.000000e-01 : f64} : tensor<2x4x1x8xf32>
  %tq = loom.reshape %r : tensor<2x1x4x8xf32> -> tensor<2x4x1x8xf32>
  %to, %tl = loom.attention %tq, %tq, %tq {causal = true, layout = #loom<attention_layout tokens_major>, scale = 0.5 : f64} : tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>
  // CHECK: loom.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[TO]], %[[TL]], %{{.*}} {causal = true, layout = #loom<attention_layout tokens_major>, {{.*}} : tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>, tensor<2x1x4xf32>
  %tdq, %tdk, %tdv = loom.attention_grad %tq, %tq, %tq, %to, %tl, %to {causal = true, layout = #loom<attention_layout tokens_major>, scale = 0.5 : f64} : tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>, tensor<2x1x4xf32>
  %f = loom.reshape %a : tensor<2x1x4x8xf32> -> tensor<8x8xf32>
  // CHECK: loom.matmul {{.*}} {transpose_rhs = true} : tensor<8x8xf32>, tensor<16x8xf32>
  %logits = loom.matmul %f, %table {transpose_rhs = true} : tensor<8x8xf32>, tensor<16x8xf32>
  // CHECK: loom.reduce max {{.*}} {axes = array<i64: 1>, keepdim = false}
  %m = loom.reduce max %logits {axes = array<i64: 1>, keepdim = false} : tensor<8x16xf32>
  // CHECK: loom.split {{.*}} {axis = 1 : i64, sizes = array<i64: 10, 6>}
  %p:2 = loom.split %logits {axis = 1 : i64, sizes = array<i64: 10, 6>} : tensor<8x16xf32>
  // CHECK: loom.concat
  %c = loom.concat %p#1, %p#0 {axis = 1 : i64} : tensor<8x6xf32>, tensor<8x10xf32>
  // CHECK: loom.cross_entropy {{.*}} : tensor<8x16xf32>, tensor<8xi64>
  %loss = loom.cross_entropy %c, %t : tensor<8x16xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// The gradient norm's chained sums (loom-fuse-global-sum-squares).
// CHECK-LABEL: func.func @global_sum_squares
// CHECK: loom.global_sum_squares %arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32> -> tensor<f32>
func.func @global_sum_squares(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<f32> {
  %s = loom.global_sum_squares %a, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// The fused gradient norm and clip (loom-fuse-gradient-clipping).
// CHECK-LABEL: func.func @fused_clipping
// CHECK: %[[S:.*]] = loom.sum_squares %arg0 : tensor<4x8xf32>
// CHECK: loom.adamw %arg1, %arg0, %arg2, %arg3, %arg4, %arg5 grad_scale %[[S]] {beta1
// CHECK-SAME: : tensor<4x8xf32>, tensor<f32>
// CHECK: loom.adamw %arg1, %arg0, %arg2, %arg3, %arg4, %arg5 {beta1
func.func @fused_clipping(%g: tensor<4x8xf32>, %p: tensor<4x8xf32>, %m: tensor<4x8xf32>,
                          %v: tensor<4x8xf32>, %lr: tensor<f32>, %step: tensor<f32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = loom.sum_squares %g : tensor<4x8xf32>
  %a:3 = loom.adamw %p, %g, %m, %v, %lr, %step grad_scale %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<f32>
  %b:3 = loom.adamw %p, %g, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<f32>
  return %a#0, %b#0 : tensor<4x8xf32>, tensor<4x8xf32>
}

// lse is [B, Hq, T]: f32 beside bf16 operands, f64 beside f64 ones.
// CHECK-LABEL: func.func @attention_lse_types
// CHECK: loom.attention {{.*}} : tensor<1x4x3x8xbf16>
// CHECK: loom.attention {{.*}} : tensor<1x4x3x8xf64>
// CHECK: return {{.*}} : tensor<1x4x3xf32>, tensor<1x4x3xf64>
func.func @attention_lse_types(%h: tensor<1x4x3x8xbf16>, %hk: tensor<1x2x5x8xbf16>,
                               %d: tensor<1x4x3x8xf64>, %dk: tensor<1x2x5x8xf64>)
    -> (tensor<1x4x3xf32>, tensor<1x4x3xf64>) {
  %o, %l = loom.attention %h, %hk, %hk {causal = false, scale = 0.5 : f64} : tensor<1x4x3x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>
  %p, %m = loom.attention %d, %dk, %dk {causal = true, scale = 0.5 : f64} : tensor<1x4x3x8xf64>, tensor<1x2x5x8xf64>, tensor<1x2x5x8xf64>
  return %l, %m : tensor<1x4x3xf32>, tensor<1x4x3xf64>
}

// CHECK-LABEL: func.func @matmul_bias
// CHECK: loom.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<2x3x8xbf16>, tensor<5x8xbf16>, tensor<5xbf16>
func.func @matmul_bias(%x: tensor<2x3x8xbf16>, %w: tensor<5x8xbf16>, %b: tensor<5xbf16>) -> tensor<2x3x5xbf16> {
  %y = loom.matmul_bias %x, %w, %b {transpose_rhs = true} : tensor<2x3x8xbf16>, tensor<5x8xbf16>, tensor<5xbf16>
  return %y : tensor<2x3x5xbf16>
}

// The norms' gradients, plain and with an addend summed into dx.
// CHECK-LABEL: func.func @norm_grads
// CHECK: %[[DX:.*]], %{{.*}} = loom.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = {{.*}} : f64} : tensor<2x8xf32>, tensor<8xf32>
// CHECK: %[[SX:.*]], %{{.*}} = loom.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} accumulate %[[DX]] : tensor<2x8xf32> {epsilon
// CHECK: loom.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} accumulate %[[SX]] : tensor<2x8xf32> {epsilon = 1.000000e-05 : f64} : tensor<2x8xf32>, tensor<8xf32>
func.func @norm_grads(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %dy: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %dx, %dw = loom.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-6 : f64} : tensor<2x8xf32>, tensor<8xf32>
  %sx, %sw = loom.rms_norm_grad %x, %w, %dy accumulate %dx : tensor<2x8xf32> {epsilon = 1.0e-6 : f64} : tensor<2x8xf32>, tensor<8xf32>
  %lx, %lw, %lb = loom.layer_norm_grad %x, %w, %dy accumulate %sx : tensor<2x8xf32> {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return %lx : tensor<2x8xf32>
}

// The embedding gradient, plain and with an addend summed into the table.
// CHECK-LABEL: func.func @embedding_grads
// CHECK: %[[E:.*]] = loom.embedding_grad %{{.*}}, %{{.*}} {num_embeddings = 5 : i64} : tensor<2x3x8xf32>, tensor<2x3xi64>
// CHECK: loom.embedding_grad %{{.*}}, %{{.*}} accumulate %[[E]] : tensor<5x8xf32> {num_embeddings = 5 : i64} : tensor<2x3x8xf32>, tensor<2x3xi64>
func.func @embedding_grads(%dy: tensor<2x3x8xf32>, %ids: tensor<2x3xi64>) -> tensor<5x8xf32> {
  %e = loom.embedding_grad %dy, %ids {num_embeddings = 5 : i64} : tensor<2x3x8xf32>, tensor<2x3xi64>
  %s = loom.embedding_grad %dy, %ids accumulate %e : tensor<5x8xf32> {num_embeddings = 5 : i64} : tensor<2x3x8xf32>, tensor<2x3xi64>
  return %s : tensor<5x8xf32>
}

// The loss and its logits' gradient as one op: dlogits, then the f32 loss.
// CHECK-LABEL: func.func @cross_entropy_with_grad
// CHECK: %{{.*}}, %{{.*}} = loom.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x9xbf16>, tensor<4xi32>, tensor<f32>
func.func @cross_entropy_with_grad(%x: tensor<4x9xbf16>, %t: tensor<4xi32>, %s: tensor<f32>) -> (tensor<4x9xbf16>, tensor<f32>) {
  %dx, %loss = loom.cross_entropy_with_grad %x, %t, %s : tensor<4x9xbf16>, tensor<4xi32>, tensor<f32>
  return %dx, %loss : tensor<4x9xbf16>, tensor<f32>
}

// A residual add and its norm: the sum, then the normalized sum.
// CHECK-LABEL: func.func @add_rms_norm
// CHECK: %{{.*}}, %{{.*}} = loom.add_rms_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8xf32>, tensor<8xf32>
func.func @add_rms_norm(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %w: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %s, %n = loom.add_rms_norm %a, %b, %w {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return %s, %n : tensor<2x8xf32>, tensor<2x8xf32>
}
