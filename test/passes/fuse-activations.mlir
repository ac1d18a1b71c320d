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
