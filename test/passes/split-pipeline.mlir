// RUN: loom-opt %s --loom-split-pipeline-stages="stages=2" --loom-build-train-step=return-gradients=true --loom-split-pipeline="ranks=2 microbatches=4" | FileCheck %s
// RUN: loom-opt %s --loom-split-pipeline-stages="stages=2" --loom-build-train-step --loom-split-pipeline="ranks=2 microbatches=4 split-backward=true" | FileCheck %s --check-prefix=SPLIT
// RUN: loom-opt %s --loom-split-pipeline-stages="stages=4" --loom-build-train-step --loom-split-pipeline="ranks=2 vshape=true" | FileCheck %s --check-prefix=VEE
// RUN: loom-opt %s --loom-split-pipeline-stages="stages=2" --loom-build-train-step --loom-split-pipeline="ranks=2" --loom-outline-transfers | FileCheck %s --check-prefix=OUTLINE
// RUN: not loom-opt %s --loom-split-pipeline-stages="stages=2" --loom-build-train-step --loom-split-pipeline="ranks=3" 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not loom-opt %s --loom-split-pipeline-stages="stages=2" --loom-build-train-step --loom-annotate-data-parallel="dp-replicate=2" --loom-insert-ddp-collectives="bucket-bytes=1048576" --loom-split-pipeline="ranks=2" 2>&1 | FileCheck %s --check-prefix=BUCKETS

// Two stages on two pipeline ranks. Stage 0's forward sends the residual
// stream leaving layer 0 and returns what its backward reads (saved
// activations); stage 1's forward receives it and computes the loss.
// CHECK: module attributes {loom.mesh = #loom.mesh<pp = 2, dp_replicate = 1, dp_shard = 1, cp = 1, tp = 1>}
// CHECK-LABEL: func.func @stage0.forward
// CHECK-SAME: loom.pipeline_value = #loom.pipeline_value<param, 0>
// CHECK-SAME: loom.pipeline_value = #loom.pipeline_value<tokens, 0>
// CHECK-SAME: -> (tensor<2x3x4xf32> {loom.name = "saved.0", loom.pipeline_value = #loom.pipeline_value<saved, 0>}
// CHECK-SAME: attributes {loom.pipeline = #loom.pipeline_function<forward, stage = 0, rank = 0>}
// CHECK: loom.embedding
// CHECK: loom.send activation %{{.*}} to 1 tag 0 : tensor<2x3x4xf32>
// CHECK-NOT: loom.cross_entropy
// Its backward receives the gradient of what it sent and adds this
// microbatch's parameter gradients into accumulators (arguments it
// updates); the embedding's part of the tied table is one of them.
// CHECK-LABEL: func.func @stage0.backward
// CHECK-SAME: loom.name = "grad_acc.model.embed_tokens.weight", loom.pipeline_value = #loom.pipeline_value<accumulator, 1>
// CHECK-SAME: attributes {loom.pipeline = #loom.pipeline_function<backward, stage = 0, rank = 0>}
// CHECK: %[[DY:.*]] = loom.recv gradient from 1 tag 0 : tensor<2x3x4xf32>
// CHECK: loom.embedding_grad
// CHECK: loom.add %arg{{[0-9]+}}, %{{.*}} : tensor<7x4xf32>
// CHECK-LABEL: func.func @stage1.forward
// CHECK-SAME: loom.pipeline_value = #loom.pipeline_value<targets, 0>
// CHECK-SAME: -> (tensor<f32> {loom.name = "loss", loom.pipeline_value = #loom.pipeline_value<loss, 0>}
// CHECK: %[[X:.*]] = loom.recv activation from 0 tag 0 : tensor<2x3x4xf32>
// CHECK: loom.rms_norm %[[X]]
// CHECK: loom.cross_entropy
// The loss gradient of each of the 4 microbatches is seeded with 1/4, so
// the accumulated gradients are the step's mean; the gradient of the
// received stream goes back under the same tag.
// CHECK-LABEL: func.func @stage1.backward
// CHECK: %[[SEED:.*]] = loom.constant dense<2.500000e-01> : tensor<f32>
// CHECK: loom.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]
// CHECK: loom.send gradient %{{.*}} to 0 tag 0 : tensor<2x3x4xf32>
// Each rank's optimizer updates the parameters its stages read: the tied
// table on both. They swap their accumulated parts of it and add them in
// the same order (head part first, as autodiff did), and each rank's sum
// of squares joins the others' over pp (the table counted on rank 0).
// CHECK-LABEL: func.func @rank0.optimizer
// CHECK-SAME: loom.pipeline_function<optimizer, stage = -1, rank = 0>
// CHECK: %[[HEAD:.*]] = loom.recv accumulated_gradient from 1 tag 0 : tensor<7x4xf32>
// CHECK: loom.send accumulated_gradient %[[EMB:.*]] to 1 tag 1 : tensor<7x4xf32>
// CHECK: loom.add %[[HEAD]], %[[EMB]] : tensor<7x4xf32>
// CHECK: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis pp>] : tensor<f32>
// CHECK: loom.sqrt
// CHECK: loom.adamw %arg0
// CHECK-LABEL: func.func @rank1.optimizer
// CHECK: %[[EMB1:.*]] = loom.recv accumulated_gradient from 0 tag 1 : tensor<7x4xf32>
// CHECK: loom.send accumulated_gradient %[[HEAD1:.*]] to 0 tag 0 : tensor<7x4xf32>
// CHECK: loom.add %[[HEAD1]], %[[EMB1]] : tensor<7x4xf32>
// CHECK: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis pp>] : tensor<f32>
// CHECK-NOT: @train_step

// Zero bubble: the backward's input half sends the input gradient and
// keeps what the weight half needs; the weight half accumulates.
// SPLIT-LABEL: func.func @stage1.backward_input
// SPLIT: loom.cross_entropy_grad
// SPLIT: loom.send gradient %{{.*}} to 0 tag 0
// SPLIT-NOT: loom.add %arg
// SPLIT: return
// SPLIT-LABEL: func.func @stage1.backward_weight
// SPLIT-SAME: loom.pipeline_value = #loom.pipeline_value<stash, 1>
// SPLIT-SAME: loom.pipeline_value = #loom.pipeline_value<accumulator, 0>
// SPLIT-NOT: loom.send
// SPLIT-NOT: loom.recv
// SPLIT: return

// ZBV: four stages (one block each) in a V on two ranks: rank 0 holds
// stages 0 and 3, so the tied table never leaves it; stages 1 and 2 hand
// over on rank 1 without a transfer, and the tags still pair the
// functions.
// VEE-LABEL: func.func @stage0.forward
// VEE-SAME: rank = 0
// VEE-LABEL: func.func @stage1.forward
// VEE-SAME: rank = 1
// VEE-LABEL: func.func @stage2.forward
// VEE-SAME: rank = 1
// VEE-LABEL: func.func @stage3.forward
// VEE-SAME: rank = 0
// VEE-LABEL: func.func @rank0.optimizer
// VEE-NOT: loom.recv
// VEE: loom.adamw

// After outlining, received tensors are arguments and sent ones results.
// OUTLINE-LABEL: func.func @stage1.forward
// OUTLINE-SAME: %arg{{[0-9]+}}: tensor<2x3x4xf32> {loom.name = "recv.activation.0", loom.peer = 0 : i64, loom.pipeline_value = #loom.pipeline_value<recv, 0>, loom.transfer = #loom<transfer_kind activation>}
// OUTLINE-NOT: loom.recv
// OUTLINE-LABEL: func.func @stage1.backward
// OUTLINE-SAME: {loom.name = "send.gradient.0", loom.peer = 0 : i64, loom.pipeline_value = #loom.pipeline_value<send, 0>, loom.transfer = #loom<transfer_kind gradient>}
// OUTLINE-NOT: loom.send

// RANKS: error: 2 stages do not fit 3 pipeline ranks
// BUCKETS: error: gradients reduced in DDP buckets cannot be split into pipeline stages (build the step with one all_reduce per gradient)

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
