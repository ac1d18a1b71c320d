//===- FuseEmbeddingGradAccumulate.cpp - Tied head gradient into embedding_grad -===//
//
// Part of loom, under the Apache License v2.0.
//
// A model whose LM head reads the embedding table (tied weights: Llama-3.2,
// Qwen2.5, Qwen3, GPT-2) has two gradients of the table, summed at the end
// of the backward:
//   dtable = add(head's weight gradient, embedding_grad(dy, ids))
// For a 128,256 x 2,048 vocabulary that add reads 1.5 GB and writes 1 GB,
// and embedding_grad has just written its own [V, D] result (zeros but for
// the rows the batch's ids pick), which the add reads again. With the head's
// gradient as embedding_grad's addend the kernel starts from it instead of
// from zeros and adds each summed row into it: one pass fewer over the
// table, twice.
//
// Exact: the kernel rounds each summed row to the result type as before,
// then adds the addend in that type and rounds once more, as the add did
// (a row no id picks is the addend plus zero). Only an embedding_grad read
// by this add alone, with the add's type, fuses, and the addend must
// already exist where embedding_grad runs (the head's gradient comes first
// in the backward), so the fused op takes embedding_grad's place.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"
#include "passes/PatternUtils.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEEMBEDDINGGRADACCUMULATE
#include "passes/Passes.h.inc"

namespace {

/// The embedding gradient (without an addend) that is `v`, read only here,
/// or null.
Operation *embeddingGradOf(Value v) {
  auto grad = v.getDefiningOp<EmbeddingGradOp>();
  return grad && !grad.getAddend() && v.hasOneUse() ? grad.getOperation() : nullptr;
}

/// add(x, embedding_grad(dy, ids)) -> embedding_grad(dy, ids accumulate x),
/// in place.
struct FuseEmbeddingGradAccumulatePass
    : impl::FuseEmbeddingGradAccumulateBase<FuseEmbeddingGradAccumulatePass> {
  void runOnOperation() override {
    foldAddsIntoProducers(getOperation(), embeddingGradOf, [](Operation *grad, Value addend) {
      cast<EmbeddingGradOp>(grad).getAddendMutable().assign(addend);
    });
  }
};

} // namespace
} // namespace loom
