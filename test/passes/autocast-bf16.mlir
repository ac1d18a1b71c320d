// RUN: loom-opt %s --pass-pipeline="builtin.module(func.func(loom-autocast-bf16))" | FileCheck %s

// Matmul operands and result are rounded through bf16; rms_norm is on
// autocast's f32 list (HF's RMSNorm upcasts), so nothing rounds after it.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[XB:.*]] = loom.cast %arg0 : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK: %[[X:.*]] = loom.cast %[[XB]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK: %[[WB:.*]] = loom.cast %arg1 : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK: %[[W:.*]] = loom.cast %[[WB]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK: %[[Y:.*]] = loom.matmul %[[X]], %[[W]]
// CHECK: %[[YB:.*]] = loom.cast %[[Y]] : tensor<2x3xf32> -> tensor<2x3xbf16>
// CHECK: %[[YR:.*]] = loom.cast %[[YB]] : tensor<2x3xbf16> -> tensor<2x3xf32>
// CHECK: loom.rms_norm %[[YR]], %arg2
// CHECK-NOT: loom.cast
// CHECK: return
func.func @mlp(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %g: tensor<3xf32>) -> tensor<2x3xf32> {
  %y = loom.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %n = loom.rms_norm %y, %g {epsilon = 1.0e-6 : f64} : tensor<2x3xf32>, tensor<3xf32>
  return %n : tensor<2x3xf32>
}

// GPT-2's Conv1D is addmm: the bias is rounded and added inside the bf16
// GEMM, and only the sum is rounded (not the matmul alone). GELU of a bf16
// tensor returns bf16. The residual add meets the f32 stream and promotes
// to f32: no rounding after it.
// CHECK-LABEL: func.func @conv1d_gelu
// CHECK: %[[Y:.*]] = loom.matmul
// CHECK-NOT: loom.cast %[[Y]]
// CHECK: %[[BB:.*]] = loom.cast %arg2 : tensor<6xf32> -> tensor<6xbf16>
// CHECK: %[[B:.*]] = loom.cast %[[BB]] : tensor<6xbf16> -> tensor<6xf32>
// CHECK: %[[S:.*]] = loom.add %[[Y]], %[[B]]
// CHECK: %[[SB:.*]] = loom.cast %[[S]] : tensor<8x6xf32> -> tensor<8x6xbf16>
// CHECK: %[[SR:.*]] = loom.cast %[[SB]] : tensor<8x6xbf16> -> tensor<8x6xf32>
// CHECK: %[[G:.*]] = loom.gelu %[[SR]]
// CHECK: %[[GB:.*]] = loom.cast %[[G]] : tensor<8x6xf32> -> tensor<8x6xbf16>
// CHECK: %[[GR:.*]] = loom.cast %[[GB]] : tensor<8x6xbf16> -> tensor<8x6xf32>
// The gelu output is bf16 already: the next matmul rounds only its weight.
// CHECK-NOT: loom.cast %[[GR]]
// CHECK: loom.cast %arg3
// CHECK: %[[Z:.*]] = loom.matmul %[[GR]],
// CHECK: %[[ZB:.*]] = loom.cast %[[Z]]
// CHECK: %[[ZR:.*]] = loom.cast %[[ZB]]
// CHECK: %[[O:.*]] = loom.add %[[ZR]], %arg4
// CHECK-NOT: loom.cast
// CHECK: return %[[O]]
func.func @conv1d_gelu(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>, %b: tensor<6xf32>, %w2: tensor<6x4xf32>, %r: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %y = loom.matmul %x, %w : tensor<8x4xf32>, tensor<4x6xf32>
  %yb = loom.add %y, %b : tensor<8x6xf32>, tensor<6xf32>
  %g = loom.gelu %yb tanh : tensor<8x6xf32>
  %z = loom.matmul %g, %w2 : tensor<8x6xf32>, tensor<6x4xf32>
  %s = loom.add %z, %r : tensor<8x4xf32>, tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// A bias add whose bias is not over the last dim is an ordinary add after
// the GEMM: the matmul result is rounded, and bf16 + f32 promotes to f32.
// CHECK-LABEL: func.func @not_a_bias
// CHECK: %[[Y:.*]] = loom.matmul
// CHECK: %[[YB:.*]] = loom.cast %[[Y]]
// CHECK: %[[YR:.*]] = loom.cast %[[YB]]
// CHECK: loom.add %[[YR]], %arg2
// CHECK-NOT: loom.cast
// CHECK: return
func.func @not_a_bias(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>, %c: tensor<8x1xf32>) -> tensor<8x6xf32> {
  %y = loom.matmul %x, %w : tensor<8x4xf32>, tensor<4x6xf32>
  %s = loom.add %y, %c : tensor<8x6xf32>, tensor<8x1xf32>
  return %s : tensor<8x6xf32>
}

// Eager attention as exporters spell it: the scores leave a bf16 GEMM, the
// scalar scale keeps them bf16 (a rank-0 operand is a Python scalar), the
// f32 mask promotes them to f32, softmax runs in f32, and the probabilities
// are rounded as the second GEMM's operand.
// CHECK-LABEL: func.func @eager_attention
// CHECK: %[[S:.*]] = loom.matmul {{.*}} {transpose_rhs = true}
// CHECK: %[[SB:.*]] = loom.cast %[[S]]
// CHECK: %[[SR:.*]] = loom.cast %[[SB]]
// CHECK: %[[M:.*]] = loom.mul %[[SR]], %{{.*}} : tensor<1x2x4x4xf32>, tensor<f32>
// CHECK: %[[MB:.*]] = loom.cast %[[M]]
// CHECK: %[[MR:.*]] = loom.cast %[[MB]]
// CHECK: %[[A:.*]] = loom.add %[[MR]], %arg3
// CHECK-NEXT: %[[P:.*]] = loom.softmax %[[A]]
// CHECK-NEXT: %[[PB:.*]] = loom.cast %[[P]] : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xbf16>
// CHECK-NEXT: %[[PR:.*]] = loom.cast %[[PB]]
// CHECK-NEXT: %[[VB:.*]] = loom.cast %arg2
// CHECK-NEXT: %[[VR:.*]] = loom.cast %[[VB]]
// CHECK-NEXT: %[[O:.*]] = loom.matmul %[[PR]], %[[VR]]
// CHECK-NEXT: %[[OB:.*]] = loom.cast %[[O]]
// CHECK-NEXT: %[[OR:.*]] = loom.cast %[[OB]]
// CHECK-NEXT: return %[[OR]]
func.func @eager_attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %mask: tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %c = loom.constant dense<2.500000e-01> : tensor<f32>
  %s = loom.matmul %q, %k {transpose_rhs = true} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  %ss = loom.mul %s, %c : tensor<1x2x4x4xf32>, tensor<f32>
  %m = loom.add %ss, %mask : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>
  %p = loom.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = loom.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// SwiGLU: silu of a bf16 tensor and the bf16 * bf16 product are rounded.
// Rotary with f32 tables promotes to f32 (no rounding); data movement of a
// bf16 tensor needs none either.
// CHECK-LABEL: func.func @swiglu_rotary
// CHECK: %[[G:.*]] = loom.matmul
// CHECK: %[[GB:.*]] = loom.cast %[[G]]
// CHECK: %[[GR:.*]] = loom.cast %[[GB]]
// CHECK: %[[A:.*]] = loom.silu %[[GR]]
// CHECK: %[[AB:.*]] = loom.cast %[[A]]
// CHECK: %[[AR:.*]] = loom.cast %[[AB]]
// CHECK: %[[U:.*]] = loom.matmul
// CHECK: %[[UB:.*]] = loom.cast %[[U]]
// CHECK: %[[UR:.*]] = loom.cast %[[UB]]
// CHECK: %[[H:.*]] = loom.mul %[[AR]], %[[UR]]
// CHECK: %[[HB:.*]] = loom.cast %[[H]]
// CHECK: %[[HR:.*]] = loom.cast %[[HB]]
// CHECK: %[[T:.*]] = loom.reshape %[[HR]]
// CHECK-NEXT: %[[R:.*]] = loom.rotary %[[T]], %arg3, %arg4
// CHECK-NEXT: return %[[HR]], %[[R]]
func.func @swiglu_rotary(%x: tensor<2x4xf32>, %wg: tensor<4x8xf32>, %wu: tensor<4x8xf32>, %cos: tensor<1x1x2x8xf32>, %sin: tensor<1x1x2x8xf32>) -> (tensor<2x8xf32>, tensor<1x1x2x8xf32>) {
  %g = loom.matmul %x, %wg : tensor<2x4xf32>, tensor<4x8xf32>
  %a = loom.silu %g : tensor<2x8xf32>
  %u = loom.matmul %x, %wu : tensor<2x4xf32>, tensor<4x8xf32>
  %h = loom.mul %a, %u : tensor<2x8xf32>, tensor<2x8xf32>
  %t = loom.reshape %h : tensor<2x8xf32> -> tensor<1x1x2x8xf32>
  %r = loom.rotary %t, %cos, %sin : tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>
  return %h, %r : tensor<2x8xf32>, tensor<1x1x2x8xf32>
}

// Reductions: sum is on autocast's f32 list, mean of bf16 stays bf16.
// CHECK-LABEL: func.func @reductions
// CHECK: %[[Y:.*]] = loom.matmul
// CHECK: %[[YB:.*]] = loom.cast %[[Y]]
// CHECK: %[[YR:.*]] = loom.cast %[[YB]]
// CHECK: %[[S:.*]] = loom.reduce sum %[[YR]]
// CHECK-NEXT: %[[M:.*]] = loom.reduce mean %[[YR]]
// CHECK-NEXT: %[[MB:.*]] = loom.cast %[[M]] : tensor<2x1xf32> -> tensor<2x1xbf16>
// CHECK-NEXT: %[[MR:.*]] = loom.cast %[[MB]]
// CHECK-NEXT: return %[[S]], %[[MR]]
func.func @reductions(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>) {
  %y = loom.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %s = loom.reduce sum %y {axes = array<i64: 1>} : tensor<2x3xf32>
  %m = loom.reduce mean %y {axes = array<i64: 1>} : tensor<2x3xf32>
  return %s, %m : tensor<2x1xf32>, tensor<2x1xf32>
}

// A fused attention op is SDPA: bf16 q/k/v and output, f32 inside. Its
// logsumexp is one of the f32 statistics (SDPA saves it in f32): no cast.
// CHECK-LABEL: func.func @fused_attention
// CHECK-COUNT-6: loom.cast
// CHECK: %[[O:[^,]*]], %[[LSE:.*]] = loom.attention
// CHECK-NEXT: %[[N:.*]] = loom.cast %[[O]] : tensor<1x2x4x8xf32> -> tensor<1x2x4x8xbf16>
// CHECK-NEXT: %[[W:.*]] = loom.cast %[[N]] : tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[W]], %[[LSE]] : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
func.func @fused_attention(%q: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {
  %a, %lse = loom.attention %q, %q, %q {causal = true, scale = 0.35 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return %a, %lse : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
}
