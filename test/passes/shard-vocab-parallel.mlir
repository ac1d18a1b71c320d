// RUN: loom-opt %s --split-input-file --loom-shard-vocab-parallel=tp=2 | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-shard-vocab-parallel=tp=2 --loom-build-train-step | FileCheck %s --check-prefix=LOSS

// Loss parallelism: the head (4 features -> 8 words) is column parallel
// over the vocabulary, the embedding table split along its rows; each rank
// looks up the ids of its range (offsets from a table, per rank) and an
// all_reduce adds the ranks' rows. The logits stay sharded (shard(2)).
// CHECK: module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 1, tp = 2>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<1x4x4xf32> {loom.sharding = #loom.sharding<[<tp, shard(2)>]>})
// CHECK: %[[OFFSETS:.*]] = loom.constant dense<[0, 4]> : tensor<2xi64>
// CHECK: %[[FIRST:.*]] = loom.shard_slice %[[OFFSETS]] over [#loom<mesh_axis tp>] dim 0 : tensor<2xi64> -> tensor<1xi64>
// CHECK: %[[TABLE:.*]] = loom.constant {loom.sharding = #loom.sharding<[<tp, shard(0)>]>, param = #loom.param<"embed">} {{.*}} : tensor<4x4xf32>
// CHECK: %[[ROWS:.*]] = loom.vocab_shard_embedding %[[TABLE]], %arg0, %[[FIRST]]
// CHECK: %[[X:.*]] = loom.all_reduce sum %[[ROWS]] over [#loom<mesh_axis tp>] : tensor<1x4x4xf32>
// CHECK: %[[HEAD:.*]] = loom.constant {loom.sharding = #loom.sharding<[<tp, shard(1)>]>, param = #loom.param<"head">} {{.*}} : tensor<4x4xf32>
// CHECK: %[[IN:.*]] = loom.copy_to_parallel %[[X]] over [#loom<mesh_axis tp>]
// CHECK: loom.matmul %[[IN]], %[[HEAD]] : tensor<1x4x4xf32>, tensor<4x4xf32>

// The loss never forms [N, V] = [4, 8]: the row maxima are gathered (2 per
// row), the shards' sums of exponentials and target logits all_reduced.
// LOSS-LABEL: func.func @train_step
// LOSS-NOT: x8xf32
// LOSS: loom.reduce max %{{.*}} {axes = array<i64: 1>} : tensor<4x4xf32>
// LOSS: loom.all_gather %{{.*}} over [#loom<mesh_axis tp>] dim 1 : tensor<4x1xf32> -> tensor<4x2xf32>
// LOSS: %[[S:.*]], %[[T:.*]] = loom.vocab_shard_cross_entropy
// LOSS: loom.all_reduce sum %[[S]] over [#loom<mesh_axis tp>] : tensor<4xf32>
// LOSS: loom.all_reduce sum %[[T]] over [#loom<mesh_axis tp>] : tensor<4xf32>
// LOSS: loom.vocab_shard_cross_entropy_grad
// LOSS: loom.vocab_shard_embedding_grad {{.*}} {num_rows = 4 : i64}
// LOSS-NOT: x8xf32
// LOSS: return
func.func @forward(%tok: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x4xf32>
  %x = loom.embedding %emb, %tok : tensor<8x4xf32>, tensor<1x4xi64>
  %head = loom.constant {param = #loom.param<"head">} dense<0.25> : tensor<4x8xf32>
  %l = loom.matmul %x, %head : tensor<1x4x4xf32>, tensor<4x8xf32>
  return %l : tensor<1x4x8xf32>
}

// -----

// A tied table (GPT-2's wte, the head reading it transposed) is split once,
// along its rows, for both uses.
// CHECK-LABEL: func.func @forward
// CHECK: %[[WTE:.*]] = loom.constant {loom.sharding = #loom.sharding<[<tp, shard(0)>]>, param = #loom.param<"wte">} {{.*}} : tensor<4x4xf32>
// CHECK: loom.vocab_shard_embedding %[[WTE]]
// CHECK: loom.matmul %{{.*}}, %[[WTE]] {transpose_rhs = true} : tensor<1x4x4xf32>, tensor<4x4xf32>
func.func @forward(%tok: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %wte = loom.constant {param = #loom.param<"wte">} dense<0.5> : tensor<8x4xf32>
  %x = loom.embedding %wte, %tok : tensor<8x4xf32>, tensor<1x4xi64>
  %l = loom.matmul %x, %wte {transpose_rhs = true} : tensor<1x4x4xf32>, tensor<8x4xf32>
  return %l : tensor<1x4x8xf32>
}

