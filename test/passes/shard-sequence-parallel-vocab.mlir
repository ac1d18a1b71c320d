// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=2 --loom-shard-vocab-parallel=tp=2 --loom-shard-sequence-parallel=tp=2 | FileCheck %s
// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=2 --loom-shard-vocab-parallel=tp=2 --loom-shard-sequence-parallel=tp=2 --loom-build-train-step | FileCheck %s --check-prefix=STEP

// With loss parallelism (after loom-shard-vocab-parallel the embedding's
// all_reduce is an exit and the head's input an entry like the others),
// on GPT-2's flattened rows: a [B T, D] value is viewed as [B, T, D] around
// its collective, so each rank keeps positions, not whole sequences; the
// bias after the row-parallel matmul is added on the rank's rows.
// CHECK-LABEL: func.func @forward
// CHECK: %[[ROWS:.*]] = loom.vocab_shard_embedding
// CHECK: %[[X:.*]] = loom.reduce_scatter sum %[[ROWS]] over [#loom<mesh_axis tp>] dim 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[XF:.*]] = loom.reshape %[[X]] : tensor<2x2x8xf32> -> tensor<4x8xf32>
// CHECK: %[[XV:.*]] = loom.reshape %[[XF]] : tensor<4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[G:.*]] = loom.all_gather %[[XV]] over [#loom<mesh_axis tp>] dim 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: loom.reshape %[[G]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[BIAS:.*]] = loom.copy_to_parallel %{{.*}} over [#loom<mesh_axis tp>] : tensor<8xf32>
// CHECK: %[[Y:.*]] = loom.matmul %{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK: %[[YV:.*]] = loom.reshape %[[Y]] : tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[YS:.*]] = loom.reduce_scatter sum %[[YV]] over [#loom<mesh_axis tp>] dim 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[YF:.*]] = loom.reshape %[[YS]] : tensor<2x2x8xf32> -> tensor<4x8xf32>
// CHECK: loom.add %[[YF]], %[[BIAS]] : tensor<4x8xf32>, tensor<8xf32>
// CHECK: %[[H:.*]] = loom.all_gather %{{.*}} over [#loom<mesh_axis tp>] dim 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: loom.matmul %[[H]], %{{.*}} {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<4x8xf32>
// STEP-LABEL: func.func @train_step
// STEP: loom.vocab_shard_cross_entropy
// STEP-NOT: over [#loom<mesh_axis tp>] : tensor<f32>
// STEP: return
func.func @forward(%tok: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  %wte = loom.constant {param = #loom.param<"wte">} dense<0.5> : tensor<8x8xf32>
  %x = loom.embedding %wte, %tok : tensor<8x8xf32>, tensor<2x4xi64>
  %flat = loom.reshape %x : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %wfc = loom.constant {param = #loom.param<"c_fc">} dense<0.5> : tensor<8x16xf32>
  %bfc = loom.constant {param = #loom.param<"c_fc.bias">} dense<0.1> : tensor<16xf32>
  %h = loom.matmul %flat, %wfc : tensor<8x8xf32>, tensor<8x16xf32>
  %hb = loom.add %h, %bfc : tensor<8x16xf32>, tensor<16xf32>
  %g = loom.gelu %hb tanh : tensor<8x16xf32>
  %wpr = loom.constant {param = #loom.param<"c_proj">} dense<0.25> : tensor<16x8xf32>
  %bpr = loom.constant {param = #loom.param<"c_proj.bias">} dense<0.1> : tensor<8xf32>
  %y = loom.matmul %g, %wpr : tensor<8x16xf32>, tensor<16x8xf32>
  %yb = loom.add %y, %bpr : tensor<8x8xf32>, tensor<8xf32>
  %y3 = loom.reshape %yb : tensor<8x8xf32> -> tensor<2x4x8xf32>
  %r = loom.add %x, %y3 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %l = loom.matmul %r, %wte {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<8x8xf32>
  return %l : tensor<2x4x8xf32>
}
