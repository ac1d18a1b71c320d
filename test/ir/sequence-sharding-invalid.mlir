// RUN: loom-opt %s -split-input-file -verify-diagnostics

module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 4, tp = 1>} {
  func.func @slice_wrong_size(%t: tensor<8x2xf32>) {
    // expected-error@+1 {{dim 0 must shrink from 8 by the group size 4, not to 4}}
    %s = loom.shard_slice %t over [#loom<mesh_axis cp>] dim 0 : tensor<8x2xf32> -> tensor<4x2xf32>
    return
  }
}

// -----

func.func @slice_other_dim(%t: tensor<8x2xf32>) {
  // expected-error@+1 {{input and result differ in dim 1, which is not `dim`}}
  %s = loom.shard_slice %t over [#loom<mesh_axis cp>] dim 0 : tensor<8x2xf32> -> tensor<4x1xf32>
  return
}

// -----

func.func @permute_axis_twice(%k: tensor<2x2xf32>) {
  // expected-error@+1 {{names mesh axis cp twice}}
  %p = loom.collective_permute %k over [#loom<mesh_axis cp>, #loom<mesh_axis cp>] shift 1 : tensor<2x2xf32>
  return
}

// -----

func.func @not_causal(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>) {
  // expected-error@+1 {{is causal attention (the load-balanced chunks serve a causal mask)}}
  %o, %lse = loom.context_attention %q, %k, %k over [#loom<mesh_axis cp>] allgather {causal = false, scale = 0.5 : f64} : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
  return
}

// -----

func.func @odd_rows(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>) {
  // expected-error@+1 {{needs the same even number of local query and key rows (two load-balanced chunks), not 3 and 3}}
  %o, %lse = loom.context_attention %q, %k, %k over [#loom<mesh_axis cp>] allgather {causal = true, scale = 0.5 : f64} : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>
  return
}

// -----

func.func @offset_of_two(%t: tensor<8x4xf32>, %ids: tensor<3xi64>, %first: tensor<2xi64>) {
  // expected-error@+1 {{table must be [Vl, D] and first a one-element offset}}
  %r = loom.vocab_shard_embedding %t, %ids, %first {vocab = 16 : i64} : tensor<8x4xf32>, tensor<3xi64>, tensor<2xi64>
  return
}

// -----

func.func @shift_rows(%l: tensor<6x8xf32>, %t: tensor<6xi64>, %first: tensor<1xi64>, %shift: tensor<5xf32>) {
  // expected-error@+1 {{logits, targets and shift must be [N, Vl], [N] and [N]}}
  %s, %x = loom.vocab_shard_cross_entropy %l, %t, %first, %shift {vocab = 16 : i64} : tensor<6x8xf32>, tensor<6xi64>, tensor<1xi64>, tensor<5xf32>
  return
}
