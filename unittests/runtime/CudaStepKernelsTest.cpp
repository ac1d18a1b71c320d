//===- CudaStepKernelsTest.cpp - The training step's kernels on CUDA ------===//
//
// Part of loom, under the Apache License v2.0.
//
// The kernels that run once per parameter or once per step (EmbeddingGrad's
// segmented sort-and-sum, ...) on the CUDA backend against the CPU
// reference, on id patterns picked to reach every path: runs inside one
// segment, runs crossing segment edges, runs spanning whole segments, one
// id at most positions (real text is that skewed), every id unique. In the
// suite CudaBackend so that scripts/gpu-test.sh runs them. Without a usable
// GPU every test reports SKIPPED, never passed.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include <algorithm>
#include <numeric>

namespace loom::rt::test {
namespace {

/// ids of N positions over [0, V): `hot` of them (at random places) one id,
/// the rest uniform.
std::vector<int64_t> skewedIds(Rng &rng, int64_t N, int64_t V, int64_t hot) {
  std::vector<int64_t> ids = rng.ints(N, 0, V - 1);
  std::vector<int64_t> where(static_cast<size_t>(N));
  std::iota(where.begin(), where.end(), 0);
  std::shuffle(where.begin(), where.end(), rng.gen());
  for (int64_t k = 0; k < hot; ++k) ids[size_t(where[size_t(k)])] = V / 2;
  return ids;
}

/// EmbeddingGrad of dy [N, D] by `ids` into [V, D] on both backends: equal
/// within 1e-5 (both sum in double; only the order of the double sums
/// differs), and the CUDA bits equal from run to run.
void expectEmbeddingGradMatches(Rng &rng, const std::vector<int64_t> &ids, int64_t V, int64_t D) {
  int64_t N = int64_t(ids.size());
  ProgramBuilder b;
  uint32_t dy = b.input(DType::F32, {N, D}, "dy"), i = b.input(DType::I64, {N}, "ids");
  b.instr(OpCode::EmbeddingGrad, {dy, i}, {b.output(DType::F32, {V, D}, "dtable")});
  ASSERT_EQ(b.p.validate(), "");
  std::vector<Bytes> in = {toBytes(rng.uniform(N * D)), toBytes(ids)};
  RunResult cpu = runProgram(b.p, in, 2, "cpu");
  ASSERT_TRUE(cpu.ok) << cpu.err;
  RunResult gpu = runProgram(b.p, in, 0, "cuda"), again = runProgram(b.p, in, 0, "cuda");
  ASSERT_TRUE(gpu.ok && again.ok) << gpu.err << again.err;
  std::vector<float> want = cpu.out<float>(0);
  EXPECT_TRUE(allClose(gpu.out<float>(0), toDouble(want), 1e-5, 1e-6));
  EXPECT_EQ(gpu.outputs, again.outputs);
}

TEST(CudaBackend, EmbeddingGradSkewedRunsCrossSegments) {
  REQUIRE_GPU();
  Rng rng;
  // One id at 1 position in 3 (many 64-position segments in one run, the
  // run's edges anywhere), D over two 256-column slices with a ragged end.
  expectEmbeddingGradMatches(rng, skewedIds(rng, 2000, 600, 700), 600, 300);
  // Nearly all positions one id: the run spans whole segments.
  expectEmbeddingGradMatches(rng, skewedIds(rng, 1000, 50, 990), 50, 33);
}

TEST(CudaBackend, EmbeddingGradRunsOnSegmentEdges) {
  REQUIRE_GPU();
  Rng rng;
  // Runs of exactly one segment (64) and of two, starting on the edges.
  std::vector<int64_t> ids;
  for (int64_t v : {4, 1, 7}) ids.insert(ids.end(), 64, v);
  ids.insert(ids.end(), 128, 2);
  expectEmbeddingGradMatches(rng, ids, 9, 70);
  // Every id once (no run crosses anything), a tail segment of 1.
  std::vector<int64_t> unique(129);
  std::iota(unique.begin(), unique.end(), 0);
  std::shuffle(unique.begin(), unique.end(), rng.gen());
  expectEmbeddingGradMatches(rng, unique, 200, 17);
}

TEST(CudaBackend, VocabShardEmbeddingGradSkipsOtherShardsRuns) {
  REQUIRE_GPU();
  Rng rng;
  // Ids below and above the shard's rows [100, 160) sort before and after
  // its keys (as the past-the-end key); both kinds in long runs.
  int64_t N = 900, D = 40, Vl = 60;
  std::vector<int64_t> ids = skewedIds(rng, N, 300, 400);
  for (int64_t k = 0; k < 150; ++k) ids[size_t(k * 6)] = 20;
  ProgramBuilder b;
  uint32_t dy = b.input(DType::F32, {N, D}), i = b.input(DType::I64, {N}),
           f = b.input(DType::I64, {1});
  b.instr(OpCode::VocabShardEmbeddingGrad, {dy, i, f}, {b.output(DType::F32, {Vl, D})});
  ASSERT_EQ(b.p.validate(), "");
  std::vector<Bytes> in = {toBytes(rng.uniform(N * D)), toBytes(ids),
                           toBytes(std::vector<int64_t>{100})};
  RunResult cpu = runProgram(b.p, in, 2, "cpu"), gpu = runProgram(b.p, in, 0, "cuda");
  ASSERT_TRUE(cpu.ok && gpu.ok) << cpu.err << gpu.err;
  std::vector<float> want = cpu.out<float>(0);
  EXPECT_TRUE(allClose(gpu.out<float>(0), toDouble(want), 1e-5, 1e-6));
}

} // namespace
} // namespace loom::rt::test
