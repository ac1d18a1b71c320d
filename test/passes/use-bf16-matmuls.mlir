// RUN: loom-opt --loom-use-bf16-matmuls --canonicalize %s | FileCheck %s

// An autocast matmul (operands widened from bf16, result rounded to bf16)
// runs on the bf16 tensors; the widening casts go away.
// CHECK-LABEL: func.func @autocast
// CHECK-SAME: (%[[A:.*]]: tensor<2x3x8xbf16>, %[[W:.*]]: tensor<8x5xbf16>)
// CHECK-NEXT: %[[M:.*]] = loom.matmul %[[A]], %[[W]] : tensor<2x3x8xbf16>, tensor<8x5xbf16>
// CHECK-NEXT: %[[F:.*]] = loom.cast %[[M]] : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[F]]
func.func @autocast(%a: tensor<2x3x8xbf16>, %w: tensor<8x5xbf16>) -> tensor<2x3x5xf32> {
  %0 = loom.cast %a : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
  %1 = loom.cast %w : tensor<8x5xbf16> -> tensor<8x5xf32>
  %2 = loom.matmul %0, %1 : tensor<2x3x8xf32>, tensor<8x5xf32>
  %3 = loom.cast %2 : tensor<2x3x5xf32> -> tensor<2x3x5xbf16>
  %4 = loom.cast %3 : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
  return %4 : tensor<2x3x5xf32>
}

// Transpose flags carry over (a weight gradient x^T dy).
// CHECK-LABEL: func.func @transposed
// CHECK: loom.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<6x4xbf16>, tensor<6x3xbf16>
func.func @transposed(%x: tensor<6x4xbf16>, %dy: tensor<6x3xbf16>) -> tensor<4x3xbf16> {
  %0 = loom.cast %x : tensor<6x4xbf16> -> tensor<6x4xf32>
  %1 = loom.cast %dy : tensor<6x3xbf16> -> tensor<6x3xf32>
  %2 = loom.matmul %0, %1 {transpose_lhs = true} : tensor<6x4xf32>, tensor<6x3xf32>
  %3 = loom.cast %2 : tensor<4x3xf32> -> tensor<4x3xbf16>
  return %3 : tensor<4x3xbf16>
}

// The unrounded f32 product has another user: the matmul stays f32.
// CHECK-LABEL: func.func @needed_in_f32
// CHECK: loom.matmul %{{.*}}, %{{.*}} : tensor<3x8xf32>, tensor<8x5xf32>
func.func @needed_in_f32(%a: tensor<3x8xbf16>, %w: tensor<8x5xbf16>) -> (tensor<3x5xbf16>, tensor<3x5xf32>) {
  %0 = loom.cast %a : tensor<3x8xbf16> -> tensor<3x8xf32>
  %1 = loom.cast %w : tensor<8x5xbf16> -> tensor<8x5xf32>
  %2 = loom.matmul %0, %1 : tensor<3x8xf32>, tensor<8x5xf32>
  %3 = loom.cast %2 : tensor<3x5xf32> -> tensor<3x5xbf16>
  return %3, %2 : tensor<3x5xbf16>, tensor<3x5xf32>
}

// An f32 operand that was never rounded: not an autocast matmul.
// CHECK-LABEL: func.func @plain_f32_operand
// CHECK: loom.matmul %{{.*}}, %{{.*}} : tensor<3x8xf32>, tensor<8x5xf32>
func.func @plain_f32_operand(%a: tensor<3x8xf32>, %w: tensor<8x5xbf16>) -> tensor<3x5xbf16> {
  %1 = loom.cast %w : tensor<8x5xbf16> -> tensor<8x5xf32>
  %2 = loom.matmul %a, %1 : tensor<3x8xf32>, tensor<8x5xf32>
  %3 = loom.cast %2 : tensor<3x5xf32> -> tensor<3x5xbf16>
  return %3 : tensor<3x5xbf16>
}

// A biased projection (addmm: the bias added before the one rounding)
// becomes one matmul_bias on the bf16 tensors, the bias in the epilogue.
// CHECK-LABEL: func.func @biased
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xbf16>, %[[W:.*]]: tensor<5x8xbf16>, %[[B:.*]]: tensor<5xbf16>)
// CHECK-NEXT: %[[M:.*]] = loom.matmul_bias %[[X]], %[[W]], %[[B]] {transpose_rhs = true} : tensor<2x3x8xbf16>, tensor<5x8xbf16>, tensor<5xbf16>
// CHECK-NEXT: %[[F:.*]] = loom.cast %[[M]] : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[F]]
func.func @biased(%x: tensor<2x3x8xbf16>, %w: tensor<5x8xbf16>, %b: tensor<5xbf16>) -> tensor<2x3x5xf32> {
  %0 = loom.cast %x : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
  %1 = loom.cast %w : tensor<5x8xbf16> -> tensor<5x8xf32>
  %2 = loom.cast %b : tensor<5xbf16> -> tensor<5xf32>
  %3 = loom.matmul %0, %1 {transpose_rhs = true} : tensor<2x3x8xf32>, tensor<5x8xf32>
  %4 = loom.add %2, %3 : tensor<5xf32>, tensor<2x3x5xf32>
  %5 = loom.cast %4 : tensor<2x3x5xf32> -> tensor<2x3x5xbf16>
  %6 = loom.cast %5 : tensor<2x3x5xbf16> -> tensor<2x3x5xf32>
  return %6 : tensor<2x3x5xf32>
}

// The sum is also read unrounded, or what is added is not a vector over
// the last dim: no epilogue, the matmul stays.
// CHECK-LABEL: func.func @bias_sum_needed_in_f32
// CHECK-NOT: loom.matmul_bias
// CHECK: loom.matmul %{{.*}}, %{{.*}} : tensor<3x8xf32>, tensor<8x5xf32>
// CHECK-LABEL: func.func @not_a_bias
// CHECK-NOT: loom.matmul_bias
// CHECK: loom.matmul %{{.*}}, %{{.*}} : tensor<3x8xf32>, tensor<8x5xf32>
func.func @bias_sum_needed_in_f32(%a: tensor<3x8xbf16>, %w: tensor<8x5xbf16>, %b: tensor<5xbf16>) -> (tensor<3x5xbf16>, tensor<3x5xf32>) {
  %0 = loom.cast %a : tensor<3x8xbf16> -> tensor<3x8xf32>
  %1 = loom.cast %w : tensor<8x5xbf16> -> tensor<8x5xf32>
  %2 = loom.cast %b : tensor<5xbf16> -> tensor<5xf32>
  %3 = loom.matmul %0, %1 : tensor<3x8xf32>, tensor<8x5xf32>
  %4 = loom.add %3, %2 : tensor<3x5xf32>, tensor<5xf32>
  %5 = loom.cast %4 : tensor<3x5xf32> -> tensor<3x5xbf16>
  return %5, %4 : tensor<3x5xbf16>, tensor<3x5xf32>
}
func.func @not_a_bias(%a: tensor<3x8xbf16>, %w: tensor<8x5xbf16>, %r: tensor<3x5xbf16>) -> tensor<3x5xbf16> {
  %0 = loom.cast %a : tensor<3x8xbf16> -> tensor<3x8xf32>
  %1 = loom.cast %w : tensor<8x5xbf16> -> tensor<8x5xf32>
  %2 = loom.cast %r : tensor<3x5xbf16> -> tensor<3x5xf32>
  %3 = loom.matmul %0, %1 : tensor<3x8xf32>, tensor<8x5xf32>
  %4 = loom.add %3, %2 : tensor<3x5xf32>, tensor<3x5xf32>
  %5 = loom.cast %4 : tensor<3x5xf32> -> tensor<3x5xbf16>
  return %5 : tensor<3x5xbf16>
}
