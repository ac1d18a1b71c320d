// RUN: loom-opt %s --canonicalize | FileCheck %s

// A transpose of a matmul operand's last two dims becomes the matmul's flag.
// CHECK-LABEL: func.func @transposed_weight
// CHECK-NEXT: %[[R:.*]] = loom.matmul %arg0, %arg1 {transpose_rhs = true} : tensor<4x8xf32>, tensor<16x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @transposed_weight(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %t = loom.transpose %w [1, 0] : tensor<16x8xf32>
  %y = loom.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32>
  return %y : tensor<4x16xf32>
}

// Identity casts, reshapes, transposes and full slices fold away; reshape
// chains collapse.
// CHECK-LABEL: func.func @identities
// CHECK-NEXT: %[[R:.*]] = loom.reshape %arg0 : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT: return %[[R]]
func.func @identities(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %c = loom.cast %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %t = loom.transpose %c [0, 1] : tensor<2x3xf32>
  %s = loom.slice %t {sizes = array<i64: 2, 3>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x3xf32>
  %r1 = loom.reshape %s : tensor<2x3xf32> -> tensor<3x2xf32>
  %r2 = loom.reshape %r1 : tensor<3x2xf32> -> tensor<6xf32>
  return %r2 : tensor<6xf32>
}
