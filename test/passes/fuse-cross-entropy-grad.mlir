// RUN: loom-opt --loom-fuse-cross-entropy-grad %s | FileCheck %s
// RUN: loom-opt %S/recompute.mlir --loom-build-train-step --canonicalize --cse --loom-fuse-cross-entropy-grad | FileCheck %s --check-prefix=STEP

// The loss and the gradient of the same logits and targets become one op
// where the loss was; a seed made after the loss from constants (1 * 1/tp
// under tensor parallelism) moves up in front of it.
// CHECK-LABEL: func.func @pair
// CHECK-SAME: (%[[X:.*]]: tensor<3x7xf32>, %[[T:.*]]: tensor<3xi64>)
// CHECK: %[[ONE:.*]] = loom.constant dense<1.000000e+00>
// CHECK-NEXT: %[[HALF:.*]] = loom.constant dense<5.000000e-01>
// CHECK-NEXT: %[[SEED:.*]] = loom.mul %[[ONE]], %[[HALF]]
// CHECK-NEXT: %[[DX:.*]], %[[LOSS:.*]] = loom.cross_entropy_with_grad %[[X]], %[[T]], %[[SEED]] : tensor<3x7xf32>, tensor<3xi64>, tensor<f32>
// CHECK-NEXT: %[[Y:.*]] = loom.exp %[[LOSS]]
// CHECK-NOT: loom.cross_entropy
// CHECK: return %[[Y]], %[[DX]]
func.func @pair(%x: tensor<3x7xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x7xf32>) {
  %l = loom.cross_entropy %x, %t : tensor<3x7xf32>, tensor<3xi64>
  %y = loom.exp %l : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %half = loom.constant dense<0.5> : tensor<f32>
  %seed = loom.mul %one, %half : tensor<f32>, tensor<f32>
  %g = loom.cross_entropy_grad %x, %t, %seed : tensor<3x7xf32>, tensor<3xi64>, tensor<f32>
  return %y, %g : tensor<f32>, tensor<3x7xf32>
}

// Left alone: a seed computed from the loss, a gradient of other targets,
// and a gradient whose loss comes after it.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: cross_entropy_with_grad
// CHECK: return
func.func @kept(%x: tensor<3x7xf32>, %t: tensor<3xi64>, %u: tensor<3xi64>, %s: tensor<f32>)
    -> (tensor<f32>, tensor<3x7xf32>, tensor<3x7xf32>, tensor<3x7xf32>, tensor<f32>) {
  %l = loom.cross_entropy %x, %t : tensor<3x7xf32>, tensor<3xi64>
  %seed = loom.exp %l : tensor<f32>
  %g = loom.cross_entropy_grad %x, %t, %seed : tensor<3x7xf32>, tensor<3xi64>, tensor<f32>
  %h = loom.cross_entropy_grad %x, %u, %s : tensor<3x7xf32>, tensor<3xi64>, tensor<f32>
  %y = loom.exp %x : tensor<3x7xf32>
  %k = loom.cross_entropy_grad %y, %t, %s : tensor<3x7xf32>, tensor<3xi64>, tensor<f32>
  %m = loom.cross_entropy %y, %t : tensor<3x7xf32>, tensor<3xi64>
  return %l, %g, %h, %k, %m : tensor<f32>, tensor<3x7xf32>, tensor<3x7xf32>, tensor<3x7xf32>, tensor<f32>
}

// A built step: the pair at the loss, the constant seed moved up to it.
// STEP-LABEL: func.func @train_step
// STEP: %[[DX:.*]], %[[LOSS:.*]] = loom.cross_entropy_with_grad
// STEP-NOT: loom.cross_entropy
// STEP: loom.matmul
