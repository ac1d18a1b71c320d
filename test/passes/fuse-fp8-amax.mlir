// RUN: loom-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(loom-fuse-fp8-amax))" | FileCheck %s
// RUN: loom-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(loom-insert-fp8-casts,cse,loom-fuse-fp8-amax))" | FileCheck %s --check-prefix=STEP

// An rms_norm rounded to bf16 and flattened to [B T, D] for q/k/v: its
// tensorwise scale comes from the amax the norm writes beside its result
// (codegen folds the cast into the norm, the reshape into a view), not
// from a pass over the tensor. The cast still reads the tensor.
// CHECK-LABEL: func.func @norm_output
// CHECK: %[[N:.*]] = loom.rms_norm
// CHECK: %[[NB:.*]] = loom.cast %[[N]] : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
// CHECK: %[[X:.*]] = loom.reshape %[[NB]] : tensor<2x8x16xbf16> -> tensor<16x16xbf16>
// CHECK: %[[A:.*]] = loom.fp8_amax %[[X]] : tensor<16x16xbf16>
// CHECK: %[[S:.*]], %[[I:.*]] = loom.fp8_scale e4m3 %[[A]] {reduce_dims = array<i64: 0, 1>} : tensor<1x1xf32>
// CHECK: loom.fp8_cast %[[X]], %[[S]] : tensor<16x16xbf16>, tensor<1x1xf32> -> tensor<16x16xf8E4M3FN>
// CHECK-NOT: loom.fp8_scale
func.func @norm_output(%h: tensor<2x8x16xf32>, %g: tensor<16xf32>) -> (tensor<16x16xf8E4M3FN>, tensor<1x1xf32>) {
  %n = loom.rms_norm %h, %g {epsilon = 1.0e-6 : f64} : tensor<2x8x16xf32>, tensor<16xf32>
  %nb = loom.cast %n : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
  %x = loom.reshape %nb : tensor<2x8x16xbf16> -> tensor<16x16xbf16>
  %s, %inv = loom.fp8_scale e4m3 %x {reduce_dims = array<i64: 0, 1>} : tensor<16x16xbf16>
  %q = loom.fp8_cast %x, %s : tensor<16x16xbf16>, tensor<1x1xf32> -> tensor<16x16xf8E4M3FN>
  return %q, %inv : tensor<16x16xf8E4M3FN>, tensor<1x1xf32>
}

// -----

// swiglu_grad's two results (gate's and up's output gradients) each get
// their amax from the kernel; rms_norm_grad's dx too, an add's result too.
// CHECK-LABEL: func.func @backward_producers
// CHECK: %[[DG:.*]], %[[DU:.*]] = loom.swiglu_grad
// CHECK-DAG: loom.fp8_amax %[[DG]] : tensor<16x32xf32>
// CHECK-DAG: loom.fp8_amax %[[DU]] : tensor<16x32xf32>
// CHECK: %[[DX:.*]], %{{.*}} = loom.rms_norm_grad
// CHECK: loom.fp8_amax %[[DX]] : tensor<16x16xf32>
// CHECK: %[[R:.*]] = loom.add
// CHECK: loom.fp8_amax %[[R]] : tensor<16x16xf32>
// CHECK-NOT: loom.fp8_scale e4m3 %{{.*}} : tensor<16x
func.func @backward_producers(%g: tensor<16x32xf32>, %u: tensor<16x32xf32>, %dy: tensor<16x32xf32>,
                              %x: tensor<16x16xf32>, %w: tensor<16xf32>, %dn: tensor<16x16xf32>)
    -> (tensor<1x1xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<1x1xf32>) {
  %dg, %du = loom.swiglu_grad %g, %u, %dy : tensor<16x32xf32>
  %s0, %i0 = loom.fp8_scale e4m3 %dg {reduce_dims = array<i64: 0, 1>} : tensor<16x32xf32>
  %s1, %i1 = loom.fp8_scale e4m3 %du {reduce_dims = array<i64: 0, 1>} : tensor<16x32xf32>
  %dx, %dw = loom.rms_norm_grad %x, %w, %dn {epsilon = 1.0e-6 : f64} : tensor<16x16xf32>, tensor<16xf32>
  %s2, %i2 = loom.fp8_scale e4m3 %dx {reduce_dims = array<i64: 0, 1>} : tensor<16x16xf32>
  %r = loom.add %dx, %dn : tensor<16x16xf32>, tensor<16x16xf32>
  %s3, %i3 = loom.fp8_scale e4m3 %r {reduce_dims = array<i64: 0, 1>} : tensor<16x16xf32>
  return %s0, %s1, %s2, %s3 : tensor<1x1xf32>, tensor<1x1xf32>, tensor<1x1xf32>, tensor<1x1xf32>
}

// -----

// Left alone: rowwise scales (one per row needs the row's own maximum), a
// tensor no fusible kernel writes (an argument: a weight, read by its own
// scale pass), and a scale already taken from an amax.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: loom.fp8_amax
// CHECK: loom.fp8_scale e4m3 %{{.*}} {power_of_two = true, reduce_dims = array<i64: 1>} : tensor<16x16xf32>
// CHECK: loom.fp8_scale e4m3 %arg1 {reduce_dims = array<i64: 0, 1>} : tensor<16x16xf32>
func.func @not_fused(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>, %dn: tensor<16x16xf32>) -> (tensor<16x1xf32>, tensor<1x1xf32>) {
  %r = loom.add %x, %dn : tensor<16x16xf32>, tensor<16x16xf32>
  %s0, %i0 = loom.fp8_scale e4m3 %r {power_of_two = true, reduce_dims = array<i64: 1>} : tensor<16x16xf32>
  %s1, %i1 = loom.fp8_scale e4m3 %w {reduce_dims = array<i64: 0, 1>} : tensor<16x16xf32>
  return %s0, %s1 : tensor<16x1xf32>, tensor<1x1xf32>
}

// -----

// After loom-insert-fp8-casts: a linear layer fed by swiglu (down_proj):
// the activation's scale from swiglu's amax, the weight's from its own pass.
// STEP-LABEL: func.func @down_proj
// STEP: %[[Y:.*]] = loom.swiglu
// STEP: %[[YB:.*]] = loom.cast %[[Y]]
// STEP: %[[Y2:.*]] = loom.reshape %[[YB]] : tensor<2x8x32xbf16> -> tensor<16x32xbf16>
// STEP: %[[A:.*]] = loom.fp8_amax %[[Y2]]
// STEP: loom.fp8_scale e4m3 %[[A]] {reduce_dims = array<i64: 0, 1>} : tensor<1x1xf32>
// STEP: loom.fp8_scale e4m3 %arg2 {reduce_dims = array<i64: 0, 1>} : tensor<16x32xf32>
// STEP: loom.scaled_matmul
func.func @down_proj(%g: tensor<2x8x32xf32>, %u: tensor<2x8x32xf32>, %w: tensor<16x32xf32>) -> tensor<2x8x16xbf16> {
  %y = loom.swiglu %g, %u : tensor<2x8x32xf32>
  %yb = loom.cast %y : tensor<2x8x32xf32> -> tensor<2x8x32xbf16>
  %yf = loom.cast %yb : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
  %o = loom.fp8_matmul tensorwise %yf, %w {transpose_rhs = true, lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>} : tensor<2x8x32xf32>, tensor<16x32xf32>
  %r = loom.cast %o : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
  return %r : tensor<2x8x16xbf16>
}
