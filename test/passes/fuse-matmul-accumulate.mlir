// RUN: loom-opt --loom-fuse-matmul-accumulate %s | FileCheck %s
// RUN: loom-opt %S/recompute.mlir --loom-build-train-step --canonicalize --cse --loom-fuse-matmul-accumulate | FileCheck %s --check-prefix=STEP

// After the loss gradient, add(x, matmul(a, b)) becomes one GEMM with x as
// its addend; the chain dq Wq + dk Wk + dv Wv keeps its order (the later
// product is the GEMM, the earlier sum its addend). The forward's residual
// add (before the loss gradient) stays an add.
// CHECK-LABEL: func.func @sums
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>, %[[W:.*]]: tensor<4x4xf32>, %[[T:.*]]: tensor<3xi64>, %[[DQ:.*]]: tensor<3x4xf32>, %[[DK:.*]]: tensor<3x4xf32>, %[[DV:.*]]: tensor<3x4xf32>)
// CHECK: %[[F:.*]] = loom.matmul %[[X]], %[[W]]
// CHECK-NEXT: %[[R:.*]] = loom.add %[[X]], %[[F]]
// CHECK: loom.cross_entropy_grad
// CHECK-NEXT: %[[Q:.*]] = loom.matmul %[[DQ]], %[[W]] {transpose_rhs = true}
// CHECK-NEXT: %[[QK:.*]] = loom.matmul_accumulate %[[DK]], %[[W]], %[[Q]] {transpose_rhs = true}
// CHECK-NEXT: %[[QKV:.*]] = loom.matmul_accumulate %[[DV]], %[[W]], %[[QK]] {transpose_rhs = true}
// CHECK-NEXT: return %[[R]], %[[QKV]]
func.func @sums(%x: tensor<3x4xf32>, %w: tensor<4x4xf32>, %t: tensor<3xi64>, %dq: tensor<3x4xf32>,
                %dk: tensor<3x4xf32>, %dv: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %f = loom.matmul %x, %w : tensor<3x4xf32>, tensor<4x4xf32>
  %r = loom.add %x, %f : tensor<3x4xf32>, tensor<3x4xf32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %g = loom.cross_entropy_grad %r, %t, %one : tensor<3x4xf32>, tensor<3xi64>, tensor<f32>
  %q = loom.matmul %dq, %w {transpose_rhs = true} : tensor<3x4xf32>, tensor<4x4xf32>
  %k = loom.matmul %dk, %w {transpose_rhs = true} : tensor<3x4xf32>, tensor<4x4xf32>
  %v = loom.matmul %dv, %w {transpose_rhs = true} : tensor<3x4xf32>, tensor<4x4xf32>
  %qk = loom.add %q, %k : tensor<3x4xf32>, tensor<3x4xf32>
  %qkv = loom.add %qk, %v : tensor<3x4xf32>, tensor<3x4xf32>
  return %r, %qkv : tensor<3x4xf32>, tensor<3x4xf32>
}

// Left alone: a product read twice (the add is not its only reader), a
// product rounded to bf16 before it is widened and added (fusing would drop
// that rounding), a broadcasting add, and a function with no loss gradient.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: matmul_accumulate
// CHECK: return
func.func @kept(%x: tensor<3x4xf32>, %w: tensor<4x4xf32>, %t: tensor<3xi64>, %a: tensor<3x4xbf16>,
                %wb: tensor<4x4xbf16>, %row: tensor<1x4xf32>)
    -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %one = loom.constant dense<1.0> : tensor<f32>
  %g = loom.cross_entropy_grad %x, %t, %one : tensor<3x4xf32>, tensor<3xi64>, tensor<f32>
  %p = loom.matmul %g, %w : tensor<3x4xf32>, tensor<4x4xf32>
  %twice = loom.add %x, %p : tensor<3x4xf32>, tensor<3x4xf32>
  %rounded = loom.matmul %a, %wb : tensor<3x4xbf16>, tensor<4x4xbf16>
  %wide = loom.cast %rounded : tensor<3x4xbf16> -> tensor<3x4xf32>
  %sum = loom.add %x, %wide : tensor<3x4xf32>, tensor<3x4xf32>
  %p2 = loom.matmul %g, %w : tensor<3x4xf32>, tensor<4x4xf32>
  %bcast = loom.add %row, %p2 : tensor<1x4xf32>, tensor<3x4xf32>
  return %twice, %p, %sum, %bcast : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// CHECK-LABEL: func.func @no_loss_gradient
// CHECK-NOT: matmul_accumulate
// CHECK: return
func.func @no_loss_gradient(%x: tensor<3x4xf32>, %w: tensor<4x4xf32>) -> tensor<3x4xf32> {
  %p = loom.matmul %x, %w : tensor<3x4xf32>, tensor<4x4xf32>
  %s = loom.add %x, %p : tensor<3x4xf32>, tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}

// The two-layer model's training step: each layer's normed input gets its
// q, k, v input gradients summed by two GEMMs with addends, and gate/up's
// by one; no add of a product is left after the loss gradient.
// STEP-LABEL: func.func @train_step
// STEP: loom.cross_entropy_grad
// STEP-COUNT-6: loom.matmul_accumulate
// STEP-NOT: loom.matmul_accumulate
// STEP: return
