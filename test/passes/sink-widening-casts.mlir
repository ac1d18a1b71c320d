// RUN: loom-opt --loom-sink-widening-casts %s | FileCheck %s

// Heads split from a bf16 projection: the reshape and transpose move onto
// the bf16 tensor and the widening cast lands on attention's operand.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8xbf16>
// CHECK: %[[R:.*]] = loom.reshape %[[Q]] : tensor<2x4x8xbf16> -> tensor<2x4x2x4xbf16>
// CHECK: %[[T:.*]] = loom.transpose %[[R]] [0, 2, 1, 3] : tensor<2x4x2x4xbf16>
// CHECK: %[[W:.*]] = loom.cast %[[T]] : tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xf32>
// CHECK: loom.attention %[[W]], %[[W]], %[[W]]
func.func @heads(%q: tensor<2x4x8xbf16>) -> tensor<2x2x4x4xf32> {
  %0 = loom.cast %q : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
  %1 = loom.reshape %0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %2 = loom.transpose %1 [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %3, %lse = loom.attention %2, %2, %2 {causal = true, scale = 5.000000e-01 : f64} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  return %3 : tensor<2x2x4x4xf32>
}

// A weight gradient flattens the batch first: the matmul gets widening casts.
// CHECK-LABEL: func.func @flatten_for_matmul
// CHECK: %[[R:.*]] = loom.reshape %{{.*}} : tensor<2x3x4xbf16> -> tensor<6x4xbf16>
// CHECK: %[[W:.*]] = loom.cast %[[R]] : tensor<6x4xbf16> -> tensor<6x4xf32>
// CHECK: loom.matmul %[[W]], %{{.*}} {transpose_lhs = true}
func.func @flatten_for_matmul(%x: tensor<2x3x4xbf16>, %dy: tensor<6x5xf32>) -> tensor<4x5xf32> {
  %0 = loom.cast %x : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
  %1 = loom.reshape %0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %2 = loom.matmul %1, %dy {transpose_lhs = true} : tensor<6x4xf32>, tensor<6x5xf32>
  return %2 : tensor<4x5xf32>
}

// Another reader (an element-wise op) keeps the f32 layout op: sinking the
// cast would add a conversion pass in front of it.
// CHECK-LABEL: func.func @other_reader
// CHECK: %[[C:.*]] = loom.cast %{{.*}} : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
// CHECK: %[[R:.*]] = loom.reshape %[[C]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: loom.neg %[[R]]
func.func @other_reader(%x: tensor<2x3x4xbf16>, %w: tensor<4x5xf32>) -> (tensor<6x5xf32>, tensor<6x4xf32>) {
  %0 = loom.cast %x : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
  %1 = loom.reshape %0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %2 = loom.matmul %1, %w : tensor<6x4xf32>, tensor<4x5xf32>
  %3 = loom.neg %1 : tensor<6x4xf32>
  return %2, %3 : tensor<6x5xf32>, tensor<6x4xf32>
}

// f32 values that were never bf16 stay as they are.
// CHECK-LABEL: func.func @not_widened
// CHECK: loom.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NOT: loom.cast
func.func @not_widened(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>) -> tensor<6x5xf32> {
  %1 = loom.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %2 = loom.matmul %1, %w : tensor<6x4xf32>, tensor<4x5xf32>
  return %2 : tensor<6x5xf32>
}

// The backward reads the forward's rounded output (attention_grad's o):
// the head merge sinks below its own widening cast, and the original cast
// stays for attention_grad, which reads bf16 storage too.
// CHECK-LABEL: func.func @saved_output
// CHECK-SAME: (%[[O:[^:]*]]: tensor<2x2x4x4xbf16>, %[[Q:[^:]*]]: tensor<2x2x4x4xbf16>
// CHECK-DAG: %[[WO:.*]] = loom.cast %[[O]] : tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xf32>
// CHECK-DAG: %[[T:.*]] = loom.transpose %[[O]] [0, 2, 1, 3] : tensor<2x2x4x4xbf16>
// CHECK: %[[R:.*]] = loom.reshape %[[T]] : tensor<2x4x2x4xbf16> -> tensor<8x8xbf16>
// CHECK: %[[W:.*]] = loom.cast %[[R]] : tensor<8x8xbf16> -> tensor<8x8xf32>
// CHECK: loom.matmul %[[W]], %{{.*}}
// CHECK: loom.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[WO]], %{{.*}}, %{{.*}} {
func.func @saved_output(%o: tensor<2x2x4x4xbf16>, %q: tensor<2x2x4x4xbf16>, %lse: tensor<2x2x4xf32>,
                        %dy: tensor<2x2x4x4xf32>, %w: tensor<8x8xf32>)
    -> (tensor<8x8xf32>, tensor<2x2x4x4xf32>) {
  %0 = loom.cast %o : tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xf32>
  %1 = loom.cast %q : tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xf32>
  %2 = loom.transpose %0 [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %3 = loom.reshape %2 : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
  %4 = loom.matmul %3, %w : tensor<8x8xf32>, tensor<8x8xf32>
  %dq, %dk, %dv = loom.attention_grad %1, %1, %1, %0, %lse, %dy {causal = true, scale = 5.000000e-01 : f64} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4xf32>
  return %4, %dq : tensor<8x8xf32>, tensor<2x2x4x4xf32>
}

// GPT-2's fused qkv projection: the split of the bf16 c_attn output moves
// onto the bf16 tensor, one widening cast per piece, so that each attention
// operand is a widening cast (its bf16_operands flag).
// CHECK-LABEL: func.func @split_qkv
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x24xbf16>
// CHECK: %[[S:.*]]:3 = loom.split %[[X]] {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : tensor<2x4x24xbf16>
// CHECK-DAG: loom.reshape %[[S]]#0 : tensor<2x4x8xbf16> -> tensor<2x4x2x4xbf16>
// CHECK-DAG: loom.reshape %[[S]]#1 : tensor<2x4x8xbf16> -> tensor<2x4x2x4xbf16>
// CHECK-DAG: loom.reshape %[[S]]#2 : tensor<2x4x8xbf16> -> tensor<2x4x2x4xbf16>
// CHECK: %[[Q:.*]] = loom.cast %{{.*}} : tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xf32>
// CHECK: %[[K:.*]] = loom.cast %{{.*}} : tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xf32>
// CHECK: %[[V:.*]] = loom.cast %{{.*}} : tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xf32>
// CHECK: loom.attention %[[Q]], %[[K]], %[[V]]
func.func @split_qkv(%x: tensor<2x4x24xbf16>) -> tensor<2x2x4x4xf32> {
  %0 = loom.cast %x : tensor<2x4x24xbf16> -> tensor<2x4x24xf32>
  %1:3 = loom.split %0 {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : tensor<2x4x24xf32>
  %2 = loom.reshape %1#0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %3 = loom.reshape %1#1 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %4 = loom.reshape %1#2 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %5 = loom.transpose %2 [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %6 = loom.transpose %3 [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %7 = loom.transpose %4 [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %8, %lse = loom.attention %5, %6, %7 {causal = true, scale = 5.000000e-01 : f64} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  return %8 : tensor<2x2x4x4xf32>
}

// A piece read by something else (here an element-wise op) keeps the f32
// split: sinking would add a conversion pass in front of that reader.
// CHECK-LABEL: func.func @split_other_reader
// CHECK: %[[C:.*]] = loom.cast %{{.*}} : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
// CHECK: loom.split %[[C]] {{.*}} : tensor<2x4x16xf32>
func.func @split_other_reader(%x: tensor<2x4x16xbf16>, %w: tensor<8x3xf32>) -> (tensor<2x4x3xf32>, tensor<2x4x8xf32>) {
  %0 = loom.cast %x : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %1:2 = loom.split %0 {axis = 2 : i64, sizes = array<i64: 8, 8>} : tensor<2x4x16xf32>
  %2 = loom.matmul %1#0, %w : tensor<2x4x8xf32>, tensor<8x3xf32>
  %3 = loom.neg %1#1 : tensor<2x4x8xf32>
  return %2, %3 : tensor<2x4x3xf32>, tensor<2x4x8xf32>
}
