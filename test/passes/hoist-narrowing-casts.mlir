// RUN: loom-opt --loom-hoist-narrowing-casts %s | FileCheck %s

// The attention's output gradient: the o_proj input gradient, heads split
// in f32 and then rounded. The rounding moves onto the matmul's result (its
// only user, so loom-use-bf16-matmuls can make it a bf16 GEMM) and the
// reshape and transpose move bf16.
// CHECK-LABEL: func.func @split_heads
// CHECK: %[[M:.*]] = loom.matmul
// CHECK-NEXT: %[[R:.*]] = loom.cast %[[M]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[S:.*]] = loom.reshape %[[R]] : tensor<8x8xbf16> -> tensor<2x4x2x4xbf16>
// CHECK-NEXT: %[[T:.*]] = loom.transpose %[[S]] [0, 2, 1, 3] : tensor<2x4x2x4xbf16>
// CHECK-NEXT: return %[[T]]
func.func @split_heads(%a: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x2x4x4xbf16> {
  %0 = loom.matmul %a, %w : tensor<8x8xf32>, tensor<8x8xf32>
  %1 = loom.reshape %0 : tensor<8x8xf32> -> tensor<2x4x2x4xf32>
  %2 = loom.transpose %1 [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %3 = loom.cast %2 : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xbf16>
  return %3 : tensor<2x2x4x4xbf16>
}

// GPT-2's fused c_attn gradient: dq, dk, dv merged and concatenated, then
// rounded. Each piece is rounded where attention_grad writes it.
// CHECK-LABEL: func.func @concat_qkv
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = loom.attention_grad
// CHECK-DAG: loom.cast %[[DQ]] : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xbf16>
// CHECK-DAG: loom.cast %[[DK]] : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xbf16>
// CHECK-DAG: loom.cast %[[DV]] : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xbf16>
// CHECK: %[[C:.*]] = loom.concat {{.*}} {axis = 2 : i64} : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
// CHECK: %[[F:.*]] = loom.reshape %[[C]] : tensor<2x4x24xbf16> -> tensor<8x24xbf16>
// CHECK-NOT: loom.cast
// CHECK: return %[[F]]
func.func @concat_qkv(%q: tensor<2x2x4x4xf32>, %lse: tensor<2x2x4xf32>) -> tensor<8x24xbf16> {
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %lse, %q {causal = true, scale = 5.000000e-01 : f64} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4xf32>
  %0 = loom.transpose %dq [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %1 = loom.reshape %0 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %2 = loom.transpose %dk [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %3 = loom.reshape %2 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %4 = loom.transpose %dv [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %5 = loom.reshape %4 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %6 = loom.concat %1, %3, %5 {axis = 2 : i64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %7 = loom.reshape %6 : tensor<2x4x24xf32> -> tensor<8x24xf32>
  %8 = loom.cast %7 : tensor<8x24xf32> -> tensor<8x24xbf16>
  return %8 : tensor<8x24xbf16>
}

// A layout result with another reader keeps its f32 form: that reader
// still needs the unrounded values.
// CHECK-LABEL: func.func @other_reader
// CHECK: %[[T:.*]] = loom.transpose %{{.*}} [1, 0] : tensor<4x8xf32>
// CHECK: loom.cast %[[T]] : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK: loom.neg %[[T]]
func.func @other_reader(%x: tensor<4x8xf32>) -> (tensor<8x4xbf16>, tensor<8x4xf32>) {
  %0 = loom.transpose %x [1, 0] : tensor<4x8xf32>
  %1 = loom.cast %0 : tensor<8x4xf32> -> tensor<8x4xbf16>
  %2 = loom.neg %0 : tensor<8x4xf32>
  return %1, %2 : tensor<8x4xbf16>, tensor<8x4xf32>
}

// A widening cast is not a rounding: nothing moves.
// CHECK-LABEL: func.func @widening
// CHECK: loom.transpose %{{.*}} [1, 0] : tensor<4x8xbf16>
// CHECK-NEXT: loom.cast
func.func @widening(%x: tensor<4x8xbf16>) -> tensor<8x4xf32> {
  %0 = loom.transpose %x [1, 0] : tensor<4x8xbf16>
  %1 = loom.cast %0 : tensor<8x4xbf16> -> tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
