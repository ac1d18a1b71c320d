// RUN: loom-opt %s --split-input-file --loom-fuse-global-sum-squares | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-fuse-global-sum-squares --loom-fuse-global-sum-squares | FileCheck %s

// The gradient norm's chain over three gradients becomes one op, in the
// chain's order, where the last add was; the running sum may be either
// operand of an add.
// CHECK-LABEL: func.func @norm_chain
// CHECK-SAME: (%[[G1:[^:]*]]: tensor<4x8xf32>, %[[G2:[^:]*]]: tensor<8xf32>, %[[G3:[^:]*]]: tensor<2x2xf32>
// CHECK-NOT: loom.sum_squares
// CHECK-NOT: loom.add
// CHECK: %[[S:.*]] = loom.global_sum_squares %[[G1]], %[[G2]], %[[G3]] : tensor<4x8xf32>, tensor<8xf32>, tensor<2x2xf32> -> tensor<f32>
// CHECK-NEXT: %[[N:.*]] = loom.sqrt %[[S]]
// CHECK-NEXT: return %[[N]]
func.func @norm_chain(%g1: tensor<4x8xf32>, %g2: tensor<8xf32>, %g3: tensor<2x2xf32>) -> tensor<f32> {
  %s1 = loom.sum_squares %g1 : tensor<4x8xf32>
  %s2 = loom.sum_squares %g2 : tensor<8xf32>
  %s3 = loom.sum_squares %g3 : tensor<2x2xf32>
  %a = loom.add %s1, %s2 : tensor<f32>, tensor<f32>
  %b = loom.add %s3, %a : tensor<f32>, tensor<f32>
  %n = loom.sqrt %b : tensor<f32>
  return %n : tensor<f32>
}

// -----

// f64 (gradient checks) folds the same way.
// CHECK-LABEL: func.func @f64_chain
// CHECK: loom.global_sum_squares %arg0, %arg1 : tensor<3xf64>, tensor<3xf64> -> tensor<f64>
// CHECK-NOT: loom.add
func.func @f64_chain(%g1: tensor<3xf64>, %g2: tensor<3xf64>) -> tensor<f64> {
  %s1 = loom.sum_squares %g1 : tensor<3xf64>
  %s2 = loom.sum_squares %g2 : tensor<3xf64>
  %a = loom.add %s1, %s2 : tensor<f64>, tensor<f64>
  return %a : tensor<f64>
}

// -----

// A chain ends at a term that is no sole-use sum_squares: a rank-0
// parameter's plain square, and a term read twice. The prefix before it
// folds; the adds after it stay.
// CHECK-LABEL: func.func @chain_ends
// CHECK: %[[S3:.*]] = loom.sum_squares %arg2
// CHECK: %[[P:.*]] = loom.global_sum_squares %arg0, %arg1 : tensor<4xf32>, tensor<4xf32> -> tensor<f32>
// CHECK: %[[B:.*]] = loom.add %[[P]], %[[SQ:.*]] : tensor<f32>, tensor<f32>
// CHECK: loom.add %[[B]], %[[S3]]
// CHECK: return {{.*}}, %[[S3]]
func.func @chain_ends(%g1: tensor<4xf32>, %g2: tensor<4xf32>, %g3: tensor<4xf32>, %w: tensor<f32>)
    -> (tensor<f32>, tensor<f32>) {
  %s1 = loom.sum_squares %g1 : tensor<4xf32>
  %s2 = loom.sum_squares %g2 : tensor<4xf32>
  %s3 = loom.sum_squares %g3 : tensor<4xf32>
  %sq = loom.mul %w, %w : tensor<f32>, tensor<f32>
  %a = loom.add %s1, %s2 : tensor<f32>, tensor<f32>
  %b = loom.add %a, %sq : tensor<f32>, tensor<f32>
  %c = loom.add %b, %s3 : tensor<f32>, tensor<f32>
  return %c, %s3 : tensor<f32>, tensor<f32>
}

// -----

// A term that passed through a collective (an FSDP shard's, summed over
// the ranks) starts no chain, and a lone sum_squares is left alone.
// CHECK-LABEL: func.func @not_a_chain
// CHECK-NOT: loom.global_sum_squares
// CHECK: loom.sum_squares %arg0
// CHECK: loom.add
func.func @not_a_chain(%g1: tensor<4xf32>, %x: tensor<f32>) -> tensor<f32> {
  %s1 = loom.sum_squares %g1 : tensor<4xf32>
  %a = loom.add %x, %s1 : tensor<f32>, tensor<f32>
  return %a : tensor<f32>
}
