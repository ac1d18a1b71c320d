// RUN: loom-opt %s --loom-build-train-step --loom-annotate-data-parallel="dp-shard=2" --loom-insert-fsdp-collectives | FileCheck %s
// RUN: loom-opt %s --loom-build-train-step --loom-annotate-data-parallel="dp-shard=2" --loom-insert-fsdp-collectives="reshard-after-forward=false prefetch=0" | FileCheck %s --check-prefix=KEEP
// RUN: loom-opt %s --loom-build-train-step=return-activation-sums=true --loom-annotate-data-parallel="dp-shard=2" --loom-insert-fsdp-collectives | FileCheck %s --check-prefix=ACT
// RUN: not loom-opt %s --loom-build-train-step --loom-insert-fsdp-collectives 2>&1 | FileCheck %s --check-prefix=NOMESH

// FSDP (dp_shard=2): norm.weight [4] and head [4x7] divide by 2 and become
// shards [2], [2x7]; embed [7x4] does not divide (7 rows) and stays whole.
// CHECK: module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 2, cp = 1, tp = 1>}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<7x4xf32> {loom.name = "embed", loom.param = #loom.param<"embed">, loom.sharding = #loom.sharding<[<dp_shard, replicate>]>}
// CHECK-SAME: %arg1: tensor<2xf32> {loom.name = "norm.weight", loom.param = #loom.param<"norm.weight">, loom.sharding = #loom.sharding<[<dp_shard, shard(0)>]>}
// CHECK-SAME: %arg2: tensor<2x7xf32>
// CHECK-SAME: %arg4: tensor<2xf32> {loom.name = "exp_avg.norm.weight", loom.sharding = #loom.sharding<[<dp_shard, shard(0)>]>}
// CHECK-SAME: %arg10: tensor<2x3xi64> {loom.name = "tokens", loom.sharding = #loom.sharding<[<dp_shard, shard(0)>]>}
// Parameters are gathered one parameter ahead of their first use (both
// before rms_norm, norm.weight's first reader); with reshard-after-forward
// (the default) the backward pass gathers again, in its own order.
// CHECK: %[[NORM:.*]] = loom.all_gather %arg1 over [#loom<mesh_axis dp_shard>] dim 0 : tensor<2xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[HEAD:.*]] = loom.all_gather %arg2 over [#loom<mesh_axis dp_shard>] dim 0 : tensor<2x7xf32> -> tensor<4x7xf32>
// CHECK-NEXT: loom.rms_norm %{{.*}}, %[[NORM]]
// CHECK-NEXT: loom.matmul %{{.*}}, %[[HEAD]] :
// CHECK: loom.cross_entropy_grad
// CHECK: %[[HEAD2:.*]] = loom.all_gather %arg2 over [#loom<mesh_axis dp_shard>] dim 0
// CHECK-NEXT: %[[NORM2:.*]] = loom.all_gather %arg1 over [#loom<mesh_axis dp_shard>] dim 0
// CHECK-NEXT: loom.matmul %{{.*}}, %[[HEAD2]] {transpose_rhs = true}
// Gradients of sharded parameters are reduce-scattered (mean); the whole
// embedding's is all-reduced (mean).
// CHECK: %[[DHEAD:.*]] = loom.reduce_scatter mean %{{.*}} over [#loom<mesh_axis dp_shard>] dim 0 : tensor<4x7xf32> -> tensor<2x7xf32>
// CHECK: %{{.*}}, %[[DNORMFULL:.*]] = loom.rms_norm_grad %{{.*}}, %[[NORM2]]
// CHECK: %[[DNORM:.*]] = loom.reduce_scatter mean %[[DNORMFULL]] over [#loom<mesh_axis dp_shard>] dim 0 : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[DEMBFULL:.*]] = loom.embedding_grad
// CHECK: %[[DEMB:.*]] = loom.all_reduce mean %[[DEMBFULL]] over [#loom<mesh_axis dp_shard>] : tensor<7x4xf32>
// Global norm: the sharded terms' local sums of squares are summed over
// the shards; the replicated embedding's term is already global.
// CHECK: loom.mul %[[DEMB]], %[[DEMB]] : tensor<7x4xf32>
// CHECK: loom.mul %[[DNORM]], %[[DNORM]] : tensor<2xf32>
// CHECK: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis dp_shard>] : tensor<f32>
// CHECK: loom.mul %[[DHEAD]], %[[DHEAD]] : tensor<2x7xf32>
// CHECK: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis dp_shard>] : tensor<f32>
// CHECK: loom.sqrt
// AdamW updates the local shards.
// CHECK: loom.adamw %arg0, %{{.*}}, %arg3, %arg6, {{.*}} : tensor<7x4xf32>, tensor<f32>
// CHECK: loom.adamw %arg1, %{{.*}}, %arg4, %arg7, {{.*}} : tensor<2xf32>, tensor<f32>
// CHECK: loom.adamw %arg2, %{{.*}}, %arg5, %arg8, {{.*}} : tensor<2x7xf32>, tensor<f32>
// The loss is the mean of the ranks' means.
// CHECK: %[[LOSS:.*]] = loom.all_reduce mean %{{.*}} over [#loom<mesh_axis dp_shard>] : tensor<f32>
// CHECK: return %[[LOSS]]
// CHECK-NOT: loom.all_reduce

// Without resharding, forward and backward share one gather per
// parameter; without prefetch, each sits right before its first reader.
// KEEP-LABEL: func.func @train_step
// KEEP: loom.embedding
// KEEP-NEXT: %[[NORM:.*]] = loom.all_gather %arg1
// KEEP-NEXT: loom.rms_norm %{{.*}}, %[[NORM]]
// KEEP-NEXT: %[[HEAD:.*]] = loom.all_gather %arg2
// KEEP-NEXT: loom.matmul %{{.*}}, %[[HEAD]] :
// KEEP: loom.matmul %{{.*}}, %[[HEAD]] {transpose_rhs = true}
// KEEP: loom.rms_norm_grad %{{.*}}, %[[NORM]]
// KEEP-NOT: loom.all_gather

// Checks: the residual stream's sum of squares on each rank covers only
// its rows, so it leaves the step as a partial sum over dp_shard.
// ACT-LABEL: func.func @train_step
// ACT-SAME: -> (
// ACT-SAME: tensor<f32> {loom.name = "act_sumsq.0", loom.sharding = #loom.sharding<[<dp_shard, partial(sum)>]>}

// NOMESH: error: no loom.mesh: run loom-annotate-data-parallel first
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %g = loom.constant {param = #loom.param<"norm.weight">} dense<1.0> : tensor<4xf32>
  %head = loom.constant {param = #loom.param<"head", transposed>} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %n = loom.rms_norm %h, %g {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %l = loom.matmul %n, %head : tensor<2x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<2x3x7xf32>
}
