// RUN: loom-opt %s --loom-fuse-rotary | FileCheck %s

// HF apply_rotary_pos_emb: q * cos + rotate_half(q) * sin.
// CHECK-LABEL: func.func @rotate_half
// CHECK: %[[R:.*]] = loom.rotary %arg0, %arg1, %arg2 : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @rotate_half(%q: tensor<1x2x4x8xf32>, %cos: tensor<1x1x4x8xf32>, %sin: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %a = loom.mul %q, %cos : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  %lo = loom.slice %q {sizes = array<i64: 1, 2, 4, 4>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x2x4x8xf32>
  %hi = loom.slice %q {sizes = array<i64: 1, 2, 4, 4>, starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x2x4x8xf32>
  %n = loom.neg %hi : tensor<1x2x4x4xf32>
  %rot = loom.concat %n, %lo {axis = 3 : i64} : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %b = loom.mul %rot, %sin : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  %y = loom.add %a, %b : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// Halves swapped the other way round (concat(lo, -hi)) is a different
// rotation and must not fuse.
// CHECK-LABEL: func.func @wrong_order
// CHECK-NOT: loom.rotary
func.func @wrong_order(%q: tensor<1x2x4x8xf32>, %cos: tensor<1x1x4x8xf32>, %sin: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %a = loom.mul %q, %cos : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  %lo = loom.slice %q {sizes = array<i64: 1, 2, 4, 4>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x2x4x8xf32>
  %hi = loom.slice %q {sizes = array<i64: 1, 2, 4, 4>, starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x2x4x8xf32>
  %n = loom.neg %lo : tensor<1x2x4x4xf32>
  %rot = loom.concat %hi, %n {axis = 3 : i64} : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %b = loom.mul %rot, %sin : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  %y = loom.add %a, %b : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}
