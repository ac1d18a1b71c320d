// RUN: loom-opt %s --loom-fuse-rms-norm | FileCheck %s

// HF LlamaRMSNorm as exported: pow, mean, add eps, sqrt, reciprocal, mul, mul.
// CHECK-LABEL: func.func @reciprocal_sqrt
// CHECK: %[[R:.*]] = loom.rms_norm %arg0, %arg1 {epsilon = 9.9999999747524271E-7 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK-NEXT: return %[[R]]
func.func @reciprocal_sqrt(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-6> : tensor<f32>
  %sq = loom.pow %x, %two : tensor<2x4x8xf32>, tensor<f32>
  %m = loom.reduce mean %sq {axes = array<i64: 2>} : tensor<2x4x8xf32>
  %v = loom.add %m, %eps : tensor<2x4x1xf32>, tensor<f32>
  %s = loom.sqrt %v : tensor<2x4x1xf32>
  %r = loom.reciprocal %s : tensor<2x4x1xf32>
  %n = loom.mul %x, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  %y = loom.mul %w, %n : tensor<8xf32>, tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// rsqrt spelling, x*x square, weight on the right.
// CHECK-LABEL: func.func @rsqrt
// CHECK: loom.rms_norm %arg0, %arg1 {epsilon = 9.9999997473787516E-6 : f64}
func.func @rsqrt(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %eps = loom.constant dense<1.0e-5> : tensor<f32>
  %sq = loom.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %m = loom.reduce mean %sq {axes = array<i64: 1>} : tensor<4x8xf32>
  %v = loom.add %eps, %m : tensor<f32>, tensor<4x1xf32>
  %r = loom.rsqrt %v : tensor<4x1xf32>
  %n = loom.mul %r, %x : tensor<4x1xf32>, tensor<4x8xf32>
  %y = loom.mul %n, %w : tensor<4x8xf32>, tensor<8xf32>
  return %y : tensor<4x8xf32>
}

// Division by sqrt.
// CHECK-LABEL: func.func @div_sqrt
// CHECK: loom.rms_norm %arg0, %arg1
func.func @div_sqrt(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-5> : tensor<f32>
  %sq = loom.pow %x, %two : tensor<4x8xf32>, tensor<f32>
  %m = loom.reduce mean %sq {axes = array<i64: 1>} : tensor<4x8xf32>
  %v = loom.add %m, %eps : tensor<4x1xf32>, tensor<f32>
  %s = loom.sqrt %v : tensor<4x1xf32>
  %n = loom.div %x, %s : tensor<4x8xf32>, tensor<4x1xf32>
  %y = loom.mul %w, %n : tensor<8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// The mean over a different axis is not an RMSNorm.
// CHECK-LABEL: func.func @wrong_axis
// CHECK-NOT: loom.rms_norm
func.func @wrong_axis(%x: tensor<8x8xf32>, %w: tensor<8xf32>) -> tensor<8x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-5> : tensor<f32>
  %sq = loom.pow %x, %two : tensor<8x8xf32>, tensor<f32>
  %m = loom.reduce mean %sq {axes = array<i64: 0>} : tensor<8x8xf32>
  %v = loom.add %m, %eps : tensor<1x8xf32>, tensor<f32>
  %r = loom.rsqrt %v : tensor<1x8xf32>
  %n = loom.mul %x, %r : tensor<8x8xf32>, tensor<1x8xf32>
  %y = loom.mul %w, %n : tensor<8xf32>, tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// Normalizing a different tensor than the one squared is not an RMSNorm.
// CHECK-LABEL: func.func @different_x
// CHECK-NOT: loom.rms_norm
func.func @different_x(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %eps = loom.constant dense<1.0e-5> : tensor<f32>
  %sq = loom.pow %z, %two : tensor<4x8xf32>, tensor<f32>
  %m = loom.reduce mean %sq {axes = array<i64: 1>} : tensor<4x8xf32>
  %v = loom.add %m, %eps : tensor<4x1xf32>, tensor<f32>
  %r = loom.rsqrt %v : tensor<4x1xf32>
  %n = loom.mul %x, %r : tensor<4x8xf32>, tensor<4x1xf32>
  %y = loom.mul %w, %n : tensor<8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
