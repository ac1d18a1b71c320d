// RUN: loom-opt %s --split-input-file | loom-opt --split-input-file | FileCheck %s
// The ops of context, sequence and loss parallelism print and parse back.

// CHECK-LABEL: func.func @shard_and_permute
// CHECK: loom.shard_slice %arg0 over [#loom<mesh_axis cp>] dim 2 : tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
// CHECK: loom.collective_permute %arg1 over [#loom<mesh_axis cp>] shift 1 : tensor<2x2x4x4xf32>
// CHECK: loom.shard_slice %{{.*}} over [#loom<mesh_axis tp>] dim 0 : tensor<2xi64> -> tensor<1xi64>
module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 2, tp = 2>} {
  func.func @shard_and_permute(%table: tensor<1x1x8x4xf32>, %k: tensor<2x2x4x4xf32>)
      -> (tensor<1x1x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1xi64>) {
    %mine = loom.shard_slice %table over [#loom<mesh_axis cp>] dim 2 : tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
    %prev = loom.collective_permute %k over [#loom<mesh_axis cp>] shift 1 : tensor<2x2x4x4xf32>
    %offsets = loom.constant dense<[0, 8]> : tensor<2xi64>
    %first = loom.shard_slice %offsets over [#loom<mesh_axis tp>] dim 0 : tensor<2xi64> -> tensor<1xi64>
    return %mine, %prev, %first : tensor<1x1x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1xi64>
  }
}

// -----

// CHECK-LABEL: func.func @vocabulary
// CHECK: loom.vocab_shard_embedding %arg0, %arg1, %arg2 {vocab = 16 : i64} : tensor<8x4xf32>, tensor<2x3xi64>, tensor<1xi64>
// CHECK: loom.vocab_shard_embedding_grad %{{.*}}, %arg1, %arg2 {num_rows = 8 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<1xi64>
// CHECK: %sumexp, %target = loom.vocab_shard_cross_entropy %arg3, %arg4, %arg2, %arg5 {vocab = 16 : i64} : tensor<6x8xf32>, tensor<6xi64>, tensor<1xi64>, tensor<6xf32>
// CHECK: loom.vocab_shard_cross_entropy_grad %arg3, %arg4, %arg2, %arg5, %sumexp, %target : tensor<6x8xf32>, tensor<6xi64>, tensor<1xi64>, tensor<6xf32>
func.func @vocabulary(%table: tensor<8x4xf32>, %ids: tensor<2x3xi64>, %first: tensor<1xi64>,
                      %logits: tensor<6x8xf32>, %targets: tensor<6xi64>, %shift: tensor<6xf32>)
    -> (tensor<8x4xf32>, tensor<6x8xf32>) {
  %rows = loom.vocab_shard_embedding %table, %ids, %first {vocab = 16 : i64} : tensor<8x4xf32>, tensor<2x3xi64>, tensor<1xi64>
  %dtable = loom.vocab_shard_embedding_grad %rows, %ids, %first {num_rows = 8 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<1xi64>
  %s, %t = loom.vocab_shard_cross_entropy %logits, %targets, %first, %shift {vocab = 16 : i64} : tensor<6x8xf32>, tensor<6xi64>, tensor<1xi64>, tensor<6xf32>
  %d = loom.vocab_shard_cross_entropy_grad %logits, %targets, %first, %shift, %s, %t : tensor<6x8xf32>, tensor<6xi64>, tensor<1xi64>, tensor<6xf32>
  return %dtable, %d : tensor<8x4xf32>, tensor<6x8xf32>
}

// -----

// CHECK-LABEL: func.func @context
// CHECK: %output, %lse = loom.context_attention %arg0, %arg1, %arg2 over [#loom<mesh_axis cp>] ring {causal = true, scale = 5.000000e-01 : f64} : tensor<1x4x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>
// CHECK: loom.context_attention_grad %arg0, %arg1, %arg2, %output, %lse, %arg3 over [#loom<mesh_axis cp>] ring {causal = true, scale = 5.000000e-01 : f64} : tensor<1x4x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>
module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 4, tp = 1>} {
  func.func @context(%q: tensor<1x4x8x2xf32>, %k: tensor<1x2x8x2xf32>, %v: tensor<1x2x8x2xf32>,
                     %dy: tensor<1x4x8x2xf32>) -> tensor<1x2x8x2xf32> {
    %o, %lse = loom.context_attention %q, %k, %v over [#loom<mesh_axis cp>] ring {causal = true, scale = 0.5 : f64} : tensor<1x4x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>
    %dq, %dk, %dv = loom.context_attention_grad %q, %k, %v, %o, %lse, %dy over [#loom<mesh_axis cp>] ring {causal = true, scale = 0.5 : f64} : tensor<1x4x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>
    return %dk : tensor<1x2x8x2xf32>
  }
}
