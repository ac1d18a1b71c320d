//===- LossTest.cpp - Cross-entropy ---------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

double referenceLoss(const std::vector<float> &logits, const std::vector<int64_t> &targets,
                     int64_t V) {
  double total = 0;
  for (size_t n = 0; n < targets.size(); ++n) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(logits[n * V + v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(logits[n * V + v] - mx);
    total += mx + std::log(sum) - logits[n * V + targets[n]];
  }
  return total / double(targets.size());
}

ProgramBuilder crossEntropy(int64_t N, int64_t V, DType targetType) {
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {N, V}, "logits"), t = b.input(targetType, {N}, "targets");
  uint32_t o = b.output(DType::F32, {}, "loss");
  b.instr(OpCode::CrossEntropy, {x, t}, {o});
  return b;
}

TEST(Loss, CrossEntropyMatchesReference) {
  Rng rng;
  int64_t N = 37, V = 1000;
  auto logits = rng.uniform(N * V, -5, 5);
  auto targets = rng.ints(N, 0, V - 1);
  RunResult r = runProgram(crossEntropy(N, V, DType::I64).p, {toBytes(logits), toBytes(targets)});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_TRUE(allClose(r.out<float>(), {referenceLoss(logits, targets, V)}, 1.2e-7));
}

TEST(Loss, CrossEntropyIsStableForLargeLogits) {
  Rng rng;
  int64_t N = 4, V = 64;
  auto logits = rng.uniform(N * V, 990, 1010); // exp(1000) overflows double
  auto targets = rng.ints(N, 0, V - 1);
  std::vector<int32_t> t32(targets.begin(), targets.end());
  RunResult r = runProgram(crossEntropy(N, V, DType::I32).p, {toBytes(logits), toBytes(t32)});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_TRUE(allClose(r.out<float>(), {referenceLoss(logits, targets, V)}, 1.2e-7));
}

TEST(Loss, CrossEntropyRejectsOutOfRangeTarget) {
  int64_t N = 3, V = 5;
  std::vector<float> logits(size_t(N * V), 0.0f);
  RunResult r = runProgram(crossEntropy(N, V, DType::I64).p,
                           {toBytes(logits), toBytes(std::vector<int64_t>{0, 5, 1})});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.err, "instr 0 (cross_entropy): target 5 at row 1 out of range [0, 5)");
}

} // namespace
