// RUN: loom-opt --loom-fuse-add-rms-norm %s | FileCheck %s
// RUN: loom-opt %S/recompute.mlir --loom-build-train-step --canonicalize --cse --loom-fuse-add-rms-norm | FileCheck %s --check-prefix=STEP

// A residual add and the rms_norm that reads it become one op where the
// add was: the sum keeps the add's other readers, the norm the rms_norm's.
// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[H:.*]]: tensor<3x4xf32>, %[[D:.*]]: tensor<3x4xf32>, %[[W:.*]]: tensor<4xf32>)
// CHECK: %[[S:.*]], %[[N:.*]] = loom.add_rms_norm %[[H]], %[[D]], %[[W]] {epsilon = {{.*}} : f64} : tensor<3x4xf32>, tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = loom.exp %[[N]]
// CHECK-NEXT: %[[R:.*]] = loom.add %[[S]], %[[E]]
// CHECK-NOT: loom.rms_norm
// CHECK: return %[[R]]
func.func @residual(%h: tensor<3x4xf32>, %d: tensor<3x4xf32>, %w: tensor<4xf32>) -> tensor<3x4xf32> {
  %s = loom.add %h, %d : tensor<3x4xf32>, tensor<3x4xf32>
  %n = loom.rms_norm %s, %w {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %e = loom.exp %n : tensor<3x4xf32>
  %r = loom.add %s, %e : tensor<3x4xf32>, tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}

// Two norms of one sum (recompute's clone): the first fuses, the second
// reads the fused op's sum.
// CHECK-LABEL: func.func @two_norms
// CHECK: %[[S:.*]], %[[N:.*]] = loom.add_rms_norm
// CHECK: loom.rms_norm %[[S]]
func.func @two_norms(%h: tensor<3x4xf32>, %d: tensor<3x4xf32>, %w: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %s = loom.add %h, %d : tensor<3x4xf32>, tensor<3x4xf32>
  %n = loom.rms_norm %s, %w {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %m = loom.rms_norm %s, %w {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  return %n, %m : tensor<3x4xf32>, tensor<3x4xf32>
}

// Left alone: a bf16 sum, a broadcasting add, and a weight made after the
// add (the fused op could not stand where the add was).
// CHECK-LABEL: func.func @kept
// CHECK-NOT: add_rms_norm
// CHECK: return
func.func @kept(%hb: tensor<3x4xbf16>, %wb: tensor<4xbf16>, %h: tensor<3x4xf32>, %row: tensor<1x4xf32>,
                %w: tensor<4xf32>) -> (tensor<3x4xbf16>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %s = loom.add %hb, %hb : tensor<3x4xbf16>, tensor<3x4xbf16>
  %n = loom.rms_norm %s, %wb {epsilon = 1.0e-6 : f64} : tensor<3x4xbf16>, tensor<4xbf16>
  %t = loom.add %h, %row : tensor<3x4xf32>, tensor<1x4xf32>
  %m = loom.rms_norm %t, %w {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %u = loom.add %h, %h : tensor<3x4xf32>, tensor<3x4xf32>
  %late = loom.exp %w : tensor<4xf32>
  %k = loom.rms_norm %u, %late {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  return %n, %m, %k : tensor<3x4xbf16>, tensor<3x4xf32>, tensor<3x4xf32>
}

// A built step: the layer's residual add and the final norm fuse; the
// forward keeps no separate rms_norm of a sum.
// STEP-LABEL: func.func @train_step
// STEP: loom.add_rms_norm
