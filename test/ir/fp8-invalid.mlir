// RUN: loom-opt %s -split-input-file -verify-diagnostics

func.func @fp8_matmul_rhs_rank(%x: tensor<2x3x8xf32>, %w: tensor<1x8x4xf32>) {
  // expected-error@+1 {{lhs needs rank >= 2 and rhs rank 2 (a linear layer's weight)}}
  %y = loom.fp8_matmul tensorwise %x, %w {lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>} : tensor<2x3x8xf32>, tensor<1x8x4xf32>
  return
}

// -----

func.func @fp8_matmul_bf16(%x: tensor<3x8xbf16>, %w: tensor<8x4xbf16>) {
  // expected-error@+1 {{operands must be f32 (the values fp8 rounds)}}
  %y = loom.fp8_matmul tensorwise %x, %w {lhs_format = #loom<fp8_format e4m3>, rhs_format = #loom<fp8_format e4m3>, grad_format = #loom<fp8_format e4m3>} : tensor<3x8xbf16>, tensor<8x4xbf16>
  return
}

// -----

func.func @fp8_scale_dims(%x: tensor<3x8xf32>) {
  // expected-error@+1 {{reduce_dims must be [0, 1] (per tensor), [1] (per row) or [0] (per column), got [1x0]}}
  %s, %i = loom.fp8_scale e4m3 %x {reduce_dims = array<i64: 1, 0>} : tensor<3x8xf32>
  return
}

// -----

func.func @fp8_cast_shape(%x: tensor<3x8xbf16>, %s: tensor<1x1xf32>) {
  // expected-error@+1 {{result shape [3x8] should be [8x3] (transposed)}}
  %q = loom.fp8_cast %x, %s {transpose = true} : tensor<3x8xbf16>, tensor<1x1xf32> -> tensor<3x8xf8E4M3FN>
  return
}

// -----

func.func @fp8_cast_scale(%x: tensor<3x8xbf16>, %s: tensor<3x8xf32>) {
  // expected-error@+1 {{is not one per tensor, row or column}}
  %q = loom.fp8_cast %x, %s : tensor<3x8xbf16>, tensor<3x8xf32> -> tensor<3x8xf8E5M2>
  return
}

// -----

func.func @fp8_cast_to_bf16(%x: tensor<3x8xf32>, %s: tensor<1x1xf32>) {
  // expected-error@+1 {{must be ranked tensor of f8E4M3FN type or f8E5M2 type values}}
  %q = loom.fp8_cast %x, %s : tensor<3x8xf32>, tensor<1x1xf32> -> tensor<3x8xbf16>
  return
}

// -----

func.func @scaled_matmul_scales(%a: tensor<4x16xf8E4M3FN>, %b: tensor<8x16xf8E4M3FN>,
                                %sa: tensor<1x4xf32>, %sb: tensor<8x1xf32>) {
  // expected-error@+1 {{lhs_inverse 'tensor<1x4xf32>' should be [1x1] or [4x1]}}
  %y = loom.scaled_matmul %a, %b, %sa, %sb {transpose_rhs = true} : tensor<4x16xf8E4M3FN>, tensor<8x16xf8E4M3FN>, tensor<1x4xf32>, tensor<8x1xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @scaled_matmul_k(%a: tensor<4x16xf8E4M3FN>, %b: tensor<8x32xf8E4M3FN>,
                           %s: tensor<1x1xf32>) {
  // expected-error@+1 {{contracting dims differ (16 vs 32)}}
  %y = loom.scaled_matmul %a, %b, %s, %s {transpose_rhs = true} : tensor<4x16xf8E4M3FN>, tensor<8x32xf8E4M3FN>, tensor<1x1xf32>, tensor<1x1xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @scaled_matmul_result(%a: tensor<4x16xf8E4M3FN>, %b: tensor<8x16xf8E4M3FN>,
                                %s: tensor<1x1xf32>) {
  // expected-error@+1 {{result should be [4x8] or [...x8] of 4 rows}}
  %y = loom.scaled_matmul %a, %b, %s, %s {transpose_rhs = true} : tensor<4x16xf8E4M3FN>, tensor<8x16xf8E4M3FN>, tensor<1x1xf32>, tensor<1x1xf32> -> tensor<3x8xf32>
  return
}
