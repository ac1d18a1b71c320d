// RUN: loom-opt %s --split-input-file --loom-expand-context-attention | FileCheck %s

// Ring attention over cp = 3 (rank c holds query/key chunks c and 5 - c):
// causal attention over the local chunks, then two ring shifts of the keys
// and values (block s from rank c - s). Each step is two unmasked L x L
// products, (second chunk, first half) and the pair `where` picks by this
// rank's bit (s <= c: both chunks see the first half). Partial results
// merge by their logsumexp (a pick that does not apply has lse -inf).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[O0:.*]], %[[L0:.*]] = loom.attention %arg0, %arg1, %arg2 {causal = true
// CHECK: %[[NINF:.*]] = loom.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[BITS:.*]] = loom.constant dense<{{\[\[}}false, false], [true, false], [true, true]]> : tensor<3x2xi1>
// CHECK: loom.shard_slice %[[BITS]] over [#loom<mesh_axis cp>] dim 0 : tensor<3x2xi1> -> tensor<1x2xi1>
// CHECK: %[[K1:.*]] = loom.collective_permute %arg1 over [#loom<mesh_axis cp>] shift 1
// CHECK: loom.collective_permute %[[K1]] over [#loom<mesh_axis cp>] shift 1
// CHECK: %[[V1:.*]] = loom.collective_permute %arg2 over [#loom<mesh_axis cp>] shift 1
// CHECK: loom.collective_permute %[[V1]] over [#loom<mesh_axis cp>] shift 1
// CHECK-COUNT-2: loom.attention {{.*}} {causal = false, scale = 5.000000e-01 : f64} : tensor<1x2x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
// CHECK: loom.where %{{.*}}, %{{.*}}, %[[NINF]] : tensor<i1>, tensor<1x2x2xf32>, tensor<f32>
// CHECK: loom.where %{{.*}}, %[[NINF]], %{{.*}} : tensor<i1>, tensor<f32>, tensor<1x2x2xf32>
// CHECK-COUNT-2: loom.attention {{.*}} {causal = false
// CHECK: loom.max
// CHECK: loom.exp
// CHECK: loom.log
// CHECK: %[[O:.*]] = loom.concat %{{.*}}, %{{.*}} {axis = 2 : i64} : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
// CHECK: %[[L:.*]] = loom.concat %{{.*}}, %{{.*}} {axis = 2 : i64} : tensor<1x2x2xf32>, tensor<1x2x2xf32>

// The backward: attention_grad of every block with the merged output and
// logsumexp; the keys travel the ring again and the key gradient's
// accumulator follows them, one more shift bringing each sum home.
// CHECK: %[[DQ0:.*]], %[[DK0:.*]], %{{.*}} = loom.attention_grad %arg0, %arg1, %arg2, %[[O]], %[[L]], %arg3 {causal = true
// CHECK-COUNT-4: loom.collective_permute %{{.*}} over [#loom<mesh_axis cp>] shift 1
// CHECK-COUNT-2: loom.attention_grad {{.*}} {causal = false
// CHECK-COUNT-2: loom.attention_grad {{.*}} {causal = false
// CHECK: %[[ACC:.*]] = loom.collective_permute %{{.*}} over [#loom<mesh_axis cp>] shift 1 : tensor<1x1x4x2xf32>
// CHECK: %[[SUM:.*]] = loom.add %[[ACC]], %{{.*}} : tensor<1x1x4x2xf32>
// CHECK: %[[HOME:.*]] = loom.collective_permute %[[SUM]] over [#loom<mesh_axis cp>] shift 1
// CHECK: %[[DK:.*]] = loom.add %[[DK0]], %[[HOME]]
// CHECK: return %[[O]], %[[DK]]
module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 3, tp = 1>} {
  func.func @train_step(%q: tensor<1x2x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>,
                        %dy: tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>) {
    %o, %lse = loom.context_attention %q, %k, %v over [#loom<mesh_axis cp>] ring {causal = true, scale = 0.5 : f64} : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>
    %dq, %dk, %dv = loom.context_attention_grad %q, %k, %v, %o, %lse, %dy over [#loom<mesh_axis cp>] ring {causal = true, scale = 0.5 : f64} : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>
    return %o, %dk : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>
  }
}

// -----

// All-gather attention over cp = 2: one all_gather of each rank's keys
// (and values) as a row [1, E], then each rank picks the other rank's row
// (an embedding by its own id, from a per-rank table). Backward: the
// picked rows' gradients scatter back into [C, E] (embedding_grad) and a
// reduce_scatter (sum) hands each rank the sum for its own keys.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G:.*]] = loom.all_gather %{{.*}} over [#loom<mesh_axis cp>] dim 0 : tensor<1x8xf32> -> tensor<2x8xf32>
// CHECK: %[[IDS:.*]] = loom.constant dense<{{\[\[}}1], [0]]> : tensor<2x1xi64>
// CHECK: loom.shard_slice %[[IDS]] over [#loom<mesh_axis cp>] dim 0 : tensor<2x1xi64> -> tensor<1x1xi64>
// CHECK: loom.embedding %[[G]], %{{.*}} : tensor<2x8xf32>, tensor<1xi64>
// CHECK-NOT: collective_permute
// CHECK: loom.attention_grad
// CHECK: %[[BACK:.*]] = loom.embedding_grad %{{.*}}, %{{.*}} {num_embeddings = 2 : i64} : tensor<1x8xf32>, tensor<1xi64>
// CHECK: loom.reduce_scatter sum %[[BACK]] over [#loom<mesh_axis cp>] dim 0 : tensor<2x8xf32> -> tensor<1x8xf32>
module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 2, tp = 1>} {
  func.func @train_step(%q: tensor<1x2x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>,
                        %dy: tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>) {
    %o, %lse = loom.context_attention %q, %k, %v over [#loom<mesh_axis cp>] allgather {causal = true, scale = 0.5 : f64} : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>
    %dq, %dk, %dv = loom.context_attention_grad %q, %k, %v, %o, %lse, %dy over [#loom<mesh_axis cp>] allgather {causal = true, scale = 0.5 : f64} : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>
    return %o, %dk : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>
  }
}
