// RUN: loom-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(loom-insert-fp8-casts,cse))" | FileCheck %s

// A linear layer's forward product under tensorwise scaling, as the step
// holds it after autocast and SinkWideningCasts: the activation is read as
// bf16, flattened to [B T, K], scaled by its amax and cast K-major; the
// weight stored [K, N] is cast transposed to [N, K]; the GEMM takes both
// K-major (transpose_rhs), dequantizes by the inverses, and writes the
// bf16 the result was rounded to, in the layer's [B, T, N] shape.
// CHECK-LABEL: func.func @forward_tensorwise
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xbf16>, %[[W:.*]]: tensor<16x32xf32>)
// CHECK: %[[X2:.*]] = loom.reshape %[[X]] : tensor<2x8x16xbf16> -> tensor<16x16xbf16>
// CHECK: %[[SX:.*]], %[[IX:.*]] = loom.fp8_scale e4m3 %[[X2]] {reduce_dims = array<i64: 0, 1>} : tensor<16x16xbf16>
// CHECK: %[[QX:.*]] = loom.fp8_cast %[[X2]], %[[SX]] : tensor<16x16xbf16>, tensor<1x1xf32> -> tensor<16x16xf8E4M3FN>
// CHECK: %[[SW:.*]], %[[IW:.*]] = loom.fp8_scale e4m3 %[[W]] {reduce_dims = array<i64: 0, 1>} : tensor<16x32xf32>
// CHECK: %[[QW:.*]] = loom.fp8_cast %[[W]], %[[SW]] {transpose = true} : tensor<16x32xf32>, tensor<1x1xf32> -> tensor<32x16xf8E4M3FN>
// CHECK: %[[Y:.*]] = loom.scaled_matmul %[[QX]], %[[QW]], %[[IX]], %[[IW]] {fast_accum = true, transpose_rhs = true}
// CHECK-SAME: : tensor<16x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<1x1xf32>, tensor<1x1xf32> -> tensor<2x8x32xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @forward_tensorwise(%x: tensor<2x8x16xbf16>, %w: tensor<16x32xf32>) -> tensor<2x8x32xbf16> {
  %xf = loom.cast %x : tensor<2x8x16xbf16> -> tensor<2x8x16xf32>
  %y = loom.fp8_matmul tensorwise %xf, %w {fast_accum = true, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>} : tensor<2x8x16xf32>, tensor<16x32xf32>
  %r = loom.cast %y : tensor<2x8x32xf32> -> tensor<2x8x32xbf16>
  return %r : tensor<2x8x32xbf16>
}

// -----

// The forward product and the two the gradient rule built (dx = dy W^T,
// dW = x^T dy), rowwise: every operand is scaled per row of its K-major
// copy, with power-of-two scales. x enters the forward per row ([16, 1])
// and the weight gradient per column ([1, 16], whose inverse is viewed as
// [16, 1] of the transposed copy); dy likewise. The copies of x and dy are
// made right after those values are (where CSE can share them), the
// weight's (a block argument) right before each product. Results that are
// not rounded stay f32.
// CHECK-LABEL: func.func @rowwise_step
// CHECK-SAME: (%[[XIN:.*]]: tensor<16x16xbf16>, %[[W:.*]]: tensor<16x32xf32>, %[[DYIN:.*]]: tensor<16x32xbf16>)
// CHECK: %[[X:.*]] = loom.neg %[[XIN]]
// CHECK-DAG: %[[SXC:.*]], %[[IXC:.*]] = loom.fp8_scale e4m3 %[[X]] {power_of_two = true, reduce_dims = array<i64: 0>} : tensor<16x16xbf16>
// CHECK-DAG: %[[QXT:.*]] = loom.fp8_cast %[[X]], %[[SXC]] {transpose = true} : tensor<16x16xbf16>, tensor<1x16xf32> -> tensor<16x16xf8E4M3FN>
// CHECK-DAG: %[[IXCT:.*]] = loom.reshape %[[IXC]] : tensor<1x16xf32> -> tensor<16x1xf32>
// CHECK-DAG: %[[SXR:.*]], %[[IXR:.*]] = loom.fp8_scale e4m3 %[[X]] {power_of_two = true, reduce_dims = array<i64: 1>} : tensor<16x16xbf16>
// CHECK-DAG: %[[QX:.*]] = loom.fp8_cast %[[X]], %[[SXR]] : tensor<16x16xbf16>, tensor<16x1xf32> -> tensor<16x16xf8E4M3FN>
// CHECK: %[[SWC:.*]], %[[IWC:.*]] = loom.fp8_scale e4m3 %[[W]] {power_of_two = true, reduce_dims = array<i64: 0>} : tensor<16x32xf32>
// CHECK: %[[QWT:.*]] = loom.fp8_cast %[[W]], %[[SWC]] {transpose = true} : tensor<16x32xf32>, tensor<1x32xf32> -> tensor<32x16xf8E4M3FN>
// CHECK: %[[IWCT:.*]] = loom.reshape %[[IWC]] : tensor<1x32xf32> -> tensor<32x1xf32>
// CHECK: %[[Y:.*]] = loom.scaled_matmul %[[QX]], %[[QWT]], %[[IXR]], %[[IWCT]] {fast_accum = true, transpose_rhs = true}
// CHECK-SAME: tensor<16x1xf32>, tensor<32x1xf32> -> tensor<16x32xf32>
// CHECK: %[[DY:.*]] = loom.neg %[[DYIN]]
// CHECK-DAG: %[[SDC:.*]], %[[IDC:.*]] = loom.fp8_scale e4m3 %[[DY]] {power_of_two = true, reduce_dims = array<i64: 0>} : tensor<16x32xbf16>
// CHECK-DAG: %[[QDT:.*]] = loom.fp8_cast %[[DY]], %[[SDC]] {transpose = true} : tensor<16x32xbf16>, tensor<1x32xf32> -> tensor<32x16xf8E4M3FN>
// CHECK-DAG: %[[IDCT:.*]] = loom.reshape %[[IDC]] : tensor<1x32xf32> -> tensor<32x1xf32>
// CHECK-DAG: %[[SDR:.*]], %[[IDR:.*]] = loom.fp8_scale e4m3 %[[DY]] {power_of_two = true, reduce_dims = array<i64: 1>} : tensor<16x32xbf16>
// CHECK-DAG: %[[QD:.*]] = loom.fp8_cast %[[DY]], %[[SDR]] : tensor<16x32xbf16>, tensor<16x1xf32> -> tensor<16x32xf8E4M3FN>
// CHECK: %[[SWR:.*]], %[[IWR:.*]] = loom.fp8_scale e4m3 %[[W]] {power_of_two = true, reduce_dims = array<i64: 1>} : tensor<16x32xf32>
// CHECK: %[[QW:.*]] = loom.fp8_cast %[[W]], %[[SWR]] : tensor<16x32xf32>, tensor<16x1xf32> -> tensor<16x32xf8E4M3FN>
// CHECK: %[[DX:.*]] = loom.scaled_matmul %[[QD]], %[[QW]], %[[IDR]], %[[IWR]] {transpose_rhs = true}
// CHECK-SAME: -> tensor<16x16xf32>
// CHECK: %[[DW:.*]] = loom.scaled_matmul %[[QXT]], %[[QDT]], %[[IXCT]], %[[IDCT]] {transpose_rhs = true}
// CHECK-SAME: tensor<16x1xf32>, tensor<32x1xf32> -> tensor<16x32xf32>
// CHECK: return %[[Y]], %[[DX]], %[[DW]]
func.func @rowwise_step(%xin: tensor<16x16xbf16>, %w: tensor<16x32xf32>, %dyin: tensor<16x32xbf16>)
    -> (tensor<16x32xf32>, tensor<16x16xf32>, tensor<16x32xf32>) {
  %x = loom.neg %xin : tensor<16x16xbf16>
  %xf = loom.cast %x : tensor<16x16xbf16> -> tensor<16x16xf32>
  %y = loom.fp8_matmul rowwise %xf, %w {fast_accum = true, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>} : tensor<16x16xf32>, tensor<16x32xf32>
  %dy = loom.neg %dyin : tensor<16x32xbf16>
  %dyf = loom.cast %dy : tensor<16x32xbf16> -> tensor<16x32xf32>
  %dx = loom.fp8_matmul rowwise %dyf, %w {lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>, transpose_rhs = true} : tensor<16x32xf32>, tensor<16x32xf32>
  %dw = loom.fp8_matmul rowwise %xf, %dyf {lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>, transpose_lhs = true} : tensor<16x16xf32>, tensor<16x32xf32>
  return %y, %dx, %dw : tensor<16x32xf32>, tensor<16x16xf32>, tensor<16x32xf32>
}

// -----

// Tensorwise, a tensor entering products both ways has one scale: q, k
// and v of one input share one quantized copy (CSE), and the weight
// gradient's transposed copy of x reuses the forward's scale.
// CHECK-LABEL: func.func @shared_input
// CHECK: %[[X:.*]] = loom.neg
// CHECK-NEXT: %[[S:.*]], %[[I:.*]] = loom.fp8_scale e4m3 %[[X]] {reduce_dims = array<i64: 0, 1>}
// CHECK-NEXT: %[[QT:.*]] = loom.fp8_cast %[[X]], %[[S]] {transpose = true}
// CHECK-NEXT: %[[Q:.*]] = loom.fp8_cast %[[X]], %[[S]] :
// CHECK-NOT: loom.fp8_cast %[[X]]
// CHECK: loom.scaled_matmul %[[Q]], %{{.*}}, %[[I]]
// CHECK: loom.scaled_matmul %[[Q]], %{{.*}}, %[[I]]
// CHECK: loom.scaled_matmul %[[QT]], %{{.*}}, %[[I]]
func.func @shared_input(%xin: tensor<8x16xbf16>, %wq: tensor<16x16xf32>, %wk: tensor<16x16xf32>,
                        %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) {
  %x = loom.neg %xin : tensor<8x16xbf16>
  %xf = loom.cast %x : tensor<8x16xbf16> -> tensor<8x16xf32>
  %q = loom.fp8_matmul tensorwise %xf, %wq {lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>} : tensor<8x16xf32>, tensor<16x16xf32>
  %k = loom.fp8_matmul tensorwise %xf, %wk {lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>} : tensor<8x16xf32>, tensor<16x16xf32>
  %dw = loom.fp8_matmul tensorwise %xf, %dy {lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>, transpose_lhs = true} : tensor<8x16xf32>, tensor<8x16xf32>
  return %q, %k, %dw : tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>
}
