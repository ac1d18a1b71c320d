// RUN: loom-opt %s --split-input-file --loom-fuse-gradient-clipping | FileCheck %s

// BuildTrainStep's norm and clip for two gradients: each term becomes one
// sum_squares, each clipped gradient an AdamW grad_scale.
// CHECK-LABEL: func.func @norm_and_clip
// CHECK-SAME: (%[[G1:[^:]*]]: tensor<4x8xf32>, %[[G2:[^:]*]]: tensor<8xf32>
// CHECK-NOT: loom.mul
// CHECK: %[[S1:.*]] = loom.sum_squares %[[G1]] : tensor<4x8xf32>
// CHECK-NEXT: %[[S2:.*]] = loom.sum_squares %[[G2]] : tensor<8xf32>
// CHECK-NEXT: loom.add %[[S1]], %[[S2]]
// CHECK: %[[COEF:.*]] = loom.min
// CHECK-NOT: loom.mul
// CHECK: loom.adamw %arg2, %[[G1]], %arg3, %arg4, %arg8, %arg9 grad_scale %[[COEF]] {beta1 = 9.000000e-01 : f64, beta2 = 0.9499{{[0-9]*}} : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : tensor<4x8xf32>, tensor<f32>
// CHECK: loom.adamw %arg5, %[[G2]], %arg6, %arg7, %arg8, %arg9 grad_scale %[[COEF]] {{.*}} : tensor<8xf32>, tensor<f32>
// CHECK-NOT: loom.reduce
func.func @norm_and_clip(%g1: tensor<4x8xf32>, %g2: tensor<8xf32>, %p1: tensor<4x8xf32>,
                         %m1: tensor<4x8xf32>, %v1: tensor<4x8xf32>, %p2: tensor<8xf32>,
                         %m2: tensor<8xf32>, %v2: tensor<8xf32>, %lr: tensor<f32>, %step: tensor<f32>)
    -> (tensor<4x8xf32>, tensor<8xf32>) {
  %sq1 = loom.mul %g1, %g1 : tensor<4x8xf32>, tensor<4x8xf32>
  %s1 = loom.reduce sum %sq1 {axes = array<i64: 0, 1>, keepdim = false} : tensor<4x8xf32>
  %sq2 = loom.mul %g2, %g2 : tensor<8xf32>, tensor<8xf32>
  %s2 = loom.reduce sum %sq2 {axes = array<i64: 0>, keepdim = false} : tensor<8xf32>
  %sum = loom.add %s1, %s2 : tensor<f32>, tensor<f32>
  %norm = loom.sqrt %sum : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %max = loom.constant dense<1.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-6> : tensor<f32>
  %den = loom.add %norm, %eps : tensor<f32>, tensor<f32>
  %ratio = loom.div %max, %den : tensor<f32>, tensor<f32>
  %coef = loom.min %one, %ratio : tensor<f32>, tensor<f32>
  %c1 = loom.mul %g1, %coef : tensor<4x8xf32>, tensor<f32>
  %c2 = loom.mul %coef, %g2 : tensor<f32>, tensor<8xf32>
  %a:3 = loom.adamw %p1, %c1, %m1, %v1, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<f32>
  %b:3 = loom.adamw %p2, %c2, %m2, %v2, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<8xf32>, tensor<f32>
  return %a#0, %b#0 : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// A square read by anything besides the sum (here: returned) stays, and so
// does its sum: the fused op would read g and the square would still be
// written.
// CHECK-LABEL: func.func @square_used_twice
// CHECK: %[[SQ:.*]] = loom.mul %arg0, %arg0
// CHECK: loom.reduce sum %[[SQ]]
// CHECK-NOT: loom.sum_squares
func.func @square_used_twice(%g: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %sq = loom.mul %g, %g : tensor<4x8xf32>, tensor<4x8xf32>
  %s = loom.reduce sum %sq {axes = array<i64: 0, 1>, keepdim = false} : tensor<4x8xf32>
  return %s, %sq : tensor<f32>, tensor<4x8xf32>
}

// -----

// Sums over some axes only, kept dims, means and products of two different
// tensors are not a sum of squares.
// CHECK-LABEL: func.func @not_a_sum_of_squares
// CHECK-NOT: loom.sum_squares
// CHECK: loom.reduce sum %{{.*}} {axes = array<i64: 1>, keepdim = false}
// CHECK: loom.reduce sum %{{.*}} {axes = array<i64: 0, 1>}
// CHECK: loom.reduce mean %{{.*}} {axes = array<i64: 0, 1>, keepdim = false}
// CHECK: loom.reduce sum %{{.*}} {axes = array<i64: 0, 1>, keepdim = false}
// CHECK-NOT: loom.sum_squares
func.func @not_a_sum_of_squares(%g: tensor<4x8xf32>, %h: tensor<4x8xf32>)
    -> (tensor<4xf32>, tensor<1x1xf32>, tensor<f32>, tensor<f32>) {
  %sq1 = loom.mul %g, %g : tensor<4x8xf32>, tensor<4x8xf32>
  %rows = loom.reduce sum %sq1 {axes = array<i64: 1>, keepdim = false} : tensor<4x8xf32>
  %sq2 = loom.mul %g, %g : tensor<4x8xf32>, tensor<4x8xf32>
  %kept = loom.reduce sum %sq2 {axes = array<i64: 0, 1>, keepdim = true} : tensor<4x8xf32>
  %sq3 = loom.mul %g, %g : tensor<4x8xf32>, tensor<4x8xf32>
  %mean = loom.reduce mean %sq3 {axes = array<i64: 0, 1>, keepdim = false} : tensor<4x8xf32>
  %prod = loom.mul %g, %h : tensor<4x8xf32>, tensor<4x8xf32>
  %dot = loom.reduce sum %prod {axes = array<i64: 0, 1>, keepdim = false} : tensor<4x8xf32>
  return %rows, %kept, %mean, %dot : tensor<4xf32>, tensor<1x1xf32>, tensor<f32>, tensor<f32>
}

// -----

// A bf16 square rounds each product to bf16: sum_squares (f32 squares)
// would change the value, so it is left alone.
// CHECK-LABEL: func.func @bf16_square
// CHECK: loom.mul
// CHECK-NOT: loom.sum_squares
func.func @bf16_square(%x: tensor<4x8xbf16>) -> tensor<bf16> {
  %sq = loom.mul %x, %x : tensor<4x8xbf16>, tensor<4x8xbf16>
  %s = loom.reduce sum %sq {axes = array<i64: 0, 1>, keepdim = false} : tensor<4x8xbf16>
  return %s : tensor<bf16>
}

// -----

// The clipped gradient has another reader (returned): AdamW keeps reading
// it. A scale that is not rank 0 (one per row, or a one-element vector)
// is not a clip coefficient: not fused either.
// CHECK-LABEL: func.func @clip_not_fused
// CHECK-NOT: grad_scale
// CHECK: %[[C1:.*]] = loom.mul %arg0, %arg6
// CHECK-NEXT: loom.adamw %arg1, %[[C1]], %arg2, %arg3, %arg4, %arg5 {
// CHECK-NEXT: %[[C2:.*]] = loom.mul %arg0, %arg7
// CHECK-NEXT: loom.adamw %arg1, %[[C2]], %arg2, %arg3, %arg4, %arg5 {
// CHECK-NEXT: %[[C3:.*]] = loom.mul %arg0, %arg8
// CHECK-NEXT: loom.adamw %arg1, %[[C3]], %arg2, %arg3, %arg4, %arg5 {
// CHECK-NOT: grad_scale
func.func @clip_not_fused(%g: tensor<4x8xf32>, %p: tensor<4x8xf32>, %m: tensor<4x8xf32>,
                          %v: tensor<4x8xf32>, %lr: tensor<f32>, %step: tensor<f32>,
                          %coef: tensor<f32>, %rows: tensor<4x1xf32>,
                          %vec: tensor<1xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c1 = loom.mul %g, %coef : tensor<4x8xf32>, tensor<f32>
  %a:3 = loom.adamw %p, %c1, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<f32>
  %c2 = loom.mul %g, %rows : tensor<4x8xf32>, tensor<4x1xf32>
  %b:3 = loom.adamw %p, %c2, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<f32>
  %c3 = loom.mul %g, %vec : tensor<4x8xf32>, tensor<1xf32>
  %c:3 = loom.adamw %p, %c3, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<4x8xf32>, tensor<f32>
  return %a#0, %b#0, %c#0, %c1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
