// RUN: loom-opt %s --split-input-file | loom-opt --split-input-file | FileCheck %s
// Mesh, placements and collectives print and parse back.

// CHECK: module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 2, dp_shard = 4, cp = 1, tp = 1>}
// CHECK-LABEL: func.func @collectives
// CHECK-SAME: loom.sharding = #loom.sharding<[<dp_replicate, replicate>, <dp_shard, shard(1)>]>
// CHECK-SAME: loom.sharding = #loom.sharding<[<dp_shard, partial(sum)>]>
// CHECK: loom.all_gather %arg0 over [#loom<mesh_axis dp_shard>] dim 1 : tensor<3x2xf32> -> tensor<3x8xf32>
// CHECK: loom.reduce_scatter mean %{{.*}} over [#loom<mesh_axis dp_shard>] dim 1 : tensor<3x8xf32> -> tensor<3x2xf32>
// CHECK: loom.all_reduce sum %arg1 over [#loom<mesh_axis dp_replicate>, #loom<mesh_axis dp_shard>] : tensor<f32>
module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 2, dp_shard = 4, cp = 1, tp = 1>} {
  func.func @collectives(
      %w: tensor<3x2xf32> {loom.sharding = #loom.sharding<[<dp_replicate, replicate>, <dp_shard, shard(1)>]>},
      %s: tensor<f32> {loom.sharding = #loom.sharding<[<dp_shard, partial(sum)>]>})
      -> (tensor<3x2xf32>, tensor<f32>) {
    %full = loom.all_gather %w over [#loom<mesh_axis dp_shard>] dim 1 : tensor<3x2xf32> -> tensor<3x8xf32>
    %part = loom.reduce_scatter mean %full over [#loom<mesh_axis dp_shard>] dim 1 : tensor<3x8xf32> -> tensor<3x2xf32>
    %sum = loom.all_reduce sum %s over [#loom<mesh_axis dp_replicate>, #loom<mesh_axis dp_shard>] : tensor<f32>
    return %part, %sum : tensor<3x2xf32>, tensor<f32>
  }
}
