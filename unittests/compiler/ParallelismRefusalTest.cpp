//===- ParallelismRefusalTest.cpp - The sp and vocab passes' typed refusal -===//
//
// Part of loom, under the Apache License v2.0.
//
// compileTrainStep turns a defaulted sp or loss_parallel off by the kind
// of refusal the pass records: here, that a model's refusal records its
// feature and the pass's own error as the reason, and that an internal
// error (a pass run out of order) records none.
//===----------------------------------------------------------------------===//
#include "ir/LoomDialect.h"
#include "passes/ParallelismRefusal.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;

namespace {

// Every value the embedding and the head read: the vocabulary is 8.
const char *kTiedHead = R"mlir(
func.func @forward(%tok: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %wte = loom.constant {param = #loom.param<"wte">} dense<0.5> : tensor<8x3xf32>
  %x = loom.embedding %wte, %tok : tensor<8x3xf32>, tensor<1x4xi64>
  %l = loom.matmul %x, %wte {transpose_rhs = true} : tensor<1x4x3xf32>, tensor<8x3xf32>
  return %l : tensor<1x4x8xf32>
}
)mlir";

// An MLP of 3 tokens: tp splits it, sp cannot split the sequence by 2.
const char *kThreeTokens = R"mlir(
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
)mlir";

struct PassRun {
  bool ok = false;
  ParallelismRefusal refusal;
};

/// Runs `add`'s passes on `text`; the errors go to a handler that drops them.
PassRun runPasses(const char *text, const std::function<void(PassManager &, ParallelismRefusal *)> &add) {
  MLIRContext ctx;
  ctx.loadDialect<LoomDialect, func::FuncDialect>();
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  EXPECT_TRUE(module);
  PassRun r;
  PassManager pm(&ctx);
  add(pm, &r.refusal);
  r.ok = succeeded(pm.run(*module));
  return r;
}

TEST(ParallelismRefusal, VocabularyThatDoesNotDivideRefusesLossParallel) {
  PassRun r = runPasses(kTiedHead, [](PassManager &pm, ParallelismRefusal *refusal) {
    ShardVocabParallelOptions o;
    o.tp = 3;
    pm.addPass(createShardVocabParallel(o, refusal));
  });
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.refusal.feature, RefusedParallelism::Loss);
  EXPECT_EQ(r.refusal.reason, "loss parallelism: the vocabulary 8 does not divide by tp=3 "
                              "(plan loss_parallel=off keeps the head whole)");
  // tp=2 divides: no refusal.
  r = runPasses(kTiedHead, [](PassManager &pm, ParallelismRefusal *refusal) {
    ShardVocabParallelOptions o;
    o.tp = 2;
    pm.addPass(createShardVocabParallel(o, refusal));
  });
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.refusal.feature, RefusedParallelism::None);
}

TEST(ParallelismRefusal, SequenceThatDoesNotDivideRefusesSequenceParallel) {
  PassRun r = runPasses(kThreeTokens, [](PassManager &pm, ParallelismRefusal *refusal) {
    ShardTensorParallelOptions t;
    t.tp = 2;
    pm.addPass(createShardTensorParallel(t));
    ShardSequenceParallelOptions o;
    o.tp = 2;
    pm.addPass(createShardSequenceParallel(o, refusal));
  });
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.refusal.feature, RefusedParallelism::Sequence);
  EXPECT_EQ(r.refusal.reason,
            "sequence parallelism: the sequence of 3 tokens does not divide by tp=2");
}

TEST(ParallelismRefusal, InternalErrorIsNoRefusal) {
  // Sequence parallelism without tensor parallelism first: the pipeline's
  // mistake, not the model's; the compiler must not retry without sp.
  PassRun r = runPasses(kThreeTokens, [](PassManager &pm, ParallelismRefusal *refusal) {
    ShardSequenceParallelOptions o;
    o.tp = 2;
    pm.addPass(createShardSequenceParallel(o, refusal));
  });
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.refusal.feature, RefusedParallelism::None);
  EXPECT_EQ(r.refusal.reason, "");
}

} // namespace
