// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=2 --loom-build-train-step --loom-reduce-tensor-parallel-norm --canonicalize --cse --loom-fuse-gradient-clipping | FileCheck %s

// loom-fuse-gradient-clipping after tensor parallelism: the norm terms of
// the split weights (q, k, v by columns, o by rows) are sums of squares of
// this rank's slice, all_reduced over tp; embed and head are replicated
// and count once. Every AdamW reads its gradient with the clip as
// grad_scale.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: loom.reduce sum
// CHECK: %[[SE:.*]] = loom.sum_squares %[[DE:.*]] : tensor<8x8xf32>
// CHECK-NOT: loom.all_reduce sum %[[SE]]
// CHECK: %[[SQ:.*]] = loom.sum_squares %[[DQ:.*]] : tensor<8x4xf32>
// CHECK-NEXT: loom.all_reduce sum %[[SQ]] over [#loom<mesh_axis tp>] : tensor<f32>
// CHECK: %[[SK:.*]] = loom.sum_squares %[[DK:.*]] : tensor<8x2xf32>
// CHECK-NEXT: loom.all_reduce sum %[[SK]] over [#loom<mesh_axis tp>] : tensor<f32>
// CHECK: %[[SV:.*]] = loom.sum_squares %[[DV:.*]] : tensor<8x2xf32>
// CHECK-NEXT: loom.all_reduce sum %[[SV]] over [#loom<mesh_axis tp>] : tensor<f32>
// CHECK: %[[SO:.*]] = loom.sum_squares %[[DO:.*]] : tensor<4x8xf32>
// CHECK-NEXT: loom.all_reduce sum %[[SO]] over [#loom<mesh_axis tp>] : tensor<f32>
// CHECK: %[[SH:.*]] = loom.sum_squares %[[DH:.*]] : tensor<8x8xf32>
// CHECK-NOT: loom.all_reduce sum %[[SH]]
// CHECK: %[[COEF:.*]] = loom.min
// CHECK: loom.adamw %arg0, %[[DE]], %arg6, %arg12, %{{.*}}, %arg18 grad_scale %[[COEF]]
// CHECK-NEXT: loom.adamw %arg1, %[[DQ]], %arg7, %arg13, %{{.*}}, %arg18 grad_scale %[[COEF]]
// CHECK-NEXT: loom.adamw %arg2, %[[DK]], %arg8, %arg14, %{{.*}}, %arg18 grad_scale %[[COEF]]
// CHECK-NEXT: loom.adamw %arg3, %[[DV]], %arg9, %arg15, %{{.*}}, %arg18 grad_scale %[[COEF]]
// CHECK-NEXT: loom.adamw %arg4, %[[DO]], %arg10, %arg16, %{{.*}}, %arg18 grad_scale %[[COEF]]
// CHECK-NEXT: loom.adamw %arg5, %[[DH]], %arg11, %arg17, %{{.*}}, %arg18 grad_scale %[[COEF]]
// CHECK-NOT: loom.reduce sum
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
