//===- CollectivesTest.cpp - In-process collectives on simulated ranks ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Each test runs a one-collective program on a simulated world and checks
// every rank's output against an fp64 reference built from all ranks'
// random inputs, for groups along each axis of a 2 x 2 (dp_replicate x
// dp_shard) mesh and over both axes.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"
#include "loom/runtime/InProcessCommunicator.h"
#include "loom/runtime/SimulatedRanks.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

constexpr int64_t kRepBit = 1 << 1, kShardBit = 1 << 2;

/// ints for a collective on a mesh (pp, R, S, cp, tp) = (1, R, S, 1, 1).
std::vector<int64_t> collectiveInts(int64_t kind, int64_t dim, int64_t R, int64_t S, int64_t mask) {
  return {kind, dim, 1, R, S, 1, 1, mask};
}

Program oneCollective(OpCode op, const Shape &in, const Shape &out, std::vector<int64_t> ints) {
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, in, "x");
  uint32_t y = b.output(DType::F32, out, "y");
  b.instr(op, {x}, {y}, std::move(ints));
  return b.p;
}

/// Runs `p` on `world` ranks with the given per-rank inputs; returns each
/// rank's output.
std::vector<std::vector<float>> runWorld(const Program &p, int world,
                                         const std::vector<std::vector<float>> &inputs) {
  std::string err;
  auto ranks = SimulatedRanks::create(std::make_shared<Program>(p), world, 1, err);
  EXPECT_TRUE(ranks) << err;
  if (!ranks)
    return {};
  for (int r = 0; r < world; ++r)
    EXPECT_TRUE(ranks->rank(r).setInput(0, inputs[r].data(), inputs[r].size() * 4, err)) << err;
  EXPECT_TRUE(ranks->run(err)) << err;
  std::vector<std::vector<float>> outs(world);
  const BufferDesc &y = p.buffers[p.outputs[0]];
  for (int r = 0; r < world; ++r) {
    outs[r].resize(size_t(y.numElements()));
    EXPECT_TRUE(ranks->rank(r).getOutput(0, outs[r].data(), y.bytes, err)) << err;
  }
  return outs;
}

TEST(Collectives, GroupsFollowTheRowMajorMesh) {
  // Mesh R=2, S=2: rank = r * 2 + s.
  EXPECT_EQ(InProcessCommunicator::groupOf(3, collectiveInts(0, -1, 2, 2, kShardBit)),
            (std::vector<int>{2, 3}));
  EXPECT_EQ(InProcessCommunicator::groupOf(1, collectiveInts(0, -1, 2, 2, kRepBit)),
            (std::vector<int>{1, 3}));
  EXPECT_EQ(InProcessCommunicator::groupOf(2, collectiveInts(0, -1, 2, 2, kRepBit | kShardBit)),
            (std::vector<int>{0, 1, 2, 3}));
}

TEST(Collectives, AllReduceSumAndMeanPerGroup) {
  Rng rng;
  const Shape shape = {3, 5};
  std::vector<std::vector<float>> x;
  for (int r = 0; r < 4; ++r) x.push_back(rng.uniform(15));
  for (int64_t mask : {kRepBit, kShardBit, kRepBit | kShardBit})
    for (int64_t kind : {0, 1}) {
      auto outs = runWorld(oneCollective(OpCode::AllReduce, shape, shape,
                                         collectiveInts(kind, -1, 2, 2, mask)),
                           4, x);
      ASSERT_EQ(outs.size(), 4u);
      for (int r = 0; r < 4; ++r) {
        auto group = InProcessCommunicator::groupOf(r, collectiveInts(kind, -1, 2, 2, mask));
        for (int64_t k = 0; k < 15; ++k) {
          double want = 0;
          for (int g : group) want += x[g][k];
          if (kind == 1) want /= double(group.size());
          EXPECT_NEAR(outs[r][k], want, 1e-6) << "rank " << r << " mask " << mask;
        }
        // Ranks of one group hold bit-identical results.
        EXPECT_EQ(outs[r], outs[group[0]]);
      }
    }
}

TEST(Collectives, AllGatherConcatenatesInGroupOrder) {
  Rng rng;
  // Gather along dim 1 of [2, 3, 2] over dp_shard (2 ranks): [2, 6, 2].
  std::vector<std::vector<float>> x;
  for (int r = 0; r < 4; ++r) x.push_back(rng.uniform(12));
  auto outs = runWorld(oneCollective(OpCode::AllGather, {2, 3, 2}, {2, 6, 2},
                                     collectiveInts(0, 1, 2, 2, kShardBit)),
                       4, x);
  ASSERT_EQ(outs.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    auto group = InProcessCommunicator::groupOf(r, collectiveInts(0, 1, 2, 2, kShardBit));
    for (int64_t o = 0; o < 2; ++o)
      for (int g = 0; g < 2; ++g)
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t i = 0; i < 2; ++i)
            EXPECT_EQ(outs[r][(o * 6 + g * 3 + j) * 2 + i], x[group[g]][(o * 3 + j) * 2 + i]);
  }
}

TEST(Collectives, ReduceScatterKeepsThisRanksSlice) {
  Rng rng;
  // [8, 3] over all four ranks, mean: rank at group place g keeps rows
  // 2g, 2g+1 of the mean.
  std::vector<std::vector<float>> x;
  for (int r = 0; r < 4; ++r) x.push_back(rng.uniform(24));
  auto ints = collectiveInts(1, 0, 2, 2, kRepBit | kShardBit);
  auto outs = runWorld(oneCollective(OpCode::ReduceScatter, {8, 3}, {2, 3}, ints), 4, x);
  ASSERT_EQ(outs.size(), 4u);
  for (int r = 0; r < 4; ++r)
    for (int64_t k = 0; k < 6; ++k) {
      double want = 0;
      for (int g = 0; g < 4; ++g) want += x[g][r * 6 + k];
      EXPECT_NEAR(outs[r][k], want / 4, 1e-6) << "rank " << r;
    }
}

TEST(Collectives, AllToAllSwapsBlocksInGroupOrder) {
  Rng rng;
  // [2, 4, 3] along dim 1 over dp_shard (2 ranks): block g of rank r's
  // output is block (r's place) of member g's input.
  std::vector<std::vector<float>> x;
  for (int r = 0; r < 4; ++r) x.push_back(rng.uniform(24));
  auto ints = collectiveInts(0, 1, 2, 2, kShardBit);
  auto outs = runWorld(oneCollective(OpCode::AllToAll, {2, 4, 3}, {2, 4, 3}, ints), 4, x);
  ASSERT_EQ(outs.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    auto group = InProcessCommunicator::groupOf(r, ints);
    int me = group[0] == r ? 0 : 1;
    for (int64_t o = 0; o < 2; ++o)
      for (int g = 0; g < 2; ++g)
        for (int64_t j = 0; j < 2 * 3; ++j)
          EXPECT_EQ(outs[r][(o * 4 + g * 2) * 3 + j], x[group[g]][(o * 4 + me * 2) * 3 + j])
              << "rank " << r;
  }
  Program bad = oneCollective(OpCode::AllToAll, {3, 3}, {3, 3}, collectiveInts(0, 1, 1, 2, kShardBit));
  EXPECT_NE(bad.validate().find("does not divide by the group size 2"), std::string::npos)
      << bad.validate();
}

TEST(Collectives, ValidateChecksTheGatheredShapeAndTheMesh) {
  Program p = oneCollective(OpCode::AllGather, {2, 3}, {2, 5}, collectiveInts(0, 1, 1, 2, kShardBit));
  EXPECT_NE(p.validate().find("expected [2,6]"), std::string::npos) << p.validate();
  p = oneCollective(OpCode::AllReduce, {2}, {2}, collectiveInts(2, -1, 1, 2, kShardBit));
  EXPECT_NE(p.validate().find("reduction kind 2"), std::string::npos) << p.validate();
  p = oneCollective(OpCode::AllReduce, {2}, {2}, collectiveInts(0, -1, 1, 2, 0));
  EXPECT_NE(p.validate().find("axis mask 0"), std::string::npos) << p.validate();
  p = oneCollective(OpCode::AllReduce, {2}, {2}, {0, -1, 1, 2});
  EXPECT_NE(p.validate().find("takes 8 int attributes"), std::string::npos) << p.validate();
}

TEST(Collectives, ExecutorsRefuseAWorldOfTheWrongSize) {
  Program p = oneCollective(OpCode::AllReduce, {2}, {2}, collectiveInts(0, -1, 1, 2, kShardBit));
  std::string err;
  EXPECT_FALSE(createExecutor(std::make_shared<Program>(p), "cpu", 1, err));
  EXPECT_NE(err.find("collective over a 2-rank mesh"), std::string::npos) << err;
  EXPECT_FALSE(SimulatedRanks::create(std::make_shared<Program>(p), 4, 1, err));
  EXPECT_NE(err.find("the program's mesh has 2 ranks"), std::string::npos) << err;
}

TEST(Collectives, AFailingRankStopsTheOthers) {
  // Rank 1's token id is out of range: its embedding fails before the
  // all-reduce; rank 0 must come back from the collective with rank 1's
  // error instead of waiting forever.
  ProgramBuilder b;
  uint32_t ids = b.input(DType::I64, {1}, "ids");
  uint32_t table = b.constant(DType::F32, {2, 2}, toBytes(std::vector<float>{1, 2, 3, 4}), "t");
  uint32_t h = b.temp(DType::F32, {1, 2});
  uint32_t y = b.output(DType::F32, {1, 2}, "y");
  b.instr(OpCode::Embedding, {table, ids}, {h});
  b.instr(OpCode::AllReduce, {h}, {y}, collectiveInts(0, -1, 1, 2, kShardBit));
  std::string err;
  auto ranks = SimulatedRanks::create(std::make_shared<Program>(b.p), 2, 1, err);
  ASSERT_TRUE(ranks) << err;
  int64_t good = 1, bad = 7;
  ASSERT_TRUE(ranks->rank(0).setInput(0, &good, 8, err));
  ASSERT_TRUE(ranks->rank(1).setInput(0, &bad, 8, err));
  EXPECT_FALSE(ranks->run(err));
  EXPECT_NE(err.find("rank 1 failed"), std::string::npos) << err;
}

} // namespace
