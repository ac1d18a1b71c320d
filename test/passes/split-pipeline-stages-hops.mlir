// RUN: loom-opt %s --loom-split-pipeline-stages="stages=3" | FileCheck %s

// A value read two stages later crosses once per stage: stage 1 passes
// it on.
// CHECK-LABEL: func.func @forward
// CHECK: %[[E:.*]] = loom.embedding
// CHECK-NEXT: %[[H1:.*]] = loom.stage_boundary %[[E]] from 0 to 1 tag 0
// CHECK-NEXT: %[[H2:.*]] = loom.stage_boundary %[[H1]] from 1 to 2 tag 1
// CHECK: loom.add %{{.*}}, %[[H2]]
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %e = loom.constant {param = #loom.param<"wte">} dense<0.5> : tensor<7x4xf32>
  %w0 = loom.constant {param = #loom.param<"h.0.ln.weight">} dense<1.0> : tensor<4xf32>
  %w1 = loom.constant {param = #loom.param<"h.1.ln.weight">} dense<1.0> : tensor<4xf32>
  %w2 = loom.constant {param = #loom.param<"h.2.ln.weight">} dense<1.0> : tensor<4xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %a = loom.rms_norm %h, %w0 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %b = loom.rms_norm %a, %w1 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %c = loom.rms_norm %b, %w2 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %d = loom.add %c, %h : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %d : tensor<2x3x4xf32>
}
