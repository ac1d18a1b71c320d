// RUN: loom-opt %s --loom-shard-tensor-parallel=tp=2 --loom-shard-sequence-parallel=tp=2 --loom-build-train-step --loom-regather-sequence-parallel | FileCheck %s

// The attention region's input is gathered from the ranks' shards in the
// forward; its weight gradients need it again in the backward, which gets
// a second all_gather of the same shard (Megatron's sequence parallelism)
// instead of keeping the gathered whole alive. copy_to_parallel, the
// identity after autodiff, is gone.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: copy_to_parallel
// CHECK: %[[SHARD:.*]] = loom.rms_norm {{.*}} : tensor<1x2x8xf32>, tensor<8xf32>
// CHECK: %[[FWD:.*]] = loom.all_gather %[[SHARD]] over [#loom<mesh_axis tp>] dim 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
// CHECK: loom.cross_entropy
// CHECK-NOT: %[[FWD]]{{[^0-9]}}
// CHECK: %[[BWD:.*]] = loom.all_gather %[[SHARD]] over [#loom<mesh_axis tp>] dim 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
// CHECK-NOT: %[[FWD]]{{[^0-9]}}
// CHECK: return
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
