//===- DeviceMemoryCommunicatorTest.cpp - Every rank on one GPU -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// Simulated ranks on the CUDA backend (one executor per rank, collectives
// in device memory) against the same programs on the CPU's simulated
// ranks: the collectives' arithmetic is the CPU communicator's (group
// order, double, one rounding), so their outputs are identical bit for
// bit, for every collective, reduction kind, group and layout (gathers and
// scatters along inner dims go through staging). Also: a collective
// overlapped with kernels that reuse nothing of it, a failing rank, and the
// memory check before allocation. Skipped without a GPU.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"
#include "loom/runtime/SimulatedRanks.h"

#include <cmath>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

/// The GPU's free and total bytes (0, 0 without the CUDA backend).
void gpuMemory(uint64_t &freeBytes, uint64_t &total) {
  freeBytes = total = 0;
#ifdef LOOM_HAVE_CUDA
  std::string why;
  EXPECT_TRUE(cudaMemoryInfo(freeBytes, total, why)) << why;
#endif
}

uint64_t rankDeviceBytes(const Program &p) {
#ifdef LOOM_HAVE_CUDA
  return cudaRankDeviceBytes(p);
#else
  (void)p;
  return 0;
#endif
}

constexpr int64_t kRepBit = 1 << 1, kShardBit = 1 << 2, kTpBit = 1 << 4;

/// ints for a collective on a mesh (pp, R, S, cp, tp) = (1, R, S, 1, T).
std::vector<int64_t> meshInts(int64_t kind, int64_t dim, int64_t R, int64_t S, int64_t T,
                              int64_t mask) {
  return {kind, dim, 1, R, S, 1, T, mask};
}

/// Runs `p` on `world` simulated ranks of `backend` with per-rank inputs
/// (one per program input); returns each rank's outputs, concatenated.
std::vector<std::vector<float>> runOn(const std::string &backend, const Program &p, int world,
                                      const std::vector<std::vector<std::vector<float>>> &inputs) {
  std::string err;
  auto ranks = SimulatedRanks::create(std::make_shared<Program>(p), world, backend, 1, err);
  EXPECT_TRUE(ranks) << err;
  if (!ranks)
    return {};
  std::vector<std::vector<float>> outs(world);
  for (int step = 0; step < 2; ++step) { // twice: events and counters carry over runs
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < inputs[r].size(); ++i)
        EXPECT_TRUE(ranks->rank(r).setInput(i, inputs[r][i].data(), inputs[r][i].size() * 4, err))
            << err;
    EXPECT_TRUE(ranks->run(err)) << backend << ": " << err;
  }
  for (int r = 0; r < world; ++r)
    for (size_t o = 0; o < p.outputs.size(); ++o) {
      const BufferDesc &y = p.buffers[p.outputs[o]];
      std::vector<float> v(size_t(y.numElements()));
      EXPECT_TRUE(ranks->rank(r).getOutput(o, v.data(), y.bytes, err)) << err;
      outs[r].insert(outs[r].end(), v.begin(), v.end());
    }
  return outs;
}

struct Case {
  OpCode op;
  Shape in, out;
  std::vector<int64_t> ints;
};

TEST(DeviceMemoryCommunicator, EveryCollectiveEqualsTheCpuBitForBit) {
  REQUIRE_GPU();
  // Mesh (R, S, T) = (2, 2, 2): 8 ranks; groups along each axis and two.
  std::vector<Case> cases;
  for (int64_t mask : {kRepBit, kShardBit, kTpBit, kRepBit | kShardBit})
    for (int64_t kind : {0, 1}) {
      int64_t n = mask == (kRepBit | kShardBit) ? 4 : 2;
      cases.push_back({OpCode::AllReduce, {3, 37}, {3, 37}, meshInts(kind, -1, 2, 2, 2, mask)});
      cases.push_back({OpCode::ReduceScatter, {8, 6}, {8 / n, 6}, meshInts(kind, 0, 2, 2, 2, mask)});
      cases.push_back({OpCode::ReduceScatter, {3, 4 * n}, {3, 4}, meshInts(kind, 1, 2, 2, 2, mask)});
      cases.push_back({OpCode::AllGather, {5, 3}, {5 * n, 3}, meshInts(kind, 0, 2, 2, 2, mask)});
      cases.push_back({OpCode::AllGather, {2, 3, 2}, {2, 3 * n, 2}, meshInts(kind, 1, 2, 2, 2, mask)});
      cases.push_back({OpCode::AllToAll, {4 * n, 3}, {4 * n, 3}, meshInts(kind, 0, 2, 2, 2, mask)});
      cases.push_back({OpCode::AllToAll, {2, 2 * n, 3}, {2, 2 * n, 3}, meshInts(kind, 1, 2, 2, 2, mask)});
      // Ring shifts (the dim slot holds the shift): a whole buffer from
      // the member `shift` places before.
      cases.push_back({OpCode::CollectivePermute, {3, 5}, {3, 5}, meshInts(0, kind ? -1 : 1, 2, 2, 2, mask)});
    }
  Rng rng;
  for (const Case &c : cases) {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, c.in, "x");
    uint32_t y = b.output(DType::F32, c.out, "y");
    b.instr(c.op, {x}, {y}, c.ints);
    ASSERT_EQ(b.p.validate(), "");
    int64_t n = 1;
    for (int64_t d : c.in) n *= d;
    std::vector<std::vector<std::vector<float>>> inputs;
    for (int r = 0; r < 8; ++r) inputs.push_back({rng.uniform(size_t(n))});
    auto cpu = runOn("cpu", b.p, 8, inputs), gpu = runOn("cuda", b.p, 8, inputs);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (int r = 0; r < 8; ++r)
      EXPECT_EQ(cpu[r], gpu[r]) << opcodeName(c.op) << " dims " << c.in.size() << " mask "
                                << c.ints[7] << " kind " << c.ints[0] << " rank " << r;
  }
}

TEST(DeviceMemoryCommunicator, CollectivesOverlapKernelsThatDoNotTouchThem) {
  REQUIRE_GPU();
  // all_reduce(a) runs on the communication stream while exp(b) and more
  // work that touches neither a nor the sum run on the rank's stream; the
  // read of the sum must wait for it, and a later write into a's bytes
  // must wait until every rank's reduction has read them.
  ProgramBuilder b;
  uint32_t a = b.input(DType::F32, {1 << 16}, "a");
  uint32_t c = b.input(DType::F32, {1 << 16}, "c");
  uint32_t s = b.temp(DType::F32, {1 << 16});
  uint32_t e1 = b.temp(DType::F32, {1 << 16});
  uint32_t e2 = b.output(DType::F32, {1 << 16}, "e2");
  uint32_t y = b.output(DType::F32, {1 << 16}, "y");
  b.instr(OpCode::AllReduce, {a}, {s}, meshInts(0, -1, 1, 4, 1, kShardBit));
  b.instr(OpCode::Exp, {c}, {e1});
  b.instr(OpCode::Tanh, {e1}, {e2});
  b.instr(OpCode::Mul, {s, e2}, {y});
  Rng rng;
  std::vector<std::vector<std::vector<float>>> inputs;
  for (int r = 0; r < 4; ++r) inputs.push_back({rng.uniform(1 << 16), rng.uniform(1 << 16)});
  auto cpu = runOn("cpu", b.p, 4, inputs), gpu = runOn("cuda", b.p, 4, inputs);
  ASSERT_EQ(cpu.size(), 4u);
  ASSERT_EQ(gpu.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(cpu[r].size(), gpu[r].size());
    // exp and tanh are not bit-identical between the backends: compare
    // the all-reduced factor through a tolerance, every element.
    for (size_t i = 0; i < cpu[r].size(); ++i)
      ASSERT_NEAR(cpu[r][i], gpu[r][i], 1e-5 * (1 + std::fabs(cpu[r][i]))) << "rank " << r << " at " << i;
  }
}

TEST(DeviceMemoryCommunicator, AFailingRankStopsTheOthers) {
  REQUIRE_GPU();
  ProgramBuilder b;
  uint32_t ids = b.input(DType::I64, {1}, "ids");
  uint32_t table = b.constant(DType::F32, {2, 2}, toBytes(std::vector<float>{1, 2, 3, 4}), "t");
  uint32_t h = b.temp(DType::F32, {1, 2});
  uint32_t y = b.output(DType::F32, {1, 2}, "y");
  b.instr(OpCode::Embedding, {table, ids}, {h});
  b.instr(OpCode::AllReduce, {h}, {y}, meshInts(0, -1, 1, 2, 1, kShardBit));
  std::string err;
  auto ranks = SimulatedRanks::create(std::make_shared<Program>(b.p), 2, "cuda", 0, err);
  ASSERT_TRUE(ranks) << err;
  int64_t good = 1, bad = 7;
  ASSERT_TRUE(ranks->rank(0).setInput(0, &good, 8, err));
  ASSERT_TRUE(ranks->rank(1).setInput(0, &bad, 8, err));
  // The bad id is found on the device after the run: rank 1 reports it.
  EXPECT_FALSE(ranks->run(err));
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("out of range"), std::string::npos) << err;
}

TEST(DeviceMemoryCommunicator, AWorldThatDoesNotFitIsRefusedBeforeAllocating) {
  REQUIRE_GPU();
  // One rank's arena is a quarter of the GPU: the fourth rank cannot fit
  // beside three others (and whatever else is allocated).
  uint64_t freeBytes = 0, total = 0;
  gpuMemory(freeBytes, total);
  ProgramBuilder b;
  int64_t n = int64_t(total / 4 / 4);
  uint32_t x = b.input(DType::F32, {n}, "x");
  uint32_t y = b.output(DType::F32, {n}, "y");
  b.instr(OpCode::AllReduce, {x}, {y}, meshInts(0, -1, 1, 4, 1, kShardBit));
  std::string err;
  auto ranks = SimulatedRanks::create(std::make_shared<Program>(b.p), 4, "cuda", 0, err);
  EXPECT_FALSE(ranks);
  EXPECT_NE(err.find("of 4 does not fit on the GPU: each rank needs"), std::string::npos) << err;
  EXPECT_NE(err.find("are free"), std::string::npos) << err;
  uint64_t after = 0;
  gpuMemory(after, total);
  EXPECT_GE(after + (64u << 20), freeBytes) << "the refused world allocated memory";
}

TEST(DeviceMemoryCommunicator, EachRankReportsWhatItAllocated) {
  REQUIRE_GPU();
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {2, 1024}, "x");
  uint32_t y = b.output(DType::F32, {2, 4096}, "y");
  b.instr(OpCode::AllGather, {x}, {y}, meshInts(0, 1, 1, 4, 1, kShardBit)); // staged
  std::string err;
  auto p = std::make_shared<Program>(b.p);
  auto ranks = SimulatedRanks::create(p, 4, "cuda", 0, err);
  ASSERT_TRUE(ranks) << err;
  for (int r = 0; r < 4; ++r) {
    DeviceMemory m = ranks->rank(r).deviceMemory();
    EXPECT_EQ(m.arena, p->arenaBytes);
    EXPECT_EQ(m.communication, 2u * 4096 * 4) << "staging of the gathered [2, 4096]";
    EXPECT_EQ(m.total(), rankDeviceBytes(*p));
    EXPECT_GE(ranks->measuredDeviceBytes(r), m.total() / 2) << "rank " << r;
  }
}

} // namespace
