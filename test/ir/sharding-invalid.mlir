// RUN: loom-opt %s -split-input-file -verify-diagnostics

module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 4, cp = 1, tp = 1>} {
  func.func @gather_wrong_size(%w: tensor<3x2xf32>) {
    // expected-error@+1 {{dim 0 must grow from 3 by the group size 4, not to 6}}
    %f = loom.all_gather %w over [#loom<mesh_axis dp_shard>] dim 0 : tensor<3x2xf32> -> tensor<6x2xf32>
    return
  }
}

// -----

func.func @max_is_not_a_collective_reduction(%s: tensor<f32>) {
  // expected-error@+1 {{reduces by sum or mean, not max}}
  %r = loom.all_reduce max %s over [#loom<mesh_axis dp_shard>] : tensor<f32>
  return
}

// -----

func.func @axis_twice(%s: tensor<f32>) {
  // expected-error@+1 {{names mesh axis dp_shard twice}}
  %r = loom.all_reduce sum %s over [#loom<mesh_axis dp_shard>, #loom<mesh_axis dp_shard>] : tensor<f32>
  return
}

// -----

func.func @no_axes(%s: tensor<f32>) {
  // expected-error@+1 {{needs at least one mesh axis}}
  %r = loom.all_reduce sum %s over [] : tensor<f32>
  return
}

// -----

func.func @scatter_other_dim(%x: tensor<4x3xf32>) {
  // expected-error@+1 {{input and result differ in dim 1, which is not `dim`}}
  %r = loom.reduce_scatter sum %x over [#loom<mesh_axis dp_shard>] dim 0 : tensor<4x3xf32> -> tensor<2x2xf32>
  return
}

// -----

// expected-error@+2 {{shard placement needs a non-negative dim}}
// expected-error@+1 {{failed to parse Loom_ShardingAttr parameter 'placements'}}
func.func private @bad_placement(tensor<4xf32> {loom.sharding = #loom.sharding<[<dp_shard, shard(-1)>]>})

// -----

// expected-error@+1 {{every mesh axis needs a size of at least 1}}
module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 0, dp_shard = 4, cp = 1, tp = 1>} {}
