// RUN: loom-opt %s --loom-shard-context-parallel=cp=2 | FileCheck %s
// RUN: loom-opt %s --loom-shard-context-parallel="cp=2 rotate=ring" --loom-build-train-step | FileCheck %s --check-prefix=STEP

// Context parallelism on a GPT-2-like forward (a position table, a fused
// q|k|v, rows flattened to [B T, D] around the projection): the 8 tokens
// are 4 chunks of 2 and rank c keeps chunks c and 3 - c, so every value
// holds 4 rows of the sequence. The position embedding (whole sequence,
// computed on every rank) is put in chunk order 0, 3, 1, 2 and sliced per
// rank; attention reads every rank's keys (context_attention); each
// parameter enters through copy_to_parallel over cp.
// CHECK: module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 2, tp = 1>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%arg0: tensor<1x4xi64> {loom.sharding = #loom.sharding<[<cp, shard(1)>]>})
// CHECK-SAME: -> (tensor<1x4x16xf32> {loom.sharding = #loom.sharding<[<cp, shard(1)>]>})
// CHECK: %[[EMB:.*]] = loom.constant {param = #loom.param<"embed">}
// CHECK: %[[EMBIN:.*]] = loom.copy_to_parallel %[[EMB]] over [#loom<mesh_axis cp>] : tensor<16x4xf32>
// CHECK: %[[X:.*]] = loom.embedding %[[EMBIN]], %arg0 : tensor<16x4xf32>, tensor<1x4xi64>
// CHECK: %[[P:.*]] = loom.embedding %{{.*}}, %{{.*}} : tensor<32x4xf32>, tensor<1x8xi64>
// CHECK: %[[CH:.*]]:4 = loom.split %[[P]] {axis = 1 : i64, sizes = array<i64: 2, 2, 2, 2>}
// CHECK: %[[ORDERED:.*]] = loom.concat %[[CH]]#0, %[[CH]]#3, %[[CH]]#1, %[[CH]]#2 {axis = 1 : i64}
// CHECK: %[[MINE:.*]] = loom.shard_slice %[[ORDERED]] over [#loom<mesh_axis cp>] dim 1 : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
// CHECK: loom.add %[[X]], %[[MINE]] : tensor<1x4x4xf32>, tensor<1x4x4xf32>
// CHECK: loom.reshape %{{.*}} : tensor<1x4x4xf32> -> tensor<4x4xf32>
// CHECK: loom.matmul %{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x12xf32>
// CHECK: loom.context_attention %{{.*}}, %{{.*}}, %{{.*}} over [#loom<mesh_axis cp>] allgather {causal = true, scale = 5.000000e-01 : f64} : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
// CHECK: loom.matmul %{{.*}}, %[[EMBIN]] {transpose_rhs = true} : tensor<1x4x4xf32>, tensor<16x4xf32>

// The step: the loss is the mean over cp of the ranks' means, and each
// parameter's gradient (copy_to_parallel's rule) sums the ranks' tokens.
// STEP-LABEL: func.func @train_step
// STEP: loom.context_attention {{.*}} ring
// STEP: loom.cross_entropy
// STEP-NEXT: loom.all_reduce mean %{{.*}} over [#loom<mesh_axis cp>] : tensor<f32>
// STEP: loom.context_attention_grad {{.*}} ring
// STEP: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis cp>] : tensor<4x12xf32>
// STEP: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis cp>] : tensor<16x4xf32>
func.func @forward(%tok: tensor<1x8xi64>) -> tensor<1x8x16xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<16x4xf32>
  %x = loom.embedding %emb, %tok : tensor<16x4xf32>, tensor<1x8xi64>
  %pos = loom.constant dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
  %wpe = loom.constant {param = #loom.param<"wpe">} dense<0.25> : tensor<32x4xf32>
  %p = loom.embedding %wpe, %pos : tensor<32x4xf32>, tensor<1x8xi64>
  %h = loom.add %x, %p : tensor<1x8x4xf32>, tensor<1x8x4xf32>
  %flat = loom.reshape %h : tensor<1x8x4xf32> -> tensor<8x4xf32>
  %w = loom.constant {param = #loom.param<"qkv">} dense<0.5> : tensor<4x12xf32>
  %qkv = loom.matmul %flat, %w : tensor<8x4xf32>, tensor<4x12xf32>
  %qkv3 = loom.reshape %qkv : tensor<8x12xf32> -> tensor<1x8x12xf32>
  %parts:3 = loom.split %qkv3 {axis = 2 : i64, sizes = array<i64: 4, 4, 4>} : tensor<1x8x12xf32>
  %q = loom.reshape %parts#0 : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
  %k = loom.reshape %parts#1 : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
  %v = loom.reshape %parts#2 : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
  %qt = loom.transpose %q [0, 2, 1, 3] : tensor<1x8x2x2xf32>
  %kt = loom.transpose %k [0, 2, 1, 3] : tensor<1x8x2x2xf32>
  %vt = loom.transpose %v [0, 2, 1, 3] : tensor<1x8x2x2xf32>
  %a, %lse = loom.attention %qt, %kt, %vt {causal = true, scale = 0.5 : f64} : tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>
  %at = loom.transpose %a [0, 2, 1, 3] : tensor<1x2x8x2xf32>
  %a3 = loom.reshape %at : tensor<1x8x2x2xf32> -> tensor<1x8x4xf32>
  %r = loom.add %h, %a3 : tensor<1x8x4xf32>, tensor<1x8x4xf32>
  %l = loom.matmul %r, %emb {transpose_rhs = true} : tensor<1x8x4xf32>, tensor<16x4xf32>
  return %l : tensor<1x8x16xf32>
}
