// RUN: loom-opt %s --loom-fuse-activations | FileCheck %s

// CHECK-LABEL: func.func @silu
// CHECK-NEXT: %[[R:.*]] = loom.silu %arg0 : tensor<2x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @silu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = loom.sigmoid %x : tensor<2x8xf32>
  %y = loom.mul %s, %x : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// A sigmoid of another value is not silu.
// CHECK-LABEL: func.func @not_silu
// CHECK: loom.sigmoid
// CHECK-NOT: loom.silu
func.func @not_silu(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = loom.sigmoid %z : tensor<2x8xf32>
  %y = loom.mul %x, %s : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// GPT-2's gelu_new, as torch.onnx exports it.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NEXT: %[[R:.*]] = loom.gelu %arg0 tanh : tensor<2x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @gelu_tanh(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = loom.constant dense<0.5> : tensor<f32>
  %three = loom.constant dense<3.0> : tensor<f32>
  %c = loom.constant dense<0.044715> : tensor<f32>
  %k = loom.constant dense<0.797884583> : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %a = loom.mul %x, %half : tensor<2x8xf32>, tensor<f32>
  %p = loom.pow %x, %three : tensor<2x8xf32>, tensor<f32>
  %pc = loom.mul %p, %c : tensor<2x8xf32>, tensor<f32>
  %s = loom.add %x, %pc : tensor<2x8xf32>, tensor<2x8xf32>
  %sk = loom.mul %s, %k : tensor<2x8xf32>, tensor<f32>
  %t = loom.tanh %sk : tensor<2x8xf32>
  %t1 = loom.add %t, %one : tensor<2x8xf32>, tensor<f32>
  %y = loom.mul %a, %t1 : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// A wrong coefficient (0.05 instead of 0.044715) is some other function.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: loom.gelu
func.func @not_gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = loom.constant dense<0.5> : tensor<f32>
  %three = loom.constant dense<3.0> : tensor<f32>
  %c = loom.constant dense<0.05> : tensor<f32>
  %k = loom.constant dense<0.797884583> : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %a = loom.mul %x, %half : tensor<2x8xf32>, tensor<f32>
  %p = loom.pow %x, %three : tensor<2x8xf32>, tensor<f32>
  %pc = loom.mul %p, %c : tensor<2x8xf32>, tensor<f32>
  %s = loom.add %x, %pc : tensor<2x8xf32>, tensor<2x8xf32>
  %sk = loom.mul %s, %k : tensor<2x8xf32>, tensor<f32>
  %t = loom.tanh %sk : tensor<2x8xf32>
  %t1 = loom.add %t, %one : tensor<2x8xf32>, tensor<f32>
  %y = loom.mul %a, %t1 : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// Llama's gated feed-forward as exported: silu spelled out, then the up
// projection's product.
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT: %[[R:.*]] = loom.swiglu %arg0, %arg1 : tensor<2x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @swiglu(%gate: tensor<2x8xf32>, %up: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = loom.sigmoid %gate : tensor<2x8xf32>
  %a = loom.mul %gate, %s : tensor<2x8xf32>, tensor<2x8xf32>
  %y = loom.mul %up, %a : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// A silu that is also read elsewhere stays: its values are in memory anyway.
// CHECK-LABEL: func.func @silu_read_twice
// CHECK: loom.silu
// CHECK: loom.mul
// CHECK-NOT: loom.swiglu
func.func @silu_read_twice(%gate: tensor<2x8xf32>, %up: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %a = loom.silu %gate : tensor<2x8xf32>
  %y = loom.mul %a, %up : tensor<2x8xf32>, tensor<2x8xf32>
  return %y, %a : tensor<2x8xf32>, tensor<2x8xf32>
}

// A broadcast factor is not a gate.
// CHECK-LABEL: func.func @silu_times_broadcast
// CHECK-NOT: loom.swiglu
func.func @silu_times_broadcast(%gate: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  %a = loom.silu %gate : tensor<2x8xf32>
  %y = loom.mul %a, %w : tensor<2x8xf32>, tensor<8xf32>
  return %y : tensor<2x8xf32>
}

// The exact GELU spelled out with erf (older exports, hand-written models),
// dividing by sqrt(2) or multiplying by 1/sqrt(2).
// CHECK-LABEL: func.func @gelu_erf
// CHECK-NEXT: %[[A:.*]] = loom.gelu %arg0 erf : tensor<2x8xf32>
// CHECK-NEXT: %[[B:.*]] = loom.gelu %arg0 erf : tensor<2x8xf32>
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @gelu_erf(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %half = loom.constant dense<0.5> : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %sqrt2 = loom.constant dense<1.41421354> : tensor<f32>
  %rsqrt2 = loom.constant dense<0.707106769> : tensor<f32>
  %h = loom.mul %x, %half : tensor<2x8xf32>, tensor<f32>
  %d = loom.div %x, %sqrt2 : tensor<2x8xf32>, tensor<f32>
  %e = loom.erf %d : tensor<2x8xf32>
  %p = loom.add %e, %one : tensor<2x8xf32>, tensor<f32>
  %y = loom.mul %h, %p : tensor<2x8xf32>, tensor<2x8xf32>
  %m = loom.mul %x, %rsqrt2 : tensor<2x8xf32>, tensor<f32>
  %e2 = loom.erf %m : tensor<2x8xf32>
  %p2 = loom.add %one, %e2 : tensor<f32>, tensor<2x8xf32>
  %y2 = loom.mul %p2, %h : tensor<2x8xf32>, tensor<2x8xf32>
  return %y, %y2 : tensor<2x8xf32>, tensor<2x8xf32>
}

// erf of a different value is not the GELU of x.
// CHECK-LABEL: func.func @not_gelu_erf
// CHECK-NOT: loom.gelu
func.func @not_gelu_erf(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = loom.constant dense<0.5> : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %sqrt2 = loom.constant dense<1.41421354> : tensor<f32>
  %h = loom.mul %x, %half : tensor<2x8xf32>, tensor<f32>
  %d = loom.div %z, %sqrt2 : tensor<2x8xf32>, tensor<f32>
  %e = loom.erf %d : tensor<2x8xf32>
  %p = loom.add %e, %one : tensor<2x8xf32>, tensor<f32>
  %y = loom.mul %h, %p : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
