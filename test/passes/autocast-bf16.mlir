// RUN: loom-opt %s --pass-pipeline="builtin.module(func.func(loom-autocast-bf16))" | FileCheck %s

// Matmul operands and result are rounded through bf16; the norm stays f32.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[XB:.*]] = loom.cast %arg0 : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK: %[[X:.*]] = loom.cast %[[XB]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK: %[[WB:.*]] = loom.cast %arg1 : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK: %[[W:.*]] = loom.cast %[[WB]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK: %[[Y:.*]] = loom.matmul %[[X]], %[[W]]
// CHECK: %[[YB:.*]] = loom.cast %[[Y]] : tensor<2x3xf32> -> tensor<2x3xbf16>
// CHECK: %[[YR:.*]] = loom.cast %[[YB]] : tensor<2x3xbf16> -> tensor<2x3xf32>
// CHECK: loom.rms_norm %[[YR]], %arg2
// CHECK-NOT: loom.cast
func.func @mlp(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %g: tensor<3xf32>) -> tensor<2x3xf32> {
  %y = loom.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %n = loom.rms_norm %y, %g {epsilon = 1.0e-6 : f64} : tensor<2x3xf32>, tensor<3xf32>
  return %n : tensor<2x3xf32>
}

// Attention: all three operands and the output.
// CHECK-LABEL: func.func @attn
// CHECK-COUNT-6: loom.cast
// CHECK: loom.attention
// CHECK-COUNT-2: loom.cast
func.func @attn(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %a = loom.attention %q, %q, %q {causal = true, scale = 0.35 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return %a : tensor<1x2x4x8xf32>
}
