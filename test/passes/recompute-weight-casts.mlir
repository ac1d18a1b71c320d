// RUN: loom-opt %s --loom-autocast-bf16 --loom-build-train-step --canonicalize --cse --loom-sink-widening-casts --loom-hoist-narrowing-casts --loom-use-bf16-matmuls --canonicalize --loom-recompute=policy=full | FileCheck %s

// Under autocast a GEMM reads its weight rounded to bf16 (a cast of the f32
// parameter). The recompute pass never rebuilds that rounding: the
// backward's clones read the forward's cast, which the step keeps anyway
// (AdamW stores it as the next step's bf16 weight, codegen's
// foldWeightRounding). Casting the weights again in the backward cost a
// kernel over every recomputed GEMM's weight and a second bf16 copy of it:
// Llama-3.2-1B's step under selective recompute ran 355 casts, now 50.
// The layer's activations are still rebuilt: the norm, its rounding, both
// GEMMs and swiglu, from the layer's input.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[WG:.*]] = loom.cast %arg2 {loom.saved} : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[WU:.*]] = loom.cast %arg3 {loom.saved} : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: loom.cast %arg4 {loom.saved} : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK: loom.cross_entropy_grad
// CHECK: loom.rms_norm {{.*}}loom.recomputed
// CHECK-NEXT: %[[A:.*]] = loom.cast {{.*}}loom.recomputed
// CHECK-NEXT: loom.matmul %[[A]], %[[WG]] {loom.recomputed}
// CHECK-NEXT: loom.cast {{.*}}loom.recomputed
// CHECK-NEXT: loom.matmul %[[A]], %[[WU]] {loom.recomputed}
// CHECK-NOT: loom.cast %arg{{[0-9]+}} {loom.recomputed}
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x7xf32> {
  %emb = loom.constant {param = #loom.param<"model.embed_tokens.weight">} dense<0.5> : tensor<7x4xf32>
  %m0 = loom.constant {param = #loom.param<"model.layers.0.post_attention_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %g0 = loom.constant {param = #loom.param<"model.layers.0.mlp.gate_proj.weight">} dense<0.1> : tensor<4x8xf32>
  %u0 = loom.constant {param = #loom.param<"model.layers.0.mlp.up_proj.weight">} dense<0.2> : tensor<4x8xf32>
  %d0 = loom.constant {param = #loom.param<"model.layers.0.mlp.down_proj.weight">} dense<0.3> : tensor<8x4xf32>
  %nf = loom.constant {param = #loom.param<"model.norm.weight">} dense<1.0> : tensor<4xf32>
  %head = loom.constant {param = #loom.param<"lm_head.weight">} dense<0.25> : tensor<4x7xf32>
  %h0 = loom.embedding %emb, %tok : tensor<7x4xf32>, tensor<1x3xi64>
  %b0 = loom.rms_norm %h0, %m0 {epsilon = 1.0e-6 : f64} : tensor<1x3x4xf32>, tensor<4xf32>
  %gt0 = loom.matmul %b0, %g0 : tensor<1x3x4xf32>, tensor<4x8xf32>
  %up0 = loom.matmul %b0, %u0 : tensor<1x3x4xf32>, tensor<4x8xf32>
  %sw0 = loom.swiglu %gt0, %up0 : tensor<1x3x8xf32>
  %dn0 = loom.matmul %sw0, %d0 : tensor<1x3x8xf32>, tensor<8x4xf32>
  %h1 = loom.add %h0, %dn0 : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %f = loom.rms_norm %h1, %nf {epsilon = 1.0e-6 : f64} : tensor<1x3x4xf32>, tensor<4xf32>
  %logits = loom.matmul %f, %head : tensor<1x3x4xf32>, tensor<4x7xf32>
  return %logits : tensor<1x3x7xf32>
}
