// RUN: loom-opt %s --loom-build-train-step --canonicalize --cse --loom-recompute=policy=full | FileCheck %s --check-prefix=FULL
// RUN: loom-opt %s --loom-build-train-step --canonicalize --cse --loom-recompute=policy=selective | FileCheck %s --check-prefix=SEL
// RUN: loom-opt %s --loom-build-train-step --canonicalize --cse --loom-recompute="policy=full every=2" | FileCheck %s --check-prefix=EVERY
// RUN: loom-opt %s --loom-build-train-step --canonicalize --cse --loom-recompute=policy=none | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --loom-autocast-bf16 --loom-build-train-step --canonicalize --cse --loom-sink-widening-casts --loom-hoist-narrowing-casts --loom-use-bf16-matmuls --canonicalize --loom-recompute=policy=full | FileCheck %s --check-prefix=AUTOCAST

// A two-layer Llama-shaped model (rms_norm, q/k/v, attention, o, rms_norm,
// gate/up, swiglu, down; layers from the parameter names). loom.saved marks
// the forward ops whose results the step keeps for the backward,
// loom.recomputed the clones the backward re-runs instead; a clone sits
// right before the first backward op that reads it.

// full: only what crosses a layer boundary is kept (the embedding output,
// each layer's output, and what the head's backward reads). Layer 1's
// backward starts with down_proj's gradients, whose weight gradient reads
// the swiglu product: its whole forward up to that product is re-run from
// the layer's input H1 right there, after the head's backward and down's
// input gradient.
// FULL-LABEL: func.func @train_step
// FULL: %[[H0:.*]] = loom.embedding {{.*}} {loom.saved}
// FULL-NOT: loom.saved
// FULL: %[[H1:.*]] = loom.add {{.*}} {loom.saved}
// FULL-NOT: loom.saved
// FULL: %[[H2:.*]] = loom.add {{.*}} {loom.saved}
// FULL-NEXT: loom.rms_norm %[[H2]], {{.*}}loom.saved
// FULL-NOT: loom.recomputed
// FULL: loom.cross_entropy_grad
// FULL-NOT: loom.recomputed
// FULL: %[[DX:.*]], %{{.*}} = loom.rms_norm_grad %[[H2]]
// FULL-NEXT: %[[DSW:.*]] = loom.matmul %[[DX]], %arg18 {transpose_rhs = true}
// FULL-NEXT: %[[N1:.*]] = loom.rms_norm %[[H1]], %arg10 {{.*}}loom.recomputed
// FULL-NEXT: %[[Q:.*]] = loom.matmul %[[N1]], %arg11 {loom.recomputed}
// FULL: %[[O:.*]], %[[LSE:.*]] = loom.attention {{.*}}loom.recomputed
// FULL: %[[R1:.*]] = loom.add %[[H1]], %{{.*}} {loom.recomputed}
// FULL-NEXT: %[[N2:.*]] = loom.rms_norm %[[R1]], %arg15 {{.*}}loom.recomputed
// FULL-NEXT: %[[G:.*]] = loom.matmul %[[N2]], %arg16 {loom.recomputed}
// FULL-NEXT: %[[U:.*]] = loom.matmul %[[N2]], %arg17 {loom.recomputed}
// FULL-NEXT: %[[SW:.*]] = loom.swiglu %[[G]], %[[U]] {loom.recomputed}
// FULL-NEXT: loom.reshape %[[SW]]
// The backward then reads the clones: swiglu_grad, rms_norm_grad and
// attention_grad of layer 1.
// FULL: loom.swiglu_grad %[[G]], %[[U]], %[[DSW]]
// FULL: loom.rms_norm_grad %[[R1]], %arg15
// FULL: loom.attention_grad {{.*}}, %[[O]], %[[LSE]],
// FULL: loom.rms_norm_grad %[[H1]], %arg10
// Layer 0 is re-run from the embedding output where its backward starts.
// FULL: loom.rms_norm %[[H0]], %arg1 {{.*}}loom.recomputed
// FULL: loom.rms_norm_grad %[[H0]], %arg1

// selective (torchtitan's op-level save list): each layer keeps the 1st,
// 3rd, 5th and 7th matmul (q, v, gate, down) and attention's output and
// logsumexp; down's output is not read back (the residual add after it is
// the layer's output, kept anyway). k, o_proj and up are re-run, each
// right before its first reader: the MLP part (o_proj, the mid-layer
// residual, the second norm, up, swiglu) before down's weight gradient,
// the first norm and k only before attention_grad.
// SEL-LABEL: func.func @train_step
// SEL: loom.embedding {{.*}} {loom.saved}
// SEL-NOT: loom.saved
// SEL: %[[Q0:.*]] = loom.matmul %{{.*}}, %arg2 {loom.saved}
// SEL-NEXT: loom.matmul %{{.*}}, %arg3 :
// SEL-NEXT: %[[V0:.*]] = loom.matmul %{{.*}}, %arg4 {loom.saved}
// SEL: %[[O0:.*]], %[[L0:.*]] = loom.attention {{.*}}loom.saved
// SEL: loom.matmul %{{.*}}, %arg5 :
// SEL: %[[G0:.*]] = loom.matmul %{{.*}}, %arg7 {loom.saved}
// SEL-NEXT: loom.matmul %{{.*}}, %arg8 :
// SEL-NEXT: loom.swiglu
// SEL-NEXT: loom.matmul %{{.*}}, %arg9 :
// SEL-NEXT: %[[H1:.*]] = loom.add {{.*}} {loom.saved}
// SEL: %[[Q1:.*]] = loom.matmul %{{.*}}, %arg11 {loom.saved}
// SEL: %[[O1:.*]], %[[L1:.*]] = loom.attention {{.*}}loom.saved
// SEL: %[[G1:.*]] = loom.matmul %{{.*}}, %arg16 {loom.saved}
// SEL: loom.cross_entropy_grad
// SEL: loom.reshape %[[O1]] {loom.recomputed}
// SEL-NEXT: loom.matmul %{{.*}}, %arg14 {loom.recomputed}
// SEL-NEXT: %[[R1:.*]] = loom.add %[[H1]], %{{.*}} {loom.recomputed}
// SEL-NEXT: %[[N2:.*]] = loom.rms_norm %[[R1]], %arg15 {{.*}}loom.recomputed
// SEL-NEXT: %[[U1:.*]] = loom.matmul %[[N2]], %arg17 {loom.recomputed}
// SEL-NEXT: loom.swiglu %[[G1]], %[[U1]] {loom.recomputed}
// SEL: loom.swiglu_grad %[[G1]], %[[U1]],
// SEL: %[[QH:.*]] = loom.reshape %[[Q1]] {loom.recomputed}
// SEL-NEXT: %[[N1:.*]] = loom.rms_norm %[[H1]], %arg10 {{.*}}loom.recomputed
// SEL-NEXT: %[[K1:.*]] = loom.matmul %[[N1]], %arg12 {loom.recomputed}
// SEL-NEXT: %[[KH:.*]] = loom.reshape %[[K1]] {loom.recomputed}
// SEL-NEXT: %[[VH:.*]] = loom.reshape %{{.*}} {loom.recomputed}
// SEL-NEXT: loom.attention_grad %[[QH]], %[[KH]], %[[VH]], %[[O1]], %[[L1]],
// SEL-NOT: loom.attention {{.*}}loom.recomputed
// SEL: loom.swiglu %[[G0]], %{{.*}} {loom.recomputed}
// SEL: loom.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O0]], %[[L0]],

// every=2: only the 2nd layer (index 1) is checkpointed; layer 0 keeps all
// it kept before.
// EVERY-LABEL: func.func @train_step
// EVERY: loom.rms_norm %{{.*}}, %arg1 {{.*}}loom.saved
// EVERY: loom.attention {{.*}}loom.saved
// EVERY: loom.swiglu {{.*}} {loom.saved}
// EVERY: %[[H1:.*]] = loom.add {{.*}} {loom.saved}
// EVERY-NOT: loom.saved
// EVERY: loom.add {{.*}} {loom.saved}
// EVERY: loom.cross_entropy_grad
// EVERY: loom.rms_norm %[[H1]], %arg10 {{.*}}loom.recomputed
// EVERY-NOT: loom.rms_norm %{{.*}}, %arg1 {{.*}}loom.recomputed

// none leaves the step alone.
// Under autocast, attention's output is rounded to bf16 for o_proj and
// widened back for attention's gradient, which alone reads the widening.
// With full recompute that gradient reads a clone, so the forward's
// widening is dead: the pass erases it (nothing after it would, and
// codegen would run it, a kernel a layer).
// AUTOCAST-LABEL: func.func @train_step
// AUTOCAST: %output, %lse = loom.attention
// AUTOCAST-NEXT: %[[O:.*]] = loom.cast %output : tensor<1x1x3x4xf32> -> tensor<1x1x3x4xbf16>
// AUTOCAST-NEXT: loom.reshape %[[O]] : tensor<1x1x3x4xbf16> -> tensor<1x3x4xbf16>
// AUTOCAST: loom.cross_entropy_grad
// AUTOCAST: loom.attention_grad

// NONE-LABEL: func.func @train_step
// NONE-NOT: loom.saved
// NONE-NOT: loom.recomputed
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x7xf32> {
  %emb = loom.constant {param = #loom.param<"model.embed_tokens.weight">} dense<0.5> : tensor<7x4xf32>
  %n0 = loom.constant {param = #loom.param<"model.layers.0.input_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %q0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.q_proj.weight">} dense<0.1> : tensor<4x4xf32>
  %k0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.k_proj.weight">} dense<0.2> : tensor<4x4xf32>
  %v0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.v_proj.weight">} dense<0.3> : tensor<4x4xf32>
  %o0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.o_proj.weight">} dense<0.4> : tensor<4x4xf32>
  %m0 = loom.constant {param = #loom.param<"model.layers.0.post_attention_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %g0 = loom.constant {param = #loom.param<"model.layers.0.mlp.gate_proj.weight">} dense<0.1> : tensor<4x8xf32>
  %u0 = loom.constant {param = #loom.param<"model.layers.0.mlp.up_proj.weight">} dense<0.2> : tensor<4x8xf32>
  %d0 = loom.constant {param = #loom.param<"model.layers.0.mlp.down_proj.weight">} dense<0.3> : tensor<8x4xf32>
  %n1 = loom.constant {param = #loom.param<"model.layers.1.input_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %q1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.q_proj.weight">} dense<0.1> : tensor<4x4xf32>
  %k1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.k_proj.weight">} dense<0.2> : tensor<4x4xf32>
  %v1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.v_proj.weight">} dense<0.3> : tensor<4x4xf32>
  %o1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.o_proj.weight">} dense<0.4> : tensor<4x4xf32>
  %m1 = loom.constant {param = #loom.param<"model.layers.1.post_attention_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %g1 = loom.constant {param = #loom.param<"model.layers.1.mlp.gate_proj.weight">} dense<0.1> : tensor<4x8xf32>
  %u1 = loom.constant {param = #loom.param<"model.layers.1.mlp.up_proj.weight">} dense<0.2> : tensor<4x8xf32>
  %d1 = loom.constant {param = #loom.param<"model.layers.1.mlp.down_proj.weight">} dense<0.3> : tensor<8x4xf32>
  %nf = loom.constant {param = #loom.param<"model.norm.weight">} dense<1.0> : tensor<4xf32>
  %head = loom.constant {param = #loom.param<"lm_head.weight">} dense<0.25> : tensor<4x7xf32>
  %h0 = loom.embedding %emb, %tok : tensor<7x4xf32>, tensor<1x3xi64>
  // layer 0
  %a0 = loom.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64} : tensor<1x3x4xf32>, tensor<4xf32>
  %qa0 = loom.matmul %a0, %q0 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %ka0 = loom.matmul %a0, %k0 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %va0 = loom.matmul %a0, %v0 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %qh0 = loom.reshape %qa0 : tensor<1x3x4xf32> -> tensor<1x1x3x4xf32>
  %kh0 = loom.reshape %ka0 : tensor<1x3x4xf32> -> tensor<1x1x3x4xf32>
  %vh0 = loom.reshape %va0 : tensor<1x3x4xf32> -> tensor<1x1x3x4xf32>
  %at0, %lse0 = loom.attention %qh0, %kh0, %vh0 {causal = true, scale = 0.5 : f64} : tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>
  %ar0 = loom.reshape %at0 : tensor<1x1x3x4xf32> -> tensor<1x3x4xf32>
  %op0 = loom.matmul %ar0, %o0 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %r0 = loom.add %h0, %op0 : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %b0 = loom.rms_norm %r0, %m0 {epsilon = 1.0e-6 : f64} : tensor<1x3x4xf32>, tensor<4xf32>
  %gt0 = loom.matmul %b0, %g0 : tensor<1x3x4xf32>, tensor<4x8xf32>
  %up0 = loom.matmul %b0, %u0 : tensor<1x3x4xf32>, tensor<4x8xf32>
  %sw0 = loom.swiglu %gt0, %up0 : tensor<1x3x8xf32>
  %dn0 = loom.matmul %sw0, %d0 : tensor<1x3x8xf32>, tensor<8x4xf32>
  %h1 = loom.add %r0, %dn0 : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  // layer 1
  %a1 = loom.rms_norm %h1, %n1 {epsilon = 1.0e-6 : f64} : tensor<1x3x4xf32>, tensor<4xf32>
  %qa1 = loom.matmul %a1, %q1 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %ka1 = loom.matmul %a1, %k1 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %va1 = loom.matmul %a1, %v1 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %qh1 = loom.reshape %qa1 : tensor<1x3x4xf32> -> tensor<1x1x3x4xf32>
  %kh1 = loom.reshape %ka1 : tensor<1x3x4xf32> -> tensor<1x1x3x4xf32>
  %vh1 = loom.reshape %va1 : tensor<1x3x4xf32> -> tensor<1x1x3x4xf32>
  %at1, %lse1 = loom.attention %qh1, %kh1, %vh1 {causal = true, scale = 0.5 : f64} : tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>
  %ar1 = loom.reshape %at1 : tensor<1x1x3x4xf32> -> tensor<1x3x4xf32>
  %op1 = loom.matmul %ar1, %o1 : tensor<1x3x4xf32>, tensor<4x4xf32>
  %r1 = loom.add %h1, %op1 : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %b1 = loom.rms_norm %r1, %m1 {epsilon = 1.0e-6 : f64} : tensor<1x3x4xf32>, tensor<4xf32>
  %gt1 = loom.matmul %b1, %g1 : tensor<1x3x4xf32>, tensor<4x8xf32>
  %up1 = loom.matmul %b1, %u1 : tensor<1x3x4xf32>, tensor<4x8xf32>
  %sw1 = loom.swiglu %gt1, %up1 : tensor<1x3x8xf32>
  %dn1 = loom.matmul %sw1, %d1 : tensor<1x3x8xf32>, tensor<8x4xf32>
  %h2 = loom.add %r1, %dn1 : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  // head
  %f = loom.rms_norm %h2, %nf {epsilon = 1.0e-6 : f64} : tensor<1x3x4xf32>, tensor<4xf32>
  %logits = loom.matmul %f, %head : tensor<1x3x4xf32>, tensor<4x7xf32>
  return %logits : tensor<1x3x7xf32>
}
