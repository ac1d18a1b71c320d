// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=2 --loom-shard-sequence-parallel=tp=2 | FileCheck %s
// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=2 --loom-shard-sequence-parallel=tp=2 --loom-build-train-step | FileCheck %s --check-prefix=STEP

// Megatron sequence parallelism without loss parallelism: between the
// attention region's entry (an all_gather along the sequence) and its exit
// (a reduce_scatter), the norm and the residual add run on 2 of the 4
// tokens; so do the unsplit embedding and head, whose token ids and logits
// are this rank's rows. Parameters read per row enter through
// copy_to_parallel over tp.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%arg0: tensor<1x2xi64> {loom.sharding = #loom.sharding<[<tp, shard(1)>]>})
// CHECK-SAME: -> (tensor<1x2x8xf32> {loom.sharding = #loom.sharding<[<tp, shard(1)>]>})
// CHECK: %[[EMB:.*]] = loom.copy_to_parallel %{{.*}} over [#loom<mesh_axis tp>] : tensor<8x8xf32>
// CHECK: %[[X:.*]] = loom.embedding %[[EMB]], %arg0 : tensor<8x8xf32>, tensor<1x2xi64>
// CHECK: %[[NW:.*]] = loom.copy_to_parallel %{{.*}} over [#loom<mesh_axis tp>] : tensor<8xf32>
// CHECK: %[[XN:.*]] = loom.rms_norm %[[X]], %[[NW]] {{.*}} : tensor<1x2x8xf32>, tensor<8xf32>
// CHECK: %[[FULL:.*]] = loom.all_gather %[[XN]] over [#loom<mesh_axis tp>] dim 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
// CHECK: loom.matmul %[[FULL]], %{{.*}} : tensor<1x4x8xf32>, tensor<8x4xf32>
// CHECK: loom.attention {{.*}} : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>
// CHECK: %[[PART:.*]] = loom.matmul %{{.*}}, %{{.*}} : tensor<1x4x4xf32>, tensor<4x8xf32>
// CHECK: %[[MINE:.*]] = loom.reduce_scatter sum %[[PART]] over [#loom<mesh_axis tp>] dim 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
// CHECK: %[[R:.*]] = loom.add %[[X]], %[[MINE]] : tensor<1x2x8xf32>, tensor<1x2x8xf32>
// CHECK-NOT: loom.all_reduce
// CHECK: loom.matmul %[[R]], %{{.*}} : tensor<1x2x8xf32>, tensor<8x8xf32>

// The loss is the mean over tp of the ranks' means; the all_gather's
// gradient is a reduce_scatter, the reduce_scatter's an all_gather, and
// the per-row parameters' gradients are summed over tp.
// STEP-LABEL: func.func @train_step
// STEP: loom.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2xi64>
// STEP-NEXT: loom.all_reduce mean %{{.*}} over [#loom<mesh_axis tp>] : tensor<f32>
// STEP: loom.all_gather %{{.*}} over [#loom<mesh_axis tp>] dim 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
// STEP: loom.reduce_scatter sum %{{.*}} over [#loom<mesh_axis tp>] dim 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
// STEP: loom.all_reduce sum %weight_grad over [#loom<mesh_axis tp>] : tensor<8xf32>
func.func @forward(%tok: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x8xf32>
  %x = loom.embedding %emb, %tok : tensor<8x8xf32>, tensor<1x4xi64>
  %nw = loom.constant {param = #loom.param<"norm">} dense<1.0> : tensor<8xf32>
  %xn = loom.rms_norm %x, %nw {epsilon = 1.0e-6 : f64} : tensor<1x4x8xf32>, tensor<8xf32>
  %wq = loom.constant {param = #loom.param<"q">} dense<0.5> : tensor<8x8xf32>
  %wk = loom.constant {param = #loom.param<"k">} dense<0.25> : tensor<8x4xf32>
  %wv = loom.constant {param = #loom.param<"v">} dense<0.125> : tensor<8x4xf32>
  %wo = loom.constant {param = #loom.param<"o">} dense<0.5> : tensor<8x8xf32>
  %q = loom.matmul %xn, %wq : tensor<1x4x8xf32>, tensor<8x8xf32>
  %k = loom.matmul %xn, %wk : tensor<1x4x8xf32>, tensor<8x4xf32>
  %v = loom.matmul %xn, %wv : tensor<1x4x8xf32>, tensor<8x4xf32>
  %q4 = loom.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x4x2xf32>
  %k4 = loom.reshape %k : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %v4 = loom.reshape %v : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %qt = loom.transpose %q4 [0, 2, 1, 3] : tensor<1x4x4x2xf32>
  %kt = loom.transpose %k4 [0, 2, 1, 3] : tensor<1x4x2x2xf32>
  %vt = loom.transpose %v4 [0, 2, 1, 3] : tensor<1x4x2x2xf32>
  %a, %lse = loom.attention %qt, %kt, %vt {causal = true, scale = 0.5 : f64} : tensor<1x4x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
  %at = loom.transpose %a [0, 2, 1, 3] : tensor<1x4x4x2xf32>
  %a3 = loom.reshape %at : tensor<1x4x4x2xf32> -> tensor<1x4x8xf32>
  %o = loom.matmul %a3, %wo : tensor<1x4x8xf32>, tensor<8x8xf32>
  %r = loom.add %x, %o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.5> : tensor<8x8xf32>
  %l = loom.matmul %r, %head : tensor<1x4x8xf32>, tensor<8x8xf32>
  return %l : tensor<1x4x8xf32>
}

