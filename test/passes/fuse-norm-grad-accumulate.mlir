// RUN: loom-opt --loom-fuse-norm-grad-accumulate %s | FileCheck %s
// RUN: loom-opt %S/recompute.mlir --loom-build-train-step --canonicalize --cse --loom-fuse-norm-grad-accumulate | FileCheck %s --check-prefix=STEP

// The residual stream's gradient sum, add(dh, rms_norm_grad(h, w, dy).dx),
// becomes the norm's gradient with dh as its addend, where the norm's
// gradient was: dw keeps its reader, dx's sum replaces the add's result.
// The same for layer_norm_grad, with the operands of the add either way round.
// CHECK-LABEL: func.func @residual_sums
// CHECK-SAME: (%[[H:.*]]: tensor<3x4xf32>, %[[W:.*]]: tensor<4xf32>, %[[DY:.*]]: tensor<3x4xf32>, %[[DH:.*]]: tensor<3x4xf32>)
// CHECK: %[[DX:.*]], %[[DW:.*]] = loom.rms_norm_grad %[[H]], %[[W]], %[[DY]] accumulate %[[DH]] : tensor<3x4xf32> {epsilon = {{.*}} : f64}
// CHECK-NEXT: %[[LX:.*]], %[[LW:.*]], %[[LB:.*]] = loom.layer_norm_grad %[[H]], %[[W]], %[[DX]] accumulate %[[DX]] : tensor<3x4xf32> {epsilon = 1.000000e-05 : f64}
// CHECK-NOT: loom.add
// CHECK: return %[[LX]], %[[DW]], %[[LW]], %[[LB]]
func.func @residual_sums(%h: tensor<3x4xf32>, %w: tensor<4xf32>, %dy: tensor<3x4xf32>, %dh: tensor<3x4xf32>)
    -> (tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dx, %dw = loom.rms_norm_grad %h, %w, %dy {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %s = loom.add %dh, %dx : tensor<3x4xf32>, tensor<3x4xf32>
  %lx, %lw, %lb = loom.layer_norm_grad %h, %w, %s {epsilon = 1.0e-5 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %t = loom.add %lx, %s : tensor<3x4xf32>, tensor<3x4xf32>
  return %t, %dw, %lw, %lb : tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Left alone: dx read twice, an addend made after the norm's gradient (the
// fused op could not take its place), a bf16 sum, a broadcasting add, and a
// norm gradient that already has an addend.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: loom.add
// CHECK: return
func.func @kept(%h: tensor<3x4xf32>, %w: tensor<4xf32>, %dy: tensor<3x4xf32>, %dh: tensor<3x4xf32>,
                %hb: tensor<3x4xbf16>, %wb: tensor<4xbf16>, %row: tensor<1x4xf32>)
    -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xbf16>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %dx, %dw = loom.rms_norm_grad %h, %w, %dy {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %twice = loom.add %dh, %dx : tensor<3x4xf32>, tensor<3x4xf32>
  %dx2, %dw2 = loom.rms_norm_grad %h, %w, %dy {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %late = loom.exp %dh : tensor<3x4xf32>
  %after = loom.add %late, %dx2 : tensor<3x4xf32>, tensor<3x4xf32>
  %bx, %bw = loom.rms_norm_grad %hb, %wb, %hb {epsilon = 1.0e-6 : f64} : tensor<3x4xbf16>, tensor<4xbf16>
  %bsum = loom.add %hb, %bx : tensor<3x4xbf16>, tensor<3x4xbf16>
  %dx3, %dw3 = loom.rms_norm_grad %h, %w, %dy {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %bcast = loom.add %row, %dx3 : tensor<1x4xf32>, tensor<3x4xf32>
  %dx4, %dw4 = loom.rms_norm_grad %h, %w, %dy accumulate %dh : tensor<3x4xf32> {epsilon = 1.0e-6 : f64} : tensor<3x4xf32>, tensor<4xf32>
  %again = loom.add %dh, %dx4 : tensor<3x4xf32>, tensor<3x4xf32>
  return %twice, %dx, %after, %bsum, %bcast, %again : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xbf16>, tensor<3x4xf32>, tensor<3x4xf32>
}

// A built training step: both norms of each decoder layer take the
// residual gradient as their addend; the final norm, whose input has no
// other reader, keeps its plain form.
// STEP-LABEL: func.func @train_step
// STEP: loom.rms_norm_grad %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} {epsilon
// STEP: loom.rms_norm_grad %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} accumulate
// STEP: loom.rms_norm_grad %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} accumulate
