// RUN: loom-opt %s --split-input-file --loom-build-train-step="warmup=5 max-grad-norm=1.0" | FileCheck %s

// Tied embedding and LM head: the table's gradient is the sum of the
// embedding's scatter-add and the LM head matmul's weight gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: loom.name = "embed", loom.param = #loom.param<"embed">
// CHECK-SAME: loom.name = "exp_avg.embed"
// CHECK-SAME: loom.name = "exp_avg_sq.embed"
// CHECK-SAME: loom.name = "step"
// CHECK-SAME: -> (tensor<f32> {loom.name = "loss"}, tensor<f32> {loom.name = "grad_norm"}, tensor<f32> {loom.name = "lr"}, tensor<7x4xf32> {loom.updates = 0 : i64}
// CHECK: %[[LOGITS:.*]] = loom.matmul %{{.*}}, %arg0 {transpose_rhs = true}
// CHECK: loom.cross_entropy
// CHECK: %[[DLOGITS:.*]] = loom.cross_entropy_grad
// CHECK: %[[DHEAD:.*]] = loom.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// CHECK: %[[DEMB:.*]] = loom.embedding_grad {{.*}}num_embeddings = 7
// CHECK: %[[SUM:.*]] = loom.add %[[DHEAD]], %[[DEMB]]
// CHECK: loom.sqrt
// CHECK: loom.min
// CHECK: loom.adamw %arg0, %{{.*}}, %arg1, %arg2
// CHECK-SAME: beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64
// CHECK: return
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %w = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %h = loom.embedding %w, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %l = loom.matmul %h, %w {transpose_rhs = true} : tensor<2x3x4xf32>, tensor<7x4xf32>
  return %l : tensor<2x3x7xf32>
}

// -----

// rms_norm: one fused backward op gives dx and dweight.
// CHECK-LABEL: func.func @train_step
// CHECK: loom.rms_norm_grad %{{.*}}, %arg1, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64}
// CHECK: loom.adamw %arg1
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %g = loom.constant {param = #loom.param<"norm.weight">} dense<1.0> : tensor<4xf32>
  %head = loom.constant {param = #loom.param<"head", transposed>} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %n = loom.rms_norm %h, %g {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %l = loom.matmul %n, %head : tensor<2x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<2x3x7xf32>
}

// -----

// layer_norm with bias, gelu: layer_norm_grad returns dx, dweight, dbias.
// CHECK-LABEL: func.func @train_step
// CHECK: loom.activation_grad gelu_tanh
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = loom.layer_norm_grad
// CHECK: loom.adamw %arg1
// CHECK: loom.adamw %arg2
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %g = loom.constant {param = #loom.param<"ln.weight">} dense<1.0> : tensor<4xf32>
  %b = loom.constant {param = #loom.param<"ln.bias">} dense<0.0> : tensor<4xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %n = loom.layer_norm %h, %g, %b {epsilon = 1.0e-5 : f64} : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
  %a = loom.gelu %n tanh : tensor<2x3x4xf32>
  %l = loom.matmul %a, %head : tensor<2x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<2x3x7xf32>
}

// -----

// Attention with rotary and grouped-query heads; the rotary tables are
// unnamed constants, so they get no gradient and stay frozen. The backward
// reads the forward's output and logsumexp (no gradient flows into lse).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[O:[^,]*]], %[[LSE:.*]] = loom.attention
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = loom.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[LSE]], %{{.*}} {
// CHECK-SAME: causal = true
// CHECK: loom.rotary_grad
// CHECK: loom.rotary_grad
// CHECK-NOT: loom.adamw %{{.*}} : tensor<3x2xf32>
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %wq = loom.constant {param = #loom.param<"q">} dense<0.1> : tensor<4x4xf32>
  %wk = loom.constant {param = #loom.param<"k">} dense<0.2> : tensor<4x2xf32>
  %wv = loom.constant {param = #loom.param<"v">} dense<0.3> : tensor<4x2xf32>
  %cos = loom.constant dense<0.9> : tensor<3x2xf32>
  %sin = loom.constant dense<0.1> : tensor<3x2xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<1x3xi64>
  %q0 = loom.matmul %h, %wq : tensor<1x3x4xf32>, tensor<4x4xf32>
  %k0 = loom.matmul %h, %wk : tensor<1x3x4xf32>, tensor<4x2xf32>
  %v0 = loom.matmul %h, %wv : tensor<1x3x4xf32>, tensor<4x2xf32>
  %q1 = loom.reshape %q0 : tensor<1x3x4xf32> -> tensor<1x3x2x2xf32>
  %k1 = loom.reshape %k0 : tensor<1x3x2xf32> -> tensor<1x3x1x2xf32>
  %v1 = loom.reshape %v0 : tensor<1x3x2xf32> -> tensor<1x3x1x2xf32>
  %q = loom.transpose %q1 [0, 2, 1, 3] : tensor<1x3x2x2xf32>
  %k = loom.transpose %k1 [0, 2, 1, 3] : tensor<1x3x1x2xf32>
  %v = loom.transpose %v1 [0, 2, 1, 3] : tensor<1x3x1x2xf32>
  %qr = loom.rotary %q, %cos, %sin : tensor<1x2x3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
  %kr = loom.rotary %k, %cos, %sin : tensor<1x1x3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
  %o, %lse = loom.attention %qr, %kr, %v {causal = true, scale = 0.70710678 : f64} : tensor<1x2x3x2xf32>, tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>
  %ot = loom.transpose %o [0, 2, 1, 3] : tensor<1x2x3x2xf32>
  %o2 = loom.reshape %ot : tensor<1x3x2x2xf32> -> tensor<1x3x4xf32>
  %l = loom.matmul %o2, %head : tensor<1x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<1x3x7xf32>
}

// -----

// silu-gated MLP with a slice and softmax: activation_grad, slice_grad
// and softmax_grad.
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: loom.softmax_grad
// CHECK-DAG: loom.slice_grad
// CHECK-DAG: loom.activation_grad silu
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x8xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x8xf32>, tensor<2x3xi64>
  %s = loom.silu %h : tensor<2x3x8xf32>
  %p = loom.softmax %s {axis = 2 : i64} : tensor<2x3x8xf32>
  %c = loom.slice %p {starts = array<i64: 0, 0, 4>, steps = array<i64: 1, 1, 1>, sizes = array<i64: 2, 3, 4>} : tensor<2x3x8xf32>
  %l = loom.matmul %c, %head : tensor<2x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<2x3x7xf32>
}
