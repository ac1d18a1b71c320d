// RUN: loom-opt %s --split-input-file --loom-split-pipeline-stages="stages=2" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-split-pipeline-stages="stages=4" | FileCheck %s --check-prefix=SUB
// RUN: loom-opt %s --split-input-file --loom-split-pipeline-stages="stages=2 cuts=1" | FileCheck %s --check-prefix=CUT
// RUN: not loom-opt %s --split-input-file --loom-split-pipeline-stages="stages=5" 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not loom-opt %s --split-input-file --loom-split-pipeline-stages="stages=2 cuts=0" 2>&1 | FileCheck %s --check-prefix=BADCUT
// RUN: not loom-opt %s --split-input-file --loom-split-pipeline-stages="stages=4 cuts=1,2,3" 2>&1 | FileCheck %s --check-prefix=INSIDE

// Two layers of an attention-like and an MLP-like block each, the head
// tied to the embedding. Two stages: one layer each; the residual stream
// leaving layer 0 is the one value that crosses, marked with a boundary
// whose result layer 1 reads. The tied table is a constant both stages
// read (no boundary): every stage that uses a parameter holds it.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: loom.pipeline_first_units = array<i64: 0, 2>, loom.pipeline_stages = 2
// CHECK: %[[EMB:.*]] = loom.embedding %[[TABLE:[0-9]+]], %arg0
// CHECK: loom.rms_norm %[[EMB]], %[[A0:[0-9]+]]
// CHECK: loom.rms_norm
// CHECK: %[[G0:.*]] = loom.add
// CHECK-NEXT: %[[B:.*]] = loom.stage_boundary %[[G0]] from 0 to 1 tag 0 : tensor<2x3x4xf32>
// CHECK-NEXT: loom.rms_norm %[[B]]
// CHECK: loom.add %[[B]]
// CHECK-NOT: loom.stage_boundary
// CHECK: loom.matmul %{{.*}}, %[[TABLE]] {transpose_rhs = true}

// Four stages from two layers: each stage is one block, the residual
// stream crossing before every norm of a layer.
// SUB-LABEL: func.func @forward
// SUB-SAME: loom.pipeline_first_units = array<i64: 0, 1, 2, 3>, loom.pipeline_stages = 4
// SUB: loom.stage_boundary %{{.*}} from 0 to 1 tag 0
// SUB-NEXT: loom.rms_norm
// SUB: loom.stage_boundary %{{.*}} from 1 to 2 tag 1
// SUB-NEXT: loom.rms_norm
// SUB: loom.stage_boundary %{{.*}} from 2 to 3 tag 2
// SUB-NEXT: loom.rms_norm

// CUT: loom.pipeline_first_units = array<i64: 0, 2>

// TOOMANY: error: 2 layers (4 sub-blocks) cannot fill 5 pipeline stages
// BADCUT: error: cut at layer 0 does not begin a new, non-empty stage (layers 0..1, cuts strictly increasing)
// INSIDE: error: 4 stages split 2 layers inside layers: cuts name whole layers (give at most 2 stages)
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"model.embed_tokens.weight">} dense<0.5> : tensor<7x4xf32>
  %a0 = loom.constant {param = #loom.param<"model.layers.0.input_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %o0 = loom.constant {param = #loom.param<"model.layers.0.self_attn.o_proj.weight">} dense<0.1> : tensor<4x4xf32>
  %b0 = loom.constant {param = #loom.param<"model.layers.0.post_attention_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %d0 = loom.constant {param = #loom.param<"model.layers.0.mlp.down_proj.weight">} dense<0.2> : tensor<4x4xf32>
  %a1 = loom.constant {param = #loom.param<"model.layers.1.input_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %o1 = loom.constant {param = #loom.param<"model.layers.1.self_attn.o_proj.weight">} dense<0.3> : tensor<4x4xf32>
  %b1 = loom.constant {param = #loom.param<"model.layers.1.post_attention_layernorm.weight">} dense<1.0> : tensor<4xf32>
  %d1 = loom.constant {param = #loom.param<"model.layers.1.mlp.down_proj.weight">} dense<0.4> : tensor<4x4xf32>
  %nf = loom.constant {param = #loom.param<"model.norm.weight">} dense<1.0> : tensor<4xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %x0 = loom.rms_norm %h, %a0 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %y0 = loom.matmul %x0, %o0 : tensor<2x3x4xf32>, tensor<4x4xf32>
  %h0 = loom.add %h, %y0 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %z0 = loom.rms_norm %h0, %b0 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %w0 = loom.matmul %z0, %d0 : tensor<2x3x4xf32>, tensor<4x4xf32>
  %g0 = loom.add %h0, %w0 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %x1 = loom.rms_norm %g0, %a1 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %y1 = loom.matmul %x1, %o1 : tensor<2x3x4xf32>, tensor<4x4xf32>
  %h1 = loom.add %g0, %y1 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %z1 = loom.rms_norm %h1, %b1 {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %w1 = loom.matmul %z1, %d1 : tensor<2x3x4xf32>, tensor<4x4xf32>
  %g1 = loom.add %h1, %w1 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %f = loom.rms_norm %g1, %nf {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %l = loom.matmul %f, %e {transpose_rhs = true} : tensor<2x3x4xf32>, tensor<7x4xf32>
  return %l : tensor<2x3x7xf32>
}

