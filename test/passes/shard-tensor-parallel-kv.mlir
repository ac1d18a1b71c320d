// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=4 | FileCheck %s
// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=4 --loom-build-train-step | FileCheck %s --check-prefix=STEP
// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=4 --mlir-print-op-generic | FileCheck %s --check-prefix=LSE

// Grouped-query attention with fewer kv heads (2) than tp ranks (4): the
// query and output projections split (one query head per rank), the k and
// v projections stay whole on every rank, enter the region through
// copy_to_parallel (each rank's weight gradient is its query head's
// share), and each rank picks the kv head of its query: heads repeated to
// 4, then a mean reduce-scatter of identical values.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: loom.tp_groups = 1
// CHECK-DAG: %[[WQ:.*]] = loom.constant {loom.sharding = #loom.sharding<[<tp, shard(1)>]>, param = #loom.param<"q">} {{.*}} : tensor<8x2xf32>
// CHECK-DAG: %[[WK:.*]] = loom.constant {param = #loom.param<"k">} {{.*}} : tensor<8x4xf32>
// CHECK-DAG: %[[WKIN:.*]] = loom.copy_to_parallel %[[WK]] over [#loom<mesh_axis tp>] : tensor<8x4xf32>
// CHECK-DAG: %[[X:.*]] = loom.copy_to_parallel %{{.*}} over [#loom<mesh_axis tp>] : tensor<1x3x8xf32>
// CHECK-DAG: loom.matmul %[[X]], %[[WQ]] : tensor<1x3x8xf32>, tensor<8x2xf32>
// CHECK-DAG: loom.matmul %[[X]], %[[WKIN]] : tensor<1x3x8xf32>, tensor<8x4xf32>
// CHECK: loom.expand %{{.*}} : tensor<1x2x1x3x2xf32> -> tensor<1x2x2x3x2xf32>
// CHECK: %[[K:.*]] = loom.reduce_scatter mean %{{.*}} over [#loom<mesh_axis tp>] dim 1 : tensor<1x4x3x2xf32> -> tensor<1x1x3x2xf32>
// CHECK: %[[V:.*]] = loom.reduce_scatter mean %{{.*}} over [#loom<mesh_axis tp>] dim 1 : tensor<1x4x3x2xf32> -> tensor<1x1x3x2xf32>
// CHECK: loom.attention %{{.*}}, %[[K]], %[[V]] {{.*}} : tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>
// CHECK: loom.all_reduce sum
// The logsumexp is split on the head dim like the output.
// LSE: "loom.attention"{{.*}} -> (tensor<1x1x3x2xf32>, tensor<1x1x3xf32>)

// Backward: the pick's gradient gathers every rank's kv-head gradient
// (scaled by 1/4), and the whole k/v weights' gradients are summed.
// STEP-LABEL: func.func @train_step
// STEP: loom.all_gather %{{.*}} over [#loom<mesh_axis tp>] dim 1 : tensor<1x1x3x2xf32> -> tensor<1x4x3x2xf32>
// STEP: loom.all_reduce sum %{{.*}} over [#loom<mesh_axis tp>] : tensor<8x4xf32>
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
