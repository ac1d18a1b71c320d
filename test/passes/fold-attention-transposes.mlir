// RUN: loom-opt --loom-fold-attention-transposes --canonicalize --cse %s | FileCheck %s

// A Llama attention block in a training step: q, k, v split their heads
// with a transpose ([B, T, H, D] -> [B, H, T, D]), q and k take rotary
// embeddings, o merges the heads back; the backward mirrors it. Every
// transpose cancels: attention and attention_grad read and write
// tokens-major [B, T, H, D], rotary and rotary_grad run on it with their
// [1, 1, T, D] table reshaped to [1, T, 1, D], and lse stays [B, H, T].
// CHECK-LABEL: func.func @llama_block
// CHECK-NOT: loom.transpose
// CHECK: %[[TAB:.*]] = loom.reshape %arg3 : tensor<1x1x4x8xf32> -> tensor<1x4x1x8xf32>
// CHECK: %[[Q:.*]] = loom.rotary %arg0, %[[TAB]], %[[TAB]] : tensor<2x4x4x8xf32>, tensor<1x4x1x8xf32>
// CHECK: %[[K:.*]] = loom.rotary %arg1, %[[TAB]], %[[TAB]] : tensor<2x4x2x8xf32>
// CHECK: %[[O:.*]], %[[LSE:.*]] = loom.attention %[[Q]], %[[K]], %arg2 {causal = true, layout = #loom<attention_layout tokens_major>, scale = 5.000000e-01 : f64} : tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = loom.attention_grad %[[Q]], %[[K]], %arg2, %[[O]], %[[LSE]], %arg4 {causal = true, layout = #loom<attention_layout tokens_major>, scale = 5.000000e-01 : f64} : tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x4xf32>
// CHECK: %[[GQ:.*]] = loom.rotary_grad %[[DQ]], %[[TAB]], %[[TAB]] : tensor<2x4x4x8xf32>
// CHECK: %[[GK:.*]] = loom.rotary_grad %[[DK]], %[[TAB]], %[[TAB]] : tensor<2x4x2x8xf32>
// CHECK-NOT: loom.transpose
// CHECK: return %[[O]], %[[GQ]], %[[GK]], %[[DV]]
func.func @llama_block(%q: tensor<2x4x4x8xf32>, %k: tensor<2x4x2x8xf32>, %v: tensor<2x4x2x8xf32>,
                       %table: tensor<1x1x4x8xf32>, %dy: tensor<2x4x4x8xf32>)
    -> (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) {
  %qh = loom.transpose %q [0, 2, 1, 3] : tensor<2x4x4x8xf32>
  %kh = loom.transpose %k [0, 2, 1, 3] : tensor<2x4x2x8xf32>
  %vh = loom.transpose %v [0, 2, 1, 3] : tensor<2x4x2x8xf32>
  %qr = loom.rotary %qh, %table, %table : tensor<2x4x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  %kr = loom.rotary %kh, %table, %table : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  %o, %lse = loom.attention %qr, %kr, %vh {causal = true, scale = 0.5 : f64} : tensor<2x4x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %om = loom.transpose %o [0, 2, 1, 3] : tensor<2x4x4x8xf32>
  %dyh = loom.transpose %dy [0, 2, 1, 3] : tensor<2x4x4x8xf32>
  %dq, %dk, %dv = loom.attention_grad %qr, %kr, %vh, %o, %lse, %dyh {causal = true, scale = 0.5 : f64} : tensor<2x4x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x4x4xf32>
  %gq = loom.rotary_grad %dq, %table, %table : tensor<2x4x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  %gk = loom.rotary_grad %dk, %table, %table : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  %gqm = loom.transpose %gq [0, 2, 1, 3] : tensor<2x4x4x8xf32>
  %gkm = loom.transpose %gk [0, 2, 1, 3] : tensor<2x2x4x8xf32>
  %dvm = loom.transpose %dv [0, 2, 1, 3] : tensor<2x2x4x8xf32>
  return %om, %gqm, %gkm, %dvm : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>
}

// Autocast's rounding between the split and the attention (bf16 storage of
// an f32 computation) commutes with the transposes: the casts are rebuilt
// on the tokens-major values and the output's rounding moves with it.
// CHECK-LABEL: func.func @rounded_operands
// CHECK-NOT: loom.transpose
// CHECK: %[[R:.*]] = loom.cast %arg0 : tensor<2x4x2x8xbf16> -> tensor<2x4x2x8xf32>
// CHECK: %[[O:.*]], %{{.*}} = loom.attention %[[R]], %[[R]], %[[R]] {causal = true, layout = #loom<attention_layout tokens_major>
// CHECK: %[[OB:.*]] = loom.cast %[[O]] : tensor<2x4x2x8xf32> -> tensor<2x4x2x8xbf16>
// CHECK: return %[[OB]]
func.func @rounded_operands(%x: tensor<2x4x2x8xbf16>) -> tensor<2x4x2x8xbf16> {
  %xh = loom.transpose %x [0, 2, 1, 3] : tensor<2x4x2x8xbf16>
  %xw = loom.cast %xh : tensor<2x2x4x8xbf16> -> tensor<2x2x4x8xf32>
  %o, %lse = loom.attention %xw, %xw, %xw {causal = true, scale = 0.5 : f64} : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %ob = loom.cast %o : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
  %om = loom.transpose %ob [0, 2, 1, 3] : tensor<2x2x4x8xbf16>
  return %om : tensor<2x4x2x8xbf16>
}

// Left alone: k does not come from a transpose (nothing would cancel).
// CHECK-LABEL: func.func @key_not_split
// CHECK: loom.transpose
// CHECK: loom.attention %{{.*}}, %arg1, %{{.*}} {causal = true, scale
// CHECK-NOT: tokens_major
func.func @key_not_split(%q: tensor<2x4x2x8xf32>, %k: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %qh = loom.transpose %q [0, 2, 1, 3] : tensor<2x4x2x8xf32>
  %o, %lse = loom.attention %qh, %k, %qh {causal = true, scale = 0.5 : f64} : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// Left alone: the rotated q is also read by something else, which would
// need the heads-major rotary computed as well.
// CHECK-LABEL: func.func @shared_rotary
// CHECK-NOT: tokens_major
// CHECK: return
func.func @shared_rotary(%q: tensor<2x4x2x8xf32>, %table: tensor<1x1x4x8xf32>)
    -> (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) {
  %qh = loom.transpose %q [0, 2, 1, 3] : tensor<2x4x2x8xf32>
  %qr = loom.rotary %qh, %table, %table : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  %o, %lse = loom.attention %qr, %qh, %qh {causal = true, scale = 0.5 : f64} : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  return %o, %qr : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
}
