// RUN: loom-opt %s --split-input-file --loom-shard-tensor-parallel=tp=2 | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-shard-tensor-parallel=tp=2 --loom-build-train-step --loom-reduce-tensor-parallel-norm | FileCheck %s --check-prefix=STEP
// RUN: loom-opt %s --split-input-file --loom-shard-tensor-parallel=tp=2 --mlir-print-op-generic | FileCheck %s --check-prefix=LSE

// Attention with grouped-query heads (4 query heads, 2 kv heads of 2):
// q, k, v are column parallel (each rank: 2 query heads, 1 kv head), o is
// row parallel and its partial product is summed over tp.
// CHECK: module attributes {loom.mesh = #loom.mesh<pp = 1, dp_replicate = 1, dp_shard = 1, cp = 1, tp = 2>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: loom.tp_groups = 1
// CHECK: %[[E:.*]] = loom.embedding
// CHECK-NEXT: %[[X:.*]] = loom.copy_to_parallel %[[E]] over [#loom<mesh_axis tp>] : tensor<1x3x8xf32>
// CHECK-DAG: %[[WQ:.*]] = loom.constant {loom.sharding = #loom.sharding<[<tp, shard(1)>]>, param = #loom.param<"q">} {{.*}} : tensor<8x4xf32>
// CHECK-DAG: %[[WK:.*]] = loom.constant {loom.sharding = #loom.sharding<[<tp, shard(1)>]>, param = #loom.param<"k">} {{.*}} : tensor<8x2xf32>
// CHECK-DAG: %[[WO:.*]] = loom.constant {loom.sharding = #loom.sharding<[<tp, shard(0)>]>, param = #loom.param<"o">} {{.*}} : tensor<4x8xf32>
// CHECK: loom.matmul %[[X]], %[[WQ]] : tensor<1x3x8xf32>, tensor<8x4xf32>
// CHECK: loom.reshape %{{.*}} : tensor<1x3x4xf32> -> tensor<1x3x2x2xf32>
// CHECK: loom.attention %{{.*}}, %{{.*}}, %{{.*}} {{.*}} : tensor<1x2x3x2xf32>, tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>
// The logsumexp is split on the head dim like the output: 2 of 4 heads.
// LSE: "loom.attention"{{.*}} -> (tensor<1x2x3x2xf32>, tensor<1x2x3xf32>)
// CHECK: %[[PART:.*]] = loom.matmul %{{.*}}, %[[WO]] : tensor<1x3x4xf32>, tensor<4x8xf32>
// CHECK: %[[SUM:.*]] = loom.all_reduce sum %[[PART]] over [#loom<mesh_axis tp>] : tensor<1x3x8xf32>
// The LM head's logits are a result: it stays whole.
// CHECK: loom.matmul %[[SUM]], %{{.*}} : tensor<1x3x8xf32>, tensor<8x8xf32>

// The backward pass: the row-parallel all_reduce passes its gradient
// through, copy_to_parallel sums the input's gradient over tp, and the
// split weights' norm terms are summed over tp.
// STEP-LABEL: func.func @train_step
// STEP-SAME: loom.name = "q", loom.param = #loom.param<"q">, loom.sharding = #loom.sharding<[<tp, shard(1)>]>
// STEP-SAME: loom.name = "exp_avg.q", loom.sharding = #loom.sharding<[<tp, shard(1)>]>
// STEP: loom.attention_grad
// STEP: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis tp>] : tensor<1x3x8xf32>
// STEP-COUNT-4: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis tp>] : tensor<f32>
// STEP: loom.sqrt
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x8xf32>
  %x = loom.embedding %emb, %tok : tensor<8x8xf32>, tensor<1x3xi64>
  %wq = loom.constant {param = #loom.param<"q">} dense<0.5> : tensor<8x8xf32>
  %wk = loom.constant {param = #loom.param<"k">} dense<0.25> : tensor<8x4xf32>
  %wv = loom.constant {param = #loom.param<"v">} dense<0.125> : tensor<8x4xf32>
  %wo = loom.constant {param = #loom.param<"o">} dense<0.5> : tensor<8x8xf32>
  %q = loom.matmul %x, %wq : tensor<1x3x8xf32>, tensor<8x8xf32>
  %k = loom.matmul %x, %wk : tensor<1x3x8xf32>, tensor<8x4xf32>
  %v = loom.matmul %x, %wv : tensor<1x3x8xf32>, tensor<8x4xf32>
  %q4 = loom.reshape %q : tensor<1x3x8xf32> -> tensor<1x3x4x2xf32>
  %k4 = loom.reshape %k : tensor<1x3x4xf32> -> tensor<1x3x2x2xf32>
  %v4 = loom.reshape %v : tensor<1x3x4xf32> -> tensor<1x3x2x2xf32>
  %qt = loom.transpose %q4 [0, 2, 1, 3] : tensor<1x3x4x2xf32>
  %kt = loom.transpose %k4 [0, 2, 1, 3] : tensor<1x3x2x2xf32>
  %vt = loom.transpose %v4 [0, 2, 1, 3] : tensor<1x3x2x2xf32>
  %a, %lse = loom.attention %qt, %kt, %vt {causal = true, scale = 0.5 : f64} : tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>
  %at = loom.transpose %a [0, 2, 1, 3] : tensor<1x4x3x2xf32>
  %a3 = loom.reshape %at : tensor<1x3x4x2xf32> -> tensor<1x3x8xf32>
  %o = loom.matmul %a3, %wo : tensor<1x3x8xf32>, tensor<8x8xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.5> : tensor<8x8xf32>
  %l = loom.matmul %o, %head : tensor<1x3x8xf32>, tensor<8x8xf32>
  return %l : tensor<1x3x8xf32>
}

// -----

// A sharded value that reaches something without a rule (here the logits)
// leaves the whole group replicated.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: loom.tp_groups = 0
// CHECK-NOT: copy_to_parallel
// CHECK-NOT: loom.sharding
// CHECK: return
// STEP-LABEL: func.func @train_step
// STEP-NOT: loom.all_reduce
// STEP: return
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x8xf32>
  %x = loom.embedding %emb, %tok : tensor<8x8xf32>, tensor<1x3xi64>
  %w = loom.constant {param = #loom.param<"up">} dense<0.5> : tensor<8x8xf32>
  %h = loom.matmul %x, %w : tensor<1x3x8xf32>, tensor<8x8xf32>
  %s = loom.silu %h : tensor<1x3x8xf32>
  return %s : tensor<1x3x8xf32>
}

// -----

// A fused q|k|v projection with a bias, cut into three equal parts: the
// weight and bias are split block by block (rank i holds slice i of q, of
// k and of v), and the cut takes local sizes.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: loom.tp_groups = 1
// CHECK-DAG: loom.constant {loom.sharding = #loom.sharding<[<tp, shard(1, blocks = 3)>]>, param = #loom.param<"qkv">} {{.*}} : tensor<8x12xf32>
// CHECK-DAG: loom.constant {loom.sharding = #loom.sharding<[<tp, shard(0, blocks = 3)>]>, param = #loom.param<"qkv.bias">} {{.*}} : tensor<12xf32>
// CHECK: loom.split %{{.*}} {axis = 2 : i64, sizes = array<i64: 4, 4, 4>} : tensor<1x3x12xf32>
// CHECK: loom.attention {{.*}} : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>
// CHECK: loom.all_reduce sum
// STEP-LABEL: func.func @train_step
// STEP-SAME: loom.sharding = #loom.sharding<[<tp, shard(1, blocks = 3)>]>
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x8xf32>
  %x = loom.embedding %emb, %tok : tensor<8x8xf32>, tensor<1x3xi64>
  %w = loom.constant {param = #loom.param<"qkv">} dense<0.5> : tensor<8x24xf32>
  %b = loom.constant {param = #loom.param<"qkv.bias">} dense<0.1> : tensor<24xf32>
  %wo = loom.constant {param = #loom.param<"o">} dense<0.5> : tensor<8x8xf32>
  %p = loom.matmul %x, %w : tensor<1x3x8xf32>, tensor<8x24xf32>
  %pb = loom.add %p, %b : tensor<1x3x24xf32>, tensor<24xf32>
  %q, %k, %v = loom.split %pb {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : tensor<1x3x24xf32>
  %q4 = loom.reshape %q : tensor<1x3x8xf32> -> tensor<1x3x4x2xf32>
  %k4 = loom.reshape %k : tensor<1x3x8xf32> -> tensor<1x3x4x2xf32>
  %v4 = loom.reshape %v : tensor<1x3x8xf32> -> tensor<1x3x4x2xf32>
  %qt = loom.transpose %q4 [0, 2, 1, 3] : tensor<1x3x4x2xf32>
  %kt = loom.transpose %k4 [0, 2, 1, 3] : tensor<1x3x4x2xf32>
  %vt = loom.transpose %v4 [0, 2, 1, 3] : tensor<1x3x4x2xf32>
  %a, %lse = loom.attention %qt, %kt, %vt {causal = true, scale = 0.5 : f64} : tensor<1x4x3x2xf32>, tensor<1x4x3x2xf32>, tensor<1x4x3x2xf32>
  %at = loom.transpose %a [0, 2, 1, 3] : tensor<1x4x3x2xf32>
  %a3 = loom.reshape %at : tensor<1x3x4x2xf32> -> tensor<1x3x8xf32>
  %o = loom.matmul %a3, %wo : tensor<1x3x8xf32>, tensor<8x8xf32>
  return %o : tensor<1x3x8xf32>
}
