//===- RoundedCopiesTest.cpp - AdamW's bf16 copy of the next weights ------===//
//
// Part of loom, under the Apache License v2.0.
//
// The fold (codegen/FoldWeightRounding.cpp) on hand-built steps, and the
// folded step against the Cast it replaces, run after run on one executor:
// the value the step reads (round(p)) and the new state must be the same
// bits, including after the caller sets p again between runs (a checkpoint
// restored into a live executor). On the CPU backend and, in the suite
// CudaBackend (scripts/gpu-test.sh), on CUDA.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include "codegen/FoldWeightRounding.h"
#include "loom/runtime/RoundedCopies.h"

namespace loom::rt::test {
namespace {

const Shape kShape = {3, 37};

/// One step: seen = widen(round(p)) (what a bf16 GEMM would read), then
/// AdamW updating p, m, v in place. `folded`: the step as the fold leaves
/// it (AdamW writes the rounded copy, no Cast), else with the Cast.
/// `readAfter` puts a second reader of round(p) after AdamW.
Program step(bool folded, bool readAfter = false) {
  ProgramBuilder b;
  uint32_t p = b.input(DType::F32, kShape, "p"), g = b.input(DType::F32, kShape, "g");
  uint32_t m = b.input(DType::F32, kShape, "m"), v = b.input(DType::F32, kShape, "v");
  uint32_t lr = b.input(DType::F32, {}, "lr"), s = b.input(DType::F32, {}, "step");
  uint32_t po = b.output(DType::F32, kShape, "p'"), mo = b.output(DType::F32, kShape, "m'");
  uint32_t vo = b.output(DType::F32, kShape, "v'"), seen = b.output(DType::F32, kShape, "seen");
  uint32_t y = b.temp(DType::BF16, kShape);
  if (!folded)
    b.instr(OpCode::Cast, {p}, {y});
  b.instr(OpCode::Cast, {y}, {seen});
  std::vector<uint32_t> outs = {po, mo, vo};
  if (folded)
    outs.push_back(y);
  b.instr(OpCode::AdamW, {p, g, m, v, lr, s}, outs, {}, {0.9, 0.95, 1e-8, 0.1});
  if (readAfter)
    b.instr(OpCode::Cast, {y}, {b.output(DType::F32, kShape, "late")});
  for (auto [o, i] : {std::pair{po, p}, std::pair{mo, m}, std::pair{vo, v}}) {
    b.p.buffers[o].offset = b.p.buffers[i].offset;
    b.p.updates.push_back({o, i});
  }
  return b.p;
}

struct Runs {
  std::vector<Bytes> seen, params;
};

struct Values {
  std::vector<float> p, g, restored;
};

/// Four runs on one executor with the state resident: runs 0-1 from the
/// state set once, then p set again (other values) before runs 2-3.
Runs runFour(const Program &p, const std::string &backend, const Values &val) {
  Runs out;
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(p), backend, 1, err);
  EXPECT_TRUE(exec) << err;
  if (!exec)
    return out;
  size_t bytes = size_t(numel(kShape)) * 4;
  bool ok = runAdamWFourTimes(*exec, val.p, val.g, val.restored, [&](int) {
    Bytes seen(bytes), param(bytes);
    bool read = exec->getOutput(3, seen.data(), bytes, err) &&
                exec->getOutput(0, param.data(), bytes, err);
    out.seen.push_back(seen);
    out.params.push_back(param);
    return read;
  }, err);
  EXPECT_TRUE(ok) << err;
  return out;
}

void expectFoldedMatchesCast(const std::string &backend) {
  Program folded = step(true), cast = step(false);
  ASSERT_EQ(folded.validate(), "");
  ASSERT_EQ(cast.validate(), "");
  Rng rng;
  int64_t n = numel(kShape);
  Values val{rng.uniform(n, -3, 3), rng.uniform(n), rng.uniform(n, -3, 3)};
  Runs a = runFour(folded, backend, val), b = runFour(cast, backend, val);
  ASSERT_EQ(a.seen.size(), 4u);
  EXPECT_EQ(a.seen, b.seen);
  EXPECT_EQ(a.params, b.params);
  // The copy moved with p: every run saw a different rounding.
  EXPECT_NE(a.seen[0], a.seen[1]);
  EXPECT_NE(a.seen[1], a.seen[2]);
}

TEST(RoundedCopies, FoldedStepMatchesTheCastRunAfterRun) { expectFoldedMatchesCast("cpu"); }

TEST(CudaBackend, RoundedCopyMatchesTheCastRunAfterRun) {
  REQUIRE_GPU();
  expectFoldedMatchesCast("cuda");
}

TEST(RoundedCopies, FoldTurnsTheCastIntoAdamWsFourthOutput) {
  Program p = step(false);
  EXPECT_EQ(foldWeightRounding(p), 1);
  ASSERT_EQ(p.instrs.size(), 2u);
  EXPECT_EQ(p.instrs[1].op, OpCode::AdamW);
  ASSERT_EQ(p.instrs[1].out.size(), 4u);
  std::vector<RoundedCopy> copies = roundedCopies(p);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].input, p.inputs[0]);
  EXPECT_EQ(copies[0].copy, p.instrs[1].out[3]);
  EXPECT_EQ(p.validate(), "");
}

TEST(RoundedCopies, FoldLeavesACastReadAfterAdamW) {
  // The late reader needs this run's rounding, which AdamW would overwrite.
  Program p = step(false, true);
  EXPECT_EQ(foldWeightRounding(p), 0);
  EXPECT_EQ(p.instrs.size(), 4u);
}

TEST(RoundedCopies, ValidateRefusesMalformedCopies) {
  Program noUpdate = step(true);
  noUpdate.updates.erase(noUpdate.updates.begin()); // p' no longer updates p
  std::string e = noUpdate.validate();
  EXPECT_NE(e.find("instr 1 (adamw): a rounded copy buffer 10 'tmp' needs the parameter updated "
                   "in place"),
            std::string::npos)
      << e;
  Program twoWriters = step(true);
  twoWriters.instrs.push_back(twoWriters.instrs[0]); // a Cast (widen) ...
  std::swap(twoWriters.instrs.back().in, twoWriters.instrs.back().out); // ... writing the copy
  e = twoWriters.validate();
  EXPECT_NE(e.find("has 2 writers, not AdamW alone"), std::string::npos) << e;
  // A fuzzed artifact: the copy's id out of range is an error (the Cast
  // reads a buffer nothing writes), not a write out of bounds.
  Program outOfRange = step(true);
  outOfRange.instrs[1].out[3] = 999;
  EXPECT_NE(outOfRange.validate(), "");
}

} // namespace
} // namespace loom::rt::test
