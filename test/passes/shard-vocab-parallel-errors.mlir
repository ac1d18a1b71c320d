// RUN: not loom-opt %s --split-input-file --loom-shard-vocab-parallel=tp=3 2>&1 | FileCheck %s

// A vocabulary that does not divide by tp, and logits that are not a
// matmul by a weight, are refused with the plan switch that avoids them.
// CHECK: error: loss parallelism: the vocabulary 8 does not divide by tp=3 (plan loss_parallel=off keeps the head whole)
func.func @forward(%tok: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %wte = loom.constant {param = #loom.param<"wte">} dense<0.5> : tensor<8x3xf32>
  %x = loom.embedding %wte, %tok : tensor<8x3xf32>, tensor<1x4xi64>
  %l = loom.matmul %x, %wte {transpose_rhs = true} : tensor<1x4x3xf32>, tensor<8x3xf32>
  return %l : tensor<1x4x8xf32>
}

// -----

// CHECK: error: loss parallelism: the logits are not a matmul by a parameter weight (plan loss_parallel=off keeps the head whole)
func.func @forward(%tok: tensor<1x4xi64>) -> tensor<1x4x9xf32> {
  %wte = loom.constant {param = #loom.param<"wte">} dense<0.5> : tensor<8x9xf32>
  %x = loom.embedding %wte, %tok : tensor<8x9xf32>, tensor<1x4xi64>
  %l = loom.silu %x : tensor<1x4x9xf32>
  return %l : tensor<1x4x9xf32>
}
