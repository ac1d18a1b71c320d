// RUN: not loom-opt %s --loom-build-train-step 2>&1 | FileCheck %s

// attention's lse is a statistic for its backward, not a value the loss may
// depend on: attention_grad has no input for its gradient, so autodiff
// refuses a loss that reads lse rather than drop that term silently.
// CHECK: error: 'loom.attention' op has a gradient for its lse result, which attention_grad does not take
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x4xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<1x3xi64>
  %q = loom.reshape %h : tensor<1x3x4xf32> -> tensor<1x1x3x4xf32>
  %o, %lse = loom.attention %q, %q, %q {causal = true, scale = 0.5 : f64} : tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>
  %o3 = loom.reshape %o : tensor<1x1x3x4xf32> -> tensor<1x3x4xf32>
  %l3 = loom.reshape %lse : tensor<1x1x3xf32> -> tensor<1x3x1xf32>
  %y = loom.add %o3, %l3 : tensor<1x3x4xf32>, tensor<1x3x1xf32>
  return %y : tensor<1x3x4xf32>
}
