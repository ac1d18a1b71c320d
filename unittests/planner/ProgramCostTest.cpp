//===- ProgramCostTest.cpp - Pricing a compiled program per instruction ---===//
//
// Part of loom, under the Apache License v2.0.
//
// Hand-worked cases: each instruction's bytes, FLOPs and seconds from the
// profile's figures, and what an older profile without per-class figures
// falls back to.
//===----------------------------------------------------------------------===//
#include "planner/ProgramCost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace loom;
using namespace loom::planner;

namespace {

struct Builder {
  rt::Program p;
  uint32_t buf(rt::DType t, std::vector<int64_t> shape, rt::BufferKind kind = rt::BufferKind::Temp) {
    rt::BufferDesc b;
    b.dtype = t;
    b.shape = std::move(shape);
    b.kind = kind;
    b.bytes = uint64_t(b.numElements()) * rt::dtypeSize(t);
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  }
  void instr(rt::OpCode op, std::vector<uint32_t> in, std::vector<uint32_t> out,
             std::vector<int64_t> ints = {}) {
    p.instrs.push_back(rt::Instr{op, std::move(in), std::move(out), std::move(ints), {}});
  }
};

/// A profile with round numbers: copy 2000 GB/s, 2 us per launch, bf16
/// GEMMs at half of a 1000 TFLOP/s peak, attention at a tenth of it.
HardwareProfile roundProfile() {
  HardwareProfile hw;
  hw.peakBf16 = 1000e12;
  hw.peakFp8 = 2000e12;
  hw.gemm.points = {{1024, 0.5}};
  hw.attention.points = {{1024, 0.1}};
  hw.attentionBackwardFactor = 0.5;
  hw.hbmBandwidth = 2000e9;
  hw.kernelOverhead = 2e-6;
  return hw;
}

/// AdamW over N f32 parameters: p, g, m, v, lr, step in; p, m, v out.
rt::Program adamw(int64_t n) {
  Builder b;
  using rt::DType;
  auto v = [&] { return b.buf(DType::F32, {n}); };
  uint32_t p = v(), g = v(), m = v(), s = v();
  uint32_t lr = b.buf(DType::F32, {}), step = b.buf(DType::F32, {});
  b.instr(rt::OpCode::AdamW, {p, g, m, s, lr, step}, {v(), v(), v()});
  return b.p;
}

TEST(PlannerProgramCost, AdamWIsBytesOverItsClassBandwidthPlusALaunch) {
  const int64_t n = 1 << 24;
  std::vector<InstrWork> work = describeProgram(adamw(n));
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].cls, "adamw");
  EXPECT_EQ(work[0].kind, InstrKind::MemoryBound);
  // 7 f32 tensors of n (4 in, 3 out) and two f32 scalars.
  double bytes = 7.0 * 4 * double(n) + 8;
  EXPECT_EQ(work[0].bytes, bytes);

  HardwareProfile hw = roundProfile();
  hw.classBandwidth["adamw"] = 1500e9;
  ProgramTime t = priceProgram(work, hw);
  EXPECT_NEAR(t.seconds, bytes / 1500e9 + 2e-6, 1e-12);
  EXPECT_NEAR(t.optimizer, t.seconds, 1e-15);
  EXPECT_EQ(t.classes.at("adamw").instrs, 1);
  EXPECT_FALSE(t.classes.at("adamw").fallback);
  EXPECT_TRUE(t.fallbacks().empty());
}

// Small AdamWs over shared scalars run as one CUDA launch (AdamWGroups.h):
// their bytes each, one launch between them. A large one keeps its own.
TEST(PlannerProgramCost, SmallAdamWsShareOneLaunch) {
  using rt::DType;
  Builder b;
  uint64_t end = 0;
  auto v = [&](int64_t n) { // laid out one after another: no two share bytes
    uint32_t id = b.buf(DType::F32, {n});
    b.p.buffers[id].offset = end;
    end += b.p.buffers[id].bytes;
    return id;
  };
  uint32_t lr = v(1), step = v(1);
  b.p.buffers[lr].shape = b.p.buffers[step].shape = {};
  const std::vector<int64_t> sizes = {1280, 5120, int64_t(1) << 20, 1280};
  for (int64_t n : sizes)
    b.instr(rt::OpCode::AdamW, {v(n), v(n), v(n), v(n), lr, step}, {v(n), v(n), v(n)});
  std::vector<InstrWork> work = describeProgram(b.p);
  ASSERT_EQ(work.size(), 4u);
  EXPECT_FALSE(work[0].sharesLaunch);
  EXPECT_TRUE(work[1].sharesLaunch);
  EXPECT_FALSE(work[2].sharesLaunch); // 2^20 elements: not small
  EXPECT_TRUE(work[3].sharesLaunch);
  HardwareProfile hw = roundProfile();
  hw.classBandwidth["adamw"] = 1500e9;
  double bytes = 0;
  for (int64_t n : sizes) bytes += 7.0 * 4 * double(n) + 8;
  EXPECT_NEAR(priceProgram(work, hw).seconds, bytes / 1500e9 + 2 * 2e-6, 1e-12);
}

TEST(PlannerProgramCost, OldProfileFallsBackToTheCopyBandwidth) {
  const int64_t n = 1 << 20;
  std::vector<InstrWork> work = describeProgram(adamw(n));
  HardwareProfile hw = roundProfile(); // no per-class figures, as before calibrate measured them
  ProgramTime t = priceProgram(work, hw);
  EXPECT_NEAR(t.seconds, (7.0 * 4 * double(n) + 8) / 2000e9 + 2e-6, 1e-12);
  ASSERT_EQ(t.fallbacks(), std::vector<std::string>{"adamw"});
  EXPECT_NE(t.classes.at("adamw").rate.find("copy bandwidth 2000 GB/s"), std::string::npos);
}

TEST(PlannerProgramCost, GemmsByResultDtype) {
  using rt::DType;
  Builder b;
  // [2, 512, 1024] x [1024, 2048]: M = 1024 rows after folding the batch.
  uint32_t a = b.buf(DType::BF16, {2, 512, 1024}), w = b.buf(DType::BF16, {1024, 2048});
  b.instr(rt::OpCode::MatMul, {a, w}, {b.buf(DType::BF16, {2, 512, 2048})}, {0, 0});
  // The weight gradient, f32 out: a^T [1024, 1024] x dy [1024, 2048].
  uint32_t x = b.buf(DType::BF16, {1024, 1024}), dy = b.buf(DType::BF16, {1024, 2048});
  b.instr(rt::OpCode::MatMul, {x, dy}, {b.buf(DType::F32, {1024, 2048})}, {1, 0});
  std::vector<InstrWork> work = describeProgram(b.p);
  ASSERT_EQ(work.size(), 2u);
  double flops = 2.0 * 1024 * 2048 * 1024;
  EXPECT_EQ(work[0].cls, "matmul bf16");
  EXPECT_EQ(work[1].cls, "matmul f32");
  EXPECT_EQ(work[0].flops, flops);
  EXPECT_EQ(work[1].flops, flops);
  EXPECT_EQ(work[0].rate, GemmRate::Bf16);
  EXPECT_EQ(work[1].rate, GemmRate::Bf16F32Out);
  EXPECT_NEAR(work[0].cube, std::cbrt(1024.0 * 2048 * 1024), 1e-6);

  HardwareProfile hw = roundProfile();
  // Without an f32-output curve both run at the bf16 one (with a note).
  ProgramTime old = priceProgram(work, hw);
  EXPECT_NEAR(old.classes.at("matmul f32").seconds, flops / (1000e12 * 0.5), 1e-12);
  EXPECT_EQ(old.fallbacks(), std::vector<std::string>{"matmul f32"});
  // With one, the f32-output products take its rate.
  hw.gemmF32Out.points = {{1024, 0.25}};
  ProgramTime t = priceProgram(work, hw);
  EXPECT_NEAR(t.classes.at("matmul bf16").seconds, flops / (1000e12 * 0.5), 1e-12);
  EXPECT_NEAR(t.classes.at("matmul f32").seconds, flops / (1000e12 * 0.25), 1e-12);
  EXPECT_TRUE(t.fallbacks().empty());
}

TEST(PlannerProgramCost, ColumnSumsBesideAGemmAtReducesBandwidth) {
  // A weight gradient that also sums its B operand's columns (a bias's
  // gradient, matMulSumsB): the product, plus B read again and the sums
  // written at Reduce's calibrated figure.
  using rt::DType;
  Builder b;
  uint32_t x = b.buf(DType::BF16, {1024, 1024}), dy = b.buf(DType::BF16, {1024, 2048});
  b.instr(rt::OpCode::MatMul, {x, dy},
          {b.buf(DType::BF16, {1024, 2048}), b.buf(DType::BF16, {1, 2048})}, {1, 0, 1});
  std::vector<InstrWork> work = describeProgram(b.p);
  ASSERT_EQ(work.size(), 1u);
  const double sumBytes = 1024.0 * 2048 * 2 + 2048 * 2;
  EXPECT_EQ(work[0].columnSumBytes, sumBytes);
  HardwareProfile hw = roundProfile();
  hw.classBandwidth["reduce"] = 1000e9;
  const double flops = 2.0 * 1024 * 2048 * 1024;
  ProgramTime t = priceProgram(work, hw);
  EXPECT_NEAR(t.classes.at("matmul bf16").seconds, flops / (1000e12 * 0.5) + sumBytes / 1000e9,
              1e-12);
}

TEST(PlannerProgramCost, TokenGridPricesTrainingShapes) {
  using rt::DType;
  Builder b;
  // Token rows times a weight: [1024, 1024] x [1024, 512] -> bf16.
  uint32_t x = b.buf(DType::BF16, {1024, 1024}), w = b.buf(DType::BF16, {1024, 512});
  b.instr(rt::OpCode::MatMul, {x, w}, {b.buf(DType::BF16, {1024, 512})}, {0, 0});
  // A weight gradient contracting the tokens: [1024, 512]^T x [1024, 2048] -> f32.
  uint32_t a = b.buf(DType::BF16, {1024, 512}), dy = b.buf(DType::BF16, {1024, 2048});
  b.instr(rt::OpCode::MatMul, {a, dy}, {b.buf(DType::F32, {512, 2048})}, {1, 0});
  // Too few token rows for the grid: [64, 64] x [64, 64].
  uint32_t s = b.buf(DType::BF16, {64, 64});
  b.instr(rt::OpCode::MatMul, {s, s}, {b.buf(DType::BF16, {64, 64})}, {0, 0});
  std::vector<InstrWork> work = describeProgram(b.p);
  EXPECT_EQ(work[1].m, 512);
  EXPECT_EQ(work[1].n, 2048);
  EXPECT_EQ(work[1].k, 1024);

  HardwareProfile hw = roundProfile();
  hw.gemmTokens.tokens = 1024;
  hw.gemmTokens.dims = {512, 2048};
  hw.gemmTokens.rowsBf16 = {{0.2, 0.4}, {0.6, 0.8}};
  hw.gemmTokens.reduceBf16 = {{0.3, 0.3}, {0.3, 0.3}};
  hw.gemmTokens.reduceF32 = {{0.1, 0.15}, {0.25, 0.35}};
  // k = 1024 is half-way between 512 and 2048 in log2, n = 512 the first column.
  EXPECT_NEAR(hw.gemmTokens.at(hw.gemmTokens.rowsBf16, 1024, 512), 0.4, 1e-12);
  std::string rate;
  EXPECT_NEAR(instrSeconds(work[0], hw, &rate), work[0].flops / (1000e12 * 0.4), 1e-15);
  EXPECT_EQ(rate, "calibrated token-row GEMM grid");
  EXPECT_NEAR(instrSeconds(work[1], hw), work[1].flops / (1000e12 * 0.15), 1e-15);
  EXPECT_NEAR(instrSeconds(work[2], hw, &rate), std::max(work[2].flops / (1000e12 * 0.5), work[2].bytes / 2000e9),
              1e-15);
  EXPECT_EQ(rate, "calibrated bf16 GEMM curve");
}

TEST(PlannerProgramCost, AttentionAndEmbedding) {
  using rt::DType;
  Builder b;
  // Causal GQA: B 2, 8 query heads, 2 kv heads, T = S = 1024, D 64.
  uint32_t q = b.buf(DType::BF16, {2, 8, 1024, 64}), k = b.buf(DType::BF16, {2, 2, 1024, 64});
  uint32_t v = b.buf(DType::BF16, {2, 2, 1024, 64});
  b.instr(rt::OpCode::Attention, {q, k, v},
          {b.buf(DType::BF16, {2, 8, 1024, 64}), b.buf(DType::F32, {2, 8, 1024})}, {1, 1});
  // A lookup of 4096 ids in a 100000 x 256 f32 table reads the rows it copies.
  uint32_t table = b.buf(DType::F32, {100000, 256}), ids = b.buf(DType::I64, {4096});
  b.instr(rt::OpCode::Embedding, {table, ids}, {b.buf(DType::F32, {4096, 256})});
  std::vector<InstrWork> work = describeProgram(b.p);
  double fwd = 0.5 * 4.0 * 2 * 8 * 1024 * 1024 * 64;
  EXPECT_EQ(work[0].kind, InstrKind::Attention);
  EXPECT_EQ(work[0].flops, fwd);
  EXPECT_EQ(work[1].bytes, 4096.0 * 8 + 2 * 4096.0 * 256 * 4);
  HardwareProfile hw = roundProfile();
  ProgramTime t = priceProgram(work, hw);
  EXPECT_NEAR(t.classes.at("attention").seconds, fwd / (1000e12 * 0.1), 1e-12);
  EXPECT_NEAR(t.classes.at("embedding").seconds, work[1].bytes / 2000e9 + 2e-6, 1e-12);
  // With per-head-dim tables, a head dim of 64 takes the nearest one (here 128's).
  hw.attentionByHeadDim[128] = {EfficiencyCurve{{{1024, 0.2}}}, 0.5};
  ProgramTime byDim = priceProgram(work, hw);
  EXPECT_NEAR(byDim.classes.at("attention").seconds, fwd / (1000e12 * 0.2), 1e-12);
  EXPECT_NE(byDim.classes.at("attention").rate.find("head dim 128"), std::string::npos);
  hw.attentionByHeadDim[64] = {EfficiencyCurve{{{1024, 0.4}}}, 0.5};
  byDim = priceProgram(work, hw);
  EXPECT_NEAR(byDim.classes.at("attention").seconds, fwd / (1000e12 * 0.4), 1e-12);
}

/// A profile file under the source tree, e.g. "planner/profiles/h100.json".
std::string sourceFile(const std::string &path) {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PlannerProgramCost, ProfileClassBandwidthsParse) {
  // The calibrated H100 profile of 2026-11-23 predates the per-class
  // figures: it still loads, with none.
  std::string text = sourceFile("test/planner/Inputs/h100-2026-11-23.calibrated.json"), err;
  HardwareProfile old;
  ASSERT_TRUE(parseProfile(text, "h100-2026-11-23.calibrated.json", old, err)) << err;
  EXPECT_TRUE(old.classBandwidth.empty());
  EXPECT_TRUE(old.gemmF32Out.points.empty());
  // The shipped one (loom calibrate, 2026-11-27) has them.
  HardwareProfile shipped;
  ASSERT_TRUE(parseProfile(sourceFile("planner/profiles/h100.calibrated.json"),
                           "h100.calibrated.json", shipped, err)) << err;
  EXPECT_GT(shipped.classBandwidth.size(), 20u);
  EXPECT_FALSE(shipped.gemmF32Out.points.empty());
  // The same with the figures added.
  std::string key = "\"hbm\": {";
  size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  std::string withClasses = text;
  withClasses.insert(at + key.size(), "\"bandwidth_gbps_by_class\": {\"adamw\": 2400, \"embedding_grad\": 307.5},");
  HardwareProfile hw;
  ASSERT_TRUE(parseProfile(withClasses, "p.json", hw, err)) << err;
  EXPECT_EQ(hw.classBandwidth.size(), 2u);
  EXPECT_EQ(hw.classBandwidth.at("embedding_grad"), 307.5e9);
  std::string bad = text;
  bad.insert(at + key.size(), "\"bandwidth_gbps_by_class\": {\"adamw\": -1},");
  EXPECT_FALSE(parseProfile(bad, "p.json", hw, err));
  EXPECT_EQ(err, "p.json: 'hbm.bandwidth_gbps_by_class.adamw' must be a positive number");
}

} // namespace
