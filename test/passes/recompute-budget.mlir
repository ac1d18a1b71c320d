// RUN: loom-opt %s --loom-build-train-step --canonicalize --cse --loom-recompute="policy=budget backend=cpu memory-budget=1" 2>&1 | FileCheck %s --check-prefix=ROOMY
// RUN: loom-opt %s --loom-build-train-step --canonicalize --cse --loom-recompute="policy=budget backend=cpu memory-budget=4.6e-4" 2>&1 | FileCheck %s --check-prefix=MID
// RUN: not loom-opt %s --loom-build-train-step --canonicalize --cse --loom-recompute="policy=budget backend=cpu memory-budget=1e-6" 2>&1 | FileCheck %s --check-prefix=SMALL

// The memory-budget policy on the two-layer model of recompute.mlir at
// B=2, T=32, hidden 32 (fp32, CPU backend: the budget counts codegen's
// arena and constants). Its step takes 0.000508 GiB without recompute and
// 0.0004416 GiB with every layer recomputed from its input.

// A budget that holds the step changes nothing.
// ROOMY: remark: loom-recompute: a memory budget of 1 GiB holds the step without recompute (0.000508 GiB)
// ROOMY-NOT: loom.recomputed

// Between the two, the budget drops the values that cost the least
// recompute time per byte, measured on the buffer plan until it fits:
// the norms' outputs and the MLP's gate, up and swiglu product of layer 1
// (re-run from the kept second norm input), layer 0's MLP from the
// mid-layer residual, and no attention.
// MID: remark: loom-recompute: a memory budget of 0.00046 GiB holds the step at 0.0004545 GiB after {{[0-9]+}} of {{[0-9]+}} recompute moves (0.000508 GiB without recompute, 0.0004416 GiB with every layer recomputed)
// MID-LABEL: func.func @train_step
// MID: %[[N2:.*]] = loom.rms_norm %{{.*}}, %arg15 {{.*}}loom.saved
// MID: loom.cross_entropy_grad
// MID: %[[G:.*]] = loom.matmul %[[N2]], %arg16 {loom.recomputed}
// MID-NEXT: %[[U:.*]] = loom.matmul %[[N2]], %arg17 {loom.recomputed}
// MID-NEXT: loom.swiglu %[[G]], %[[U]] {loom.recomputed}
// MID: loom.rms_norm %{{.*}}, %arg10 {{.*}}loom.recomputed
// MID: loom.rms_norm %{{.*}}, %arg6 {{.*}}loom.recomputed
// MID-NOT: loom.attention {{.*}}loom.recomputed

// Below the smallest footprint: one line giving the minimum.
// SMALL: error: loom-recompute: a memory budget of 1e-06 GiB is below the smallest footprint of this step, 0.0004416 GiB (every layer recomputed from its input; 0.000508 GiB without recompute)

func.func @forward(%tok: tensor<2x32xi64>) -> tensor<2x32x16xf32> {
  %emb = loom.constant {param = #loom.param<"model.embed_tokens.weight">} dense<0.5> : tensor<16x32xf32>
  %n0 = loom.constant {param = #loom.param<"model.layers.0.input_layernorm.weight">} dense<1.0> : tensor<32xf32>
  %q0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.q_proj.weight">} dense<0.1> : tensor<32x32xf32>
  %k0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.k_proj.weight">} dense<0.2> : tensor<32x32xf32>
  %v0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.v_proj.weight">} dense<0.3> : tensor<32x32xf32>
  %o0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.o_proj.weight">} dense<0.4> : tensor<32x32xf32>
  %m0 = loom.constant {param = #loom.param<"model.layers.0.post_attention_layernorm.weight">} dense<1.0> : tensor<32xf32>
  %g0 = loom.constant {param = #loom.param<"model.layers.0.mlp.gate_proj.weight">} dense<0.1> : tensor<32x64xf32>
  %u0 = loom.constant {param = #loom.param<"model.layers.0.mlp.up_proj.weight">} dense<0.2> : tensor<32x64xf32>
  %d0 = loom.constant {param = #loom.param<"model.layers.0.mlp.down_proj.weight">} dense<0.3> : tensor<64x32xf32>
  %n1 = loom.constant {param = #loom.param<"model.layers.1.input_layernorm.weight">} dense<1.0> : tensor<32xf32>
  %q1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.q_proj.weight">} dense<0.1> : tensor<32x32xf32>
  %k1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.k_proj.weight">} dense<0.2> : tensor<32x32xf32>
  %v1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.v_proj.weight">} dense<0.3> : tensor<32x32xf32>
  %o1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.o_proj.weight">} dense<0.4> : tensor<32x32xf32>
  %m1 = loom.constant {param = #loom.param<"model.layers.1.post_attention_layernorm.weight">} dense<1.0> : tensor<32xf32>
  %g1 = loom.constant {param = #loom.param<"model.layers.1.mlp.gate_proj.weight">} dense<0.1> : tensor<32x64xf32>
  %u1 = loom.constant {param = #loom.param<"model.layers.1.mlp.up_proj.weight">} dense<0.2> : tensor<32x64xf32>
  %d1 = loom.constant {param = #loom.param<"model.layers.1.mlp.down_proj.weight">} dense<0.3> : tensor<64x32xf32>
  %nf = loom.constant {param = #loom.param<"model.norm.weight">} dense<1.0> : tensor<32xf32>
  %head = loom.constant {param = #loom.param<"lm_head.weight">} dense<0.25> : tensor<32x16xf32>
  %h0 = loom.embedding %emb, %tok : tensor<16x32xf32>, tensor<2x32xi64>
  // layer 0
  %a0 = loom.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64} : tensor<2x32x32xf32>, tensor<32xf32>
  %qa0 = loom.matmul %a0, %q0 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %ka0 = loom.matmul %a0, %k0 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %va0 = loom.matmul %a0, %v0 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %qh0 = loom.reshape %qa0 : tensor<2x32x32xf32> -> tensor<2x2x32x16xf32>
  %kh0 = loom.reshape %ka0 : tensor<2x32x32xf32> -> tensor<2x2x32x16xf32>
  %vh0 = loom.reshape %va0 : tensor<2x32x32xf32> -> tensor<2x2x32x16xf32>
  %at0, %lse0 = loom.attention %qh0, %kh0, %vh0 {causal = true, scale = 0.5 : f64} : tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>
  %ar0 = loom.reshape %at0 : tensor<2x2x32x16xf32> -> tensor<2x32x32xf32>
  %op0 = loom.matmul %ar0, %o0 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %r0 = loom.add %h0, %op0 : tensor<2x32x32xf32>, tensor<2x32x32xf32>
  %b0 = loom.rms_norm %r0, %m0 {epsilon = 1.0e-6 : f64} : tensor<2x32x32xf32>, tensor<32xf32>
  %gt0 = loom.matmul %b0, %g0 : tensor<2x32x32xf32>, tensor<32x64xf32>
  %up0 = loom.matmul %b0, %u0 : tensor<2x32x32xf32>, tensor<32x64xf32>
  %sw0 = loom.swiglu %gt0, %up0 : tensor<2x32x64xf32>
  %dn0 = loom.matmul %sw0, %d0 : tensor<2x32x64xf32>, tensor<64x32xf32>
  %h1 = loom.add %r0, %dn0 : tensor<2x32x32xf32>, tensor<2x32x32xf32>
  // layer 1
  %a1 = loom.rms_norm %h1, %n1 {epsilon = 1.0e-6 : f64} : tensor<2x32x32xf32>, tensor<32xf32>
  %qa1 = loom.matmul %a1, %q1 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %ka1 = loom.matmul %a1, %k1 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %va1 = loom.matmul %a1, %v1 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %qh1 = loom.reshape %qa1 : tensor<2x32x32xf32> -> tensor<2x2x32x16xf32>
  %kh1 = loom.reshape %ka1 : tensor<2x32x32xf32> -> tensor<2x2x32x16xf32>
  %vh1 = loom.reshape %va1 : tensor<2x32x32xf32> -> tensor<2x2x32x16xf32>
  %at1, %lse1 = loom.attention %qh1, %kh1, %vh1 {causal = true, scale = 0.5 : f64} : tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>
  %ar1 = loom.reshape %at1 : tensor<2x2x32x16xf32> -> tensor<2x32x32xf32>
  %op1 = loom.matmul %ar1, %o1 : tensor<2x32x32xf32>, tensor<32x32xf32>
  %r1 = loom.add %h1, %op1 : tensor<2x32x32xf32>, tensor<2x32x32xf32>
  %b1 = loom.rms_norm %r1, %m1 {epsilon = 1.0e-6 : f64} : tensor<2x32x32xf32>, tensor<32xf32>
  %gt1 = loom.matmul %b1, %g1 : tensor<2x32x32xf32>, tensor<32x64xf32>
  %up1 = loom.matmul %b1, %u1 : tensor<2x32x32xf32>, tensor<32x64xf32>
  %sw1 = loom.swiglu %gt1, %up1 : tensor<2x32x64xf32>
  %dn1 = loom.matmul %sw1, %d1 : tensor<2x32x64xf32>, tensor<64x32xf32>
  %h2 = loom.add %r1, %dn1 : tensor<2x32x32xf32>, tensor<2x32x32xf32>
  // head
  %f = loom.rms_norm %h2, %nf {epsilon = 1.0e-6 : f64} : tensor<2x32x32xf32>, tensor<32xf32>
  %logits = loom.matmul %f, %head : tensor<2x32x32xf32>, tensor<32x16xf32>
  return %logits : tensor<2x32x16xf32>
}
