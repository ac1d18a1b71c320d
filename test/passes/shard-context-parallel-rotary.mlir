// RUN: loom-opt %s --loom-shard-context-parallel=cp=2 | FileCheck %s

// Rotary tables hold global positions: the constant cos table is put in
// chunk order (positions 0-1, 6-7, 2-3, 4-5) at compile time and each rank
// keeps its half; a splat table needs no reordering.
// CHECK-LABEL: func.func @forward
// CHECK: %[[COS:.*]] = loom.constant dense<{{\[\[\[\[}}0.000000e+00], [1.000000e+00], [6.000000e+00], [7.000000e+00], [2.000000e+00], [3.000000e+00], [4.000000e+00], [5.000000e+00]]]]> : tensor<1x1x8x1xf32>
// CHECK: %[[MYCOS:.*]] = loom.shard_slice %[[COS]] over [#loom<mesh_axis cp>] dim 2 : tensor<1x1x8x1xf32> -> tensor<1x1x4x1xf32>
// CHECK: %[[MYSIN:.*]] = loom.shard_slice %{{.*}} over [#loom<mesh_axis cp>] dim 2 : tensor<1x1x8x1xf32> -> tensor<1x1x4x1xf32>
// CHECK: loom.rotary %{{.*}}, %[[MYCOS]], %[[MYSIN]] : tensor<1x1x4x2xf32>, tensor<1x1x4x1xf32>, tensor<1x1x4x1xf32>
// CHECK: loom.rotary %{{.*}}, %[[MYCOS]], %[[MYSIN]] : tensor<1x1x4x2xf32>, tensor<1x1x4x1xf32>, tensor<1x1x4x1xf32>
func.func @forward(%tok: tensor<1x8xi64>) -> tensor<1x8x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x2xf32>
  %x = loom.embedding %emb, %tok : tensor<8x2xf32>, tensor<1x8xi64>
  %x4 = loom.reshape %x : tensor<1x8x2xf32> -> tensor<1x1x8x2xf32>
  %cos = loom.constant dense<[[[[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0]]]]> : tensor<1x1x8x1xf32>
  %sin = loom.constant dense<0.5> : tensor<1x1x8x1xf32>
  %q = loom.rotary %x4, %cos, %sin : tensor<1x1x8x2xf32>, tensor<1x1x8x1xf32>, tensor<1x1x8x1xf32>
  %k = loom.rotary %x4, %cos, %sin : tensor<1x1x8x2xf32>, tensor<1x1x8x1xf32>, tensor<1x1x8x1xf32>
  %a, %lse = loom.attention %q, %k, %x4 {causal = true, scale = 0.5 : f64} : tensor<1x1x8x2xf32>, tensor<1x1x8x2xf32>, tensor<1x1x8x2xf32>
  %a3 = loom.reshape %a : tensor<1x1x8x2xf32> -> tensor<1x8x2xf32>
  %head = loom.constant {param = #loom.param<"head">} dense<0.25> : tensor<2x8xf32>
  %l = loom.matmul %a3, %head : tensor<1x8x2xf32>, tensor<2x8xf32>
  return %l : tensor<1x8x8xf32>
}
