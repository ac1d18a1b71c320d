// RUN: not loom-opt %s --split-input-file --loom-shard-context-parallel=cp=3 2>&1 | FileCheck %s

// The sequence must cut into 2 cp equal chunks.
// CHECK: error: context parallelism: the sequence length 8 does not divide into 2 x cp = 6 load-balanced chunks
func.func @forward(%tok: tensor<1x8xi64>) -> tensor<1x8x4xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<4x4xf32>
  %x = loom.embedding %emb, %tok : tensor<4x4xf32>, tensor<1x8xi64>
  return %x : tensor<1x8x4xf32>
}

// -----

// An op that mixes positions outside attention cannot be split.
// CHECK: error: context parallelism: cannot split the sequence (dim 1 of 'tensor<1x6x4xf32>') through loom.reduce
func.func @forward(%tok: tensor<1x6xi64>) -> tensor<1x1x4xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<4x4xf32>
  %x = loom.embedding %emb, %tok : tensor<4x4xf32>, tensor<1x6xi64>
  %m = loom.reduce mean %x {axes = array<i64: 1>} : tensor<1x6x4xf32>
  return %m : tensor<1x1x4xf32>
}

// -----

// The chunk layout balances a causal mask; bidirectional attention is refused.
// CHECK: error: context parallelism: attention is not causal
func.func @forward(%tok: tensor<1x6xi64>) -> tensor<1x1x6x4xf32> {
  %emb = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<4x4xf32>
  %x = loom.embedding %emb, %tok : tensor<4x4xf32>, tensor<1x6xi64>
  %x4 = loom.reshape %x : tensor<1x6x4xf32> -> tensor<1x1x6x4xf32>
  %a, %lse = loom.attention %x4, %x4, %x4 {causal = false, scale = 0.5 : f64} : tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>
  return %a : tensor<1x1x6x4xf32>
}
