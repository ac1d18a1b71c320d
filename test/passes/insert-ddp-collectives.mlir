// RUN: loom-opt %s --loom-build-train-step --loom-annotate-data-parallel="dp-replicate=2" --loom-insert-fsdp-collectives --loom-insert-ddp-collectives | FileCheck %s --check-prefix=DDP
// RUN: loom-opt %s --loom-build-train-step --loom-annotate-data-parallel="dp-replicate=2 dp-shard=2" --loom-insert-fsdp-collectives --loom-insert-ddp-collectives | FileCheck %s --check-prefix=HSDP
// RUN: loom-opt %s --loom-build-train-step --loom-annotate-data-parallel="dp-replicate=2" --loom-insert-fsdp-collectives --loom-insert-ddp-collectives="bucket-bytes=200" | FileCheck %s --check-prefix=BUCKET
// RUN: not loom-opt %s --loom-build-train-step --loom-annotate-data-parallel="dp-replicate=0" 2>&1 | FileCheck %s --check-prefix=BAD

// DDP (dp_replicate=2): nothing is partitioned; every gradient is averaged
// right after it is complete, and so is the loss.
// DDP-LABEL: func.func @train_step
// DDP-SAME: %arg1: tensor<4xf32> {loom.name = "norm.weight", loom.param = #loom.param<"norm.weight">, loom.sharding = #loom.sharding<[<dp_replicate, replicate>]>}
// DDP-SAME: %arg10: tensor<2x3xi64> {loom.name = "tokens", loom.sharding = #loom.sharding<[<dp_replicate, shard(0)>]>}
// DDP-NOT: loom.all_gather
// DDP-NOT: loom.reduce_scatter
// DDP: %[[DHEADFULL:.*]] = loom.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// DDP-NEXT: %[[DHEAD:.*]] = loom.all_reduce mean %[[DHEADFULL]] over [#loom<mesh_axis dp_replicate>] : tensor<4x7xf32>
// DDP: %{{.*}}, %[[DNORMFULL:.*]] = loom.rms_norm_grad
// DDP-NEXT: loom.all_reduce mean %[[DNORMFULL]] over [#loom<mesh_axis dp_replicate>] : tensor<4xf32>
// DDP: %[[DEMBFULL:.*]] = loom.embedding_grad
// DDP-NEXT: loom.all_reduce mean %[[DEMBFULL]] over [#loom<mesh_axis dp_replicate>] : tensor<7x4xf32>
// DDP-NOT: loom.all_reduce sum
// DDP: loom.adamw %arg2, {{.*}} : tensor<4x7xf32>
// DDP: %[[LOSS:.*]] = loom.all_reduce mean %{{.*}} over [#loom<mesh_axis dp_replicate>] : tensor<f32>
// DDP-NEXT: return %[[LOSS]]

// HSDP (dp_replicate=2, dp_shard=2): reduce-scatter within the shard
// group, then average the shard across replicas (1/2 the traffic).
// HSDP-LABEL: func.func @train_step
// HSDP-SAME: %arg10: tensor<2x3xi64> {loom.name = "tokens", loom.sharding = #loom.sharding<[<dp_replicate, shard(0)>, <dp_shard, shard(0)>]>}
// HSDP: loom.all_gather %arg2 over [#loom<mesh_axis dp_shard>] dim 0 : tensor<2x7xf32> -> tensor<4x7xf32>
// HSDP: %[[RS:.*]] = loom.reduce_scatter mean %{{.*}} over [#loom<mesh_axis dp_shard>] dim 0 : tensor<4x7xf32> -> tensor<2x7xf32>
// HSDP-NEXT: loom.all_reduce mean %[[RS]] over [#loom<mesh_axis dp_replicate>] : tensor<2x7xf32>
// HSDP: %[[EMB:.*]] = loom.all_reduce mean %{{.*}} over [#loom<mesh_axis dp_shard>] : tensor<7x4xf32>
// HSDP-NEXT: loom.all_reduce mean %[[EMB]] over [#loom<mesh_axis dp_replicate>] : tensor<7x4xf32>
// HSDP: %[[L1:.*]] = loom.all_reduce mean %{{.*}} over [#loom<mesh_axis dp_shard>] : tensor<f32>
// HSDP-NEXT: %[[L2:.*]] = loom.all_reduce mean %[[L1]] over [#loom<mesh_axis dp_replicate>] : tensor<f32>
// HSDP-NEXT: return %[[L2]]

// Buckets of at most 200 bytes in the order backward completes the
// gradients: head (112 B) and norm.weight (16 B) share one all_reduce,
// issued after norm.weight's gradient; the embedding (112 B) would overflow
// it and gets its own.
// BUCKET-LABEL: func.func @train_step
// BUCKET: %[[DHEAD:.*]] = loom.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// BUCKET: %{{.*}}, %[[DNORM:.*]] = loom.rms_norm_grad
// BUCKET-NEXT: %[[F0:.*]] = loom.reshape %[[DHEAD]] : tensor<4x7xf32> -> tensor<28xf32>
// BUCKET-NEXT: %[[F1:.*]] = loom.reshape %[[DNORM]] : tensor<4xf32> -> tensor<4xf32>
// BUCKET-NEXT: %[[CAT:.*]] = loom.concat %[[F0]], %[[F1]] {axis = 0 : i64}
// BUCKET-NEXT: %[[AVG:.*]] = loom.all_reduce mean %[[CAT]] over [#loom<mesh_axis dp_replicate>] : tensor<32xf32>
// BUCKET-NEXT: %[[PARTS:.*]]:2 = loom.split %[[AVG]] {axis = 0 : i64, sizes = array<i64: 28, 4>}
// BUCKET-NEXT: loom.reshape %[[PARTS]]#0 : tensor<28xf32> -> tensor<4x7xf32>
// BUCKET-NEXT: loom.reshape %[[PARTS]]#1 : tensor<4xf32> -> tensor<4xf32>
// BUCKET: %[[DEMB:.*]] = loom.embedding_grad
// BUCKET-NEXT: loom.all_reduce mean %[[DEMB]] over [#loom<mesh_axis dp_replicate>] : tensor<7x4xf32>
// BUCKET-NOT: loom.concat

// BAD: error: dp-replicate and dp-shard must be at least 1
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %g = loom.constant {param = #loom.param<"norm.weight">} dense<1.0> : tensor<4xf32>
  %head = loom.constant {param = #loom.param<"head", transposed>} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %n = loom.rms_norm %h, %g {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %l = loom.matmul %n, %head : tensor<2x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<2x3x7xf32>
}
