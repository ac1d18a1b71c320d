// RUN: loom-opt %s --loom-fuse-attention | FileCheck %s

// Eager GQA attention as HF Llama exports it: repeat_kv on k and v, k
// transposed, scaled, causal mask added, softmax, times v.
// CHECK-LABEL: func.func @gqa_causal
// The fused op's second result, lse, has no reader until autodiff.
// CHECK: %[[R:[^,]*]], %{{.*}} = loom.attention %arg0, %arg1, %arg2 {causal = true, scale = 2.500000e-01 : f64} : tensor<1x4x3x16xf32>, tensor<1x2x3x16xf32>, tensor<1x2x3x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @gqa_causal(%q: tensor<1x4x3x16xf32>, %k: tensor<1x2x3x16xf32>, %v: tensor<1x2x3x16xf32>) -> tensor<1x4x3x16xf32> {
  %mask = loom.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %scale = loom.constant dense<0.25> : tensor<f32>
  %k1 = loom.reshape %k : tensor<1x2x3x16xf32> -> tensor<1x2x1x3x16xf32>
  %k2 = loom.expand %k1 : tensor<1x2x1x3x16xf32> -> tensor<1x2x2x3x16xf32>
  %k3 = loom.reshape %k2 : tensor<1x2x2x3x16xf32> -> tensor<1x4x3x16xf32>
  %v1 = loom.reshape %v : tensor<1x2x3x16xf32> -> tensor<1x2x1x3x16xf32>
  %v2 = loom.expand %v1 : tensor<1x2x1x3x16xf32> -> tensor<1x2x2x3x16xf32>
  %v3 = loom.reshape %v2 : tensor<1x2x2x3x16xf32> -> tensor<1x4x3x16xf32>
  %kt = loom.transpose %k3 [0, 1, 3, 2] : tensor<1x4x3x16xf32>
  %s = loom.matmul %q, %kt : tensor<1x4x3x16xf32>, tensor<1x4x16x3xf32>
  %ss = loom.mul %s, %scale : tensor<1x4x3x3xf32>, tensor<f32>
  %sm = loom.add %ss, %mask : tensor<1x4x3x3xf32>, tensor<1x1x3x3xf32>
  %p = loom.softmax %sm {axis = 3 : i64} : tensor<1x4x3x3xf32>
  %o = loom.matmul %p, %v3 : tensor<1x4x3x3xf32>, tensor<1x4x3x16xf32>
  return %o : tensor<1x4x3x16xf32>
}

// GPT-2 style: k^T straight from [B, T, H, D] by one transpose, scale by
// division, no GQA; the fused op reads k through a [0, 2, 1, 3] transpose.
// CHECK-LABEL: func.func @gpt2_style
// CHECK: %[[K:.*]] = loom.transpose %arg1 [0, 2, 1, 3]
// CHECK: loom.attention %arg0, %[[K]], %arg2 {causal = true, scale = 2.500000e-01 : f64}
func.func @gpt2_style(%q: tensor<1x2x2x16xf32>, %kbthd: tensor<1x2x2x16xf32>, %v: tensor<1x2x2x16xf32>) -> tensor<1x2x2x16xf32> {
  %mask = loom.constant dense<[[[[0.0, 0xFF800000], [0.0, 0.0]]]]> : tensor<1x1x2x2xf32>
  %d = loom.constant dense<4.0> : tensor<f32>
  %kt = loom.transpose %kbthd [0, 2, 3, 1] : tensor<1x2x2x16xf32>
  %s = loom.matmul %q, %kt : tensor<1x2x2x16xf32>, tensor<1x2x16x2xf32>
  %ss = loom.div %s, %d : tensor<1x2x2x2xf32>, tensor<f32>
  %sm = loom.add %mask, %ss : tensor<1x1x2x2xf32>, tensor<1x2x2x2xf32>
  %p = loom.softmax %sm {axis = 3 : i64} : tensor<1x2x2x2xf32>
  %o = loom.matmul %p, %v : tensor<1x2x2x2xf32>, tensor<1x2x2x16xf32>
  return %o : tensor<1x2x2x16xf32>
}

// Without a mask the attention is bidirectional.
// CHECK-LABEL: func.func @no_mask
// CHECK: loom.attention %arg0, %arg1, %arg2 {causal = false, scale = 1.000000e+00 : f64}
func.func @no_mask(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x2x4xf32>, %v: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %s = loom.matmul %q, %k {transpose_rhs = true} : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
  %p = loom.softmax %s {axis = 3 : i64} : tensor<1x1x2x2xf32>
  %o = loom.matmul %p, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// A mask that is not causal (here: hides the diagonal) stays unfused.
// CHECK-LABEL: func.func @other_mask
// CHECK-NOT: loom.attention
// CHECK: loom.softmax
func.func @other_mask(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x2x4xf32>, %v: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %mask = loom.constant dense<[[[[-3.40282347E+38, -3.40282347E+38], [0.0, -3.40282347E+38]]]]> : tensor<1x1x2x2xf32>
  %s = loom.matmul %q, %k {transpose_rhs = true} : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
  %sm = loom.add %s, %mask : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
  %p = loom.softmax %sm {axis = 3 : i64} : tensor<1x1x2x2xf32>
  %o = loom.matmul %p, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// Mistral's sliding window: with window 2 over 4 positions, query i sees
// keys i - 1 and i. The mask becomes the op's window.
// CHECK-LABEL: func.func @sliding_window
// CHECK: loom.attention %arg0, %arg1, %arg2 {causal = true, scale = 5.000000e-01 : f64, window = 2 : i64}
func.func @sliding_window(%q: tensor<1x1x4x4xf32>, %k: tensor<1x1x4x4xf32>, %v: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %m = loom.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0xFF800000, 0.0, 0.0, 0xFF800000], [0xFF800000, 0xFF800000, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %c = loom.constant dense<0.5> : tensor<f32>
  %s = loom.matmul %q, %k {transpose_rhs = true} : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
  %ss = loom.mul %s, %c : tensor<1x1x4x4xf32>, tensor<f32>
  %sm = loom.add %ss, %m : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
  %p = loom.softmax %sm {axis = 3 : i64} : tensor<1x1x4x4xf32>
  %o = loom.matmul %p, %v : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
  return %o : tensor<1x1x4x4xf32>
}

// Gemma 2: scale, then softcap * tanh(scores / softcap), then the mask.
// CHECK-LABEL: func.func @softcapped
// CHECK: loom.attention %arg0, %arg1, %arg2 {causal = true, scale = 5.000000e-01 : f64, softcap = 5.000000e+01 : f64}
func.func @softcapped(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x2x4xf32>, %v: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %m = loom.constant dense<[[[[0.0, 0xFF800000], [0.0, 0.0]]]]> : tensor<1x1x2x2xf32>
  %c = loom.constant dense<0.5> : tensor<f32>
  %cap = loom.constant dense<50.0> : tensor<f32>
  %s = loom.matmul %q, %k {transpose_rhs = true} : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
  %ss = loom.mul %s, %c : tensor<1x1x2x2xf32>, tensor<f32>
  %d = loom.div %ss, %cap : tensor<1x1x2x2xf32>, tensor<f32>
  %t = loom.tanh %d : tensor<1x1x2x2xf32>
  %sc = loom.mul %t, %cap : tensor<1x1x2x2xf32>, tensor<f32>
  %sm = loom.add %sc, %m : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
  %p = loom.softmax %sm {axis = 3 : i64} : tensor<1x1x2x2xf32>
  %o = loom.matmul %p, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// tanh with a different cap inside and outside is not a softcap: unfused.
// CHECK-LABEL: func.func @not_a_softcap
// CHECK-NOT: loom.attention
// CHECK: loom.softmax
func.func @not_a_softcap(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x2x4xf32>, %v: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %a = loom.constant dense<50.0> : tensor<f32>
  %b = loom.constant dense<30.0> : tensor<f32>
  %s = loom.matmul %q, %k {transpose_rhs = true} : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
  %d = loom.div %s, %a : tensor<1x1x2x2xf32>, tensor<f32>
  %t = loom.tanh %d : tensor<1x1x2x2xf32>
  %sc = loom.mul %t, %b : tensor<1x1x2x2xf32>, tensor<f32>
  %p = loom.softmax %sc {axis = 3 : i64} : tensor<1x1x2x2xf32>
  %o = loom.matmul %p, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// The mask as a select: where(visible, scores, -inf), and masked_fill's
// where(hidden, -inf, scores), with a window of 2 over 3 positions.
// CHECK-LABEL: func.func @where_masks
// CHECK: loom.attention %arg0, %arg1, %arg2 {causal = true, scale = 1.000000e+00 : f64}
// CHECK: loom.attention %arg0, %arg1, %arg2 {causal = true, scale = 1.000000e+00 : f64, window = 2 : i64}
func.func @where_masks(%q: tensor<1x1x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>) -> (tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>) {
  %visible = loom.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %hidden = loom.constant dense<[[[[false, true, true], [false, false, true], [true, false, false]]]]> : tensor<1x1x3x3xi1>
  %ninf = loom.constant dense<0xFF800000> : tensor<f32>
  %s = loom.matmul %q, %k {transpose_rhs = true} : tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>
  %m1 = loom.where %visible, %s, %ninf : tensor<1x1x3x3xi1>, tensor<1x1x3x3xf32>, tensor<f32>
  %p1 = loom.softmax %m1 {axis = 3 : i64} : tensor<1x1x3x3xf32>
  %o1 = loom.matmul %p1, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>
  %m2 = loom.where %hidden, %ninf, %s : tensor<1x1x3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32>
  %p2 = loom.softmax %m2 {axis = 3 : i64} : tensor<1x1x3x3xf32>
  %o2 = loom.matmul %p2, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>
  return %o1, %o2 : tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>
}
