// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-autocast-bf16),loom-build-train-step)' | FileCheck %s

// Under autocast the fused attention is SDPA, whose output is a bf16
// tensor: the IR rounds it right after the op. The backward reads that
// rounded output (what PyTorch's SDPA backward saves) and the f32 lse,
// so the rounding stays the f32 output's only reader and codegen can fold
// it into the attention kernel.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[O:[^,]*]], %[[LSE:.*]] = loom.attention
// CHECK-NEXT: %[[N:.*]] = loom.cast %[[O]] : tensor<1x2x3x2xf32> -> tensor<1x2x3x2xbf16>
// CHECK-NEXT: %[[W:.*]] = loom.cast %[[N]] : tensor<1x2x3x2xbf16> -> tensor<1x2x3x2xf32>
// CHECK-NOT: %[[O]]
// CHECK: loom.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[W]], %[[LSE]], %{{.*}} {
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %wq = loom.constant {param = #loom.param<"q">} dense<0.1> : tensor<4x4xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<1x3xi64>
  %q0 = loom.matmul %h, %wq : tensor<1x3x4xf32>, tensor<4x4xf32>
  %q1 = loom.reshape %q0 : tensor<1x3x4xf32> -> tensor<1x3x2x2xf32>
  %q = loom.transpose %q1 [0, 2, 1, 3] : tensor<1x3x2x2xf32>
  %o, %lse = loom.attention %q, %q, %q {causal = true, scale = 0.70710678 : f64} : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>
  %ot = loom.transpose %o [0, 2, 1, 3] : tensor<1x2x3x2xf32>
  %o2 = loom.reshape %ot : tensor<1x3x2x2xf32> -> tensor<1x3x4xf32>
  %l = loom.matmul %o2, %head : tensor<1x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<1x3x7xf32>
}
