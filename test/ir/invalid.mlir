// RUN: loom-opt %s -split-input-file -verify-diagnostics

func.func @matmul_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+1 {{contracting dims differ (3 vs 4)}}
  %c = loom.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @matmul_bias_not_over_n(%a: tensor<2x3xbf16>, %b: tensor<3x5xbf16>, %bias: tensor<2xbf16>) {
  // expected-error@+1 {{bias 'tensor<2xbf16>' must be a vector of the result's last dim and element type}}
  %c = loom.matmul_bias %a, %b, %bias : tensor<2x3xbf16>, tensor<3x5xbf16>, tensor<2xbf16>
  return
}

// -----

func.func @broadcast_mismatch(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{do not broadcast}}
  %c = loom.add %a, %b : tensor<2x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @gqa_heads(%q: tensor<1x3x4x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error@+1 {{3 query heads are not a multiple of 2 kv heads}}
  %o, %lse = loom.attention %q, %k, %k {causal = true, scale = 1.0 : f64} : tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

// attention_grad's lse is the forward's: f32 [B, Hq, T], never bf16.
func.func @attention_grad_lse_type(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>,
                                   %lse: tensor<1x2x4xbf16>) {
  // expected-error@+1 {{'loom.attention_grad' op lse 'tensor<1x2x4xbf16>' is not the logsumexp per query row of}}
  %dq, %dk, %dv = "loom.attention_grad"(%q, %q, %q, %o, %lse, %o) {causal = true, scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xbf16>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{cannot reshape [2,3] (6 elements) to [4]}}
  %c = loom.reshape %a : tensor<2x3xf32> -> tensor<4xf32>
  return
}

// -----

func.func @rms_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error@+1 {{weight [4] does not match the last dim of [2,8]}}
  %c = loom.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<4xf32>) {
  // expected-error@+1 {{dim 0 window (start 2, size 3, step 1) leaves [0, 4)}}
  %c = loom.slice %x {sizes = array<i64: 3>, starts = array<i64: 2>, steps = array<i64: 1>} : tensor<4xf32>
  return
}

// -----

func.func @expand_bad(%x: tensor<3xf32>) {
  // expected-error@+1 {{cannot broadcast [3] to [2,4]}}
  %c = loom.expand %x : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<6xf32>) {
  // expected-error@+1 {{sizes add up to 5, not 6}}
  %a:2 = loom.split %x {axis = 0 : i64, sizes = array<i64: 2, 3>} : tensor<6xf32>
  return
}

// -----

func.func @global_sum_squares_mixed(%x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error@+1 {{'loom.global_sum_squares' op input 1 has element type 'f64', the result 'f32'}}
  %s = loom.global_sum_squares %x, %y : tensor<4xf32>, tensor<4xf64> -> tensor<f32>
  return
}

// -----

func.func @global_sum_squares_empty() {
  // expected-error@+1 {{'loom.global_sum_squares' op needs at least one input}}
  %s = "loom.global_sum_squares"() : () -> tensor<f32>
  return
}

// -----

func.func @global_sum_squares_not_scalar(%x: tensor<4xf32>) {
  // expected-error@+1 {{result #0 must be 0D tensor of}}
  %s = "loom.global_sum_squares"(%x) : (tensor<4xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @sum_squares_not_scalar(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<1xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %s = "loom.sum_squares"(%x) : (tensor<4x8xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @grad_scale_not_scalar(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<1xf32>) {
  // expected-error@+1 {{operand #6 must be 0D tensor of 32-bit float values}}
  %a:3 = "loom.adamw"(%p, %p, %p, %p, %lr, %lr, %s) {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<1xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// Tokens-major attention_grad: lse is still [B, Hq, T], not q's leading dims.
func.func @tokens_major_lse(%q: tensor<1x4x2x8xf32>, %lse: tensor<1x4x2xf32>) {
  // expected-error@+1 {{'loom.attention_grad' op lse 'tensor<1x4x2xf32>' is not the logsumexp per query row of}}
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %lse, %q {causal = true, layout = #loom<attention_layout tokens_major>, scale = 1.0 : f64} : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2xf32>
  return
}

// -----

func.func @norm_grad_addend(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %a: tensor<2x8xbf16>) {
  // expected-error@+1 {{addend 'tensor<2x8xbf16>' must have the input's type 'tensor<2x8xf32>'}}
  %dx, %dw = loom.rms_norm_grad %x, %w, %x accumulate %a : tensor<2x8xbf16> {epsilon = 1.0e-6 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @embedding_grad_addend(%dy: tensor<2x3x8xf32>, %ids: tensor<2x3xi64>, %a: tensor<4x8xf32>) {
  // expected-error@+1 {{addend 'tensor<4x8xf32>' must have the result's type 'tensor<5x8xf32>'}}
  %e = loom.embedding_grad %dy, %ids accumulate %a : tensor<4x8xf32> {num_embeddings = 5 : i64} : tensor<2x3x8xf32>, tensor<2x3xi64>
  return
}

// -----

func.func @cross_entropy_with_grad_targets(%x: tensor<4x9xf32>, %t: tensor<3xi64>, %s: tensor<f32>) {
  // expected-error@+1 {{loom.cross_entropy_with_grad: logits [4,9] and targets [3] must be [N, V] and [N]}}
  %dx, %loss = loom.cross_entropy_with_grad %x, %t, %s : tensor<4x9xf32>, tensor<3xi64>, tensor<f32>
  return
}
