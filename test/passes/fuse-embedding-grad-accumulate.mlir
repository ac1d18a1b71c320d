// RUN: loom-opt --loom-fuse-embedding-grad-accumulate %s | FileCheck %s
// RUN: loom-opt %S/build-train-step.mlir --split-input-file --loom-build-train-step --canonicalize --cse --loom-fuse-embedding-grad-accumulate | FileCheck %s --check-prefix=STEP

// A tied table's gradient sum, add(dhead, embedding_grad(dy, ids)), becomes
// embedding_grad with dhead as its addend, where embedding_grad was; the
// operands of the add either way round.
// CHECK-LABEL: func.func @tied_sums
// CHECK-SAME: (%[[DY:.*]]: tensor<2x3x4xf32>, %[[IDS:.*]]: tensor<2x3xi64>, %[[DH:.*]]: tensor<7x4xf32>)
// CHECK: %[[A:.*]] = loom.embedding_grad %[[DY]], %[[IDS]] accumulate %[[DH]] : tensor<7x4xf32> {num_embeddings = 7 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>
// CHECK-NEXT: %[[B:.*]] = loom.embedding_grad %[[DY]], %[[IDS]] accumulate %[[A]] : tensor<7x4xf32> {num_embeddings = 7 : i64}
// CHECK-NOT: loom.add
// CHECK: return %[[B]]
func.func @tied_sums(%dy: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>, %dh: tensor<7x4xf32>) -> tensor<7x4xf32> {
  %e = loom.embedding_grad %dy, %ids {num_embeddings = 7 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>
  %s = loom.add %dh, %e : tensor<7x4xf32>, tensor<7x4xf32>
  %e2 = loom.embedding_grad %dy, %ids {num_embeddings = 7 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>
  %t = loom.add %e2, %s : tensor<7x4xf32>, tensor<7x4xf32>
  return %t : tensor<7x4xf32>
}

// Left alone: the gradient read twice, an addend made after embedding_grad
// (the fused op could not take its place), a bf16 sum, a broadcasting add,
// and an embedding_grad that already has an addend.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: loom.add
// CHECK: return
func.func @kept(%dy: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>, %dh: tensor<7x4xf32>,
                %dyb: tensor<2x3x4xbf16>, %tb: tensor<7x4xbf16>, %row: tensor<1x4xf32>)
    -> (tensor<7x4xf32>, tensor<7x4xf32>, tensor<7x4xf32>, tensor<7x4xbf16>, tensor<7x4xf32>, tensor<7x4xf32>) {
  %e = loom.embedding_grad %dy, %ids {num_embeddings = 7 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>
  %twice = loom.add %dh, %e : tensor<7x4xf32>, tensor<7x4xf32>
  %e2 = loom.embedding_grad %dy, %ids {num_embeddings = 7 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>
  %late = loom.exp %dh : tensor<7x4xf32>
  %after = loom.add %late, %e2 : tensor<7x4xf32>, tensor<7x4xf32>
  %eb = loom.embedding_grad %dyb, %ids {num_embeddings = 7 : i64} : tensor<2x3x4xbf16>, tensor<2x3xi64>
  %bsum = loom.add %tb, %eb : tensor<7x4xbf16>, tensor<7x4xbf16>
  %e3 = loom.embedding_grad %dy, %ids {num_embeddings = 7 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>
  %bcast = loom.add %row, %e3 : tensor<1x4xf32>, tensor<7x4xf32>
  %e4 = loom.embedding_grad %dy, %ids accumulate %dh : tensor<7x4xf32> {num_embeddings = 7 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64>
  %again = loom.add %dh, %e4 : tensor<7x4xf32>, tensor<7x4xf32>
  return %twice, %e, %after, %bsum, %bcast, %again : tensor<7x4xf32>, tensor<7x4xf32>, tensor<7x4xf32>, tensor<7x4xbf16>, tensor<7x4xf32>, tensor<7x4xf32>
}

// A built training step with a tied table (build-train-step.mlir's first
// case): the LM head's weight gradient is embedding_grad's addend, and no
// add of the two is left.
// STEP-LABEL: func.func @train_step
// STEP: %[[DHEAD:.*]] = loom.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// STEP: %[[DEMB:.*]] = loom.embedding_grad %{{.*}}, %{{.*}} accumulate %[[DHEAD]] : tensor<7x4xf32> {num_embeddings = 7
// STEP-NOT: loom.add %[[DHEAD]]
// STEP: loom.adamw %arg0
