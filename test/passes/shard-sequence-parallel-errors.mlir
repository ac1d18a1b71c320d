// RUN: not loom-opt %s --split-input-file --loom-shard-tensor-parallel=tp=2 --loom-shard-sequence-parallel=tp=2 2>&1 | FileCheck %s

// Sequence parallelism gathers into tensor-parallel regions; a model whose
// layers tp could not split has none.
// CHECK: error: sequence parallelism: tensor parallelism split no layer to gather into
func.func @forward(%tok: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x8xf32>
  %x = loom.embedding %emb, %tok : tensor<8x8xf32>, tensor<1x4xi64>
  %w = loom.constant {param = #loom.param<"up">} dense<0.5> : tensor<8x8xf32>
  %h = loom.matmul %x, %w : tensor<1x4x8xf32>, tensor<8x8xf32>
  return %h : tensor<1x4x8xf32>
}

// -----

// The sequence must divide by tp.
// CHECK: error: sequence parallelism: the sequence of 3 tokens does not divide by tp=2
func.func @forward(%tok: tensor<1x3xi64>) -> tensor<1x3x8xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<8x8xf32>
  %x = loom.embedding %emb, %tok : tensor<8x8xf32>, tensor<1x3xi64>
  %w1 = loom.constant {param = #loom.param<"up">} dense<0.5> : tensor<8x8xf32>
  %w2 = loom.constant {param = #loom.param<"down">} dense<0.5> : tensor<8x8xf32>
  %h = loom.matmul %x, %w1 : tensor<1x3x8xf32>, tensor<8x8xf32>
  %s = loom.silu %h : tensor<1x3x8xf32>
  %y = loom.matmul %s, %w2 : tensor<1x3x8xf32>, tensor<8x8xf32>
  return %y : tensor<1x3x8xf32>
}
