//===- WeightAmaxTest.cpp - AdamW keeps the next step's weight amax -------===//
//
// Part of loom, under the Apache License v2.0.
//
// The fold (codegen/FoldWeightAmax.cpp) on hand-built steps, validate()'s
// rules for the kept amax, and on the CPU backend the folded step against
// the unfolded one run after run (WeightAmaxCases.h): same scales and
// weights bit for bit, and each run's amax is max |p| of the p it starts
// from, including after the caller sets p between runs.
//===----------------------------------------------------------------------===//
#include "WeightAmaxCases.h"

namespace loom::rt::test {
namespace {

const Shape kSmall = {3, 37};

TEST(WeightAmax, FoldedStepMatchesTheUnfoldedRunAfterRun) {
  expectWeightAmaxFoldExact("cpu", kSmall);
  expectWeightAmaxFoldExact("cpu", {96, 256}); // several of runAdamW's chunks
}

/// p's tensorwise scale and AdamW's in-place update, nothing else.
struct BareStep {
  ProgramBuilder b;
  uint32_t p, scale;
  explicit BareStep(std::vector<int64_t> scaleShape = {1, 1}) {
    p = b.input(DType::F32, kSmall, "w");
    uint32_t g = b.input(DType::F32, kSmall, "g"), m = b.input(DType::F32, kSmall, "m");
    uint32_t v = b.input(DType::F32, kSmall, "v");
    uint32_t lr = b.input(DType::F32, {}, "lr"), step = b.input(DType::F32, {}, "step");
    scale = b.output(DType::F32, scaleShape, "scale");
    b.instr(OpCode::Fp8Scale, {p}, {scale, b.output(DType::F32, scaleShape, "inv")}, {0, 0});
    uint32_t po = b.output(DType::F32, kSmall), mo = b.output(DType::F32, kSmall);
    uint32_t vo = b.output(DType::F32, kSmall);
    b.instr(OpCode::AdamW, {p, g, m, v, lr, step}, {po, mo, vo}, {}, {0.9, 0.95, 1e-8, 0.1});
    for (auto [o, i] : {std::pair{po, p}, std::pair{mo, m}, std::pair{vo, v}}) {
      b.p.buffers[o].offset = b.p.buffers[i].offset;
      b.p.updates.push_back({o, i});
    }
  }
  Instr &adamw() { return b.p.instrs.back(); }
};

TEST(WeightAmax, FoldPointsTheScaleAtAdamWsAmax) {
  BareStep s;
  EXPECT_EQ(foldWeightAmax(s.b.p), 1);
  Program &p = s.b.p;
  ASSERT_EQ(p.instrs.size(), 2u);
  ASSERT_TRUE(adamwKeepsAmax(s.adamw()));
  EXPECT_FALSE(adamwKeepsCopy(s.adamw()));
  ASSERT_EQ(s.adamw().out.size(), 4u);
  uint32_t amax = s.adamw().out[3];
  EXPECT_EQ(p.instrs[0].in[0], amax);
  EXPECT_EQ(p.buffers[amax].shape, (Shape{1, 1}));
  EXPECT_EQ(p.buffers[amax].name, "w.amax");
  std::vector<RoundedCopy> kept = roundedCopies(p);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].kind, RoundedCopy::Amax);
  EXPECT_EQ(kept[0].copy, amax);
  EXPECT_EQ(kept[0].input, s.p);
  p.buffers[amax].offset = p.arenaBytes; // as the arena planner would
  p.arenaBytes += 64;
  EXPECT_EQ(p.validate(), "");
  // Folding again changes nothing: the scale no longer reads the weight.
  EXPECT_EQ(foldWeightAmax(p), 0);
}

TEST(WeightAmax, FoldLeavesRowwiseScalesAndScalesAfterAdamW) {
  BareStep rowwise({3, 1}); // one scale per row: AdamW keeps no row maxima
  EXPECT_EQ(foldWeightAmax(rowwise.b.p), 0);
  EXPECT_EQ(rowwise.b.p.instrs[0].in[0], rowwise.p);
  BareStep late; // a scale after AdamW reads the new weights, not this run's start
  std::swap(late.b.p.instrs[0], late.b.p.instrs[1]);
  EXPECT_EQ(foldWeightAmax(late.b.p), 0);
  BareStep frozen; // no in-place update: nothing keeps an amax between runs
  frozen.b.p.updates.erase(frozen.b.p.updates.begin());
  EXPECT_EQ(foldWeightAmax(frozen.b.p), 0);
}

TEST(WeightAmax, ValidateRefusesMalformedAmaxes) {
  auto folded = [] {
    BareStep s;
    foldWeightAmax(s.b.p);
    uint32_t amax = s.adamw().out[3];
    s.b.p.buffers[amax].offset = s.b.p.arenaBytes;
    s.b.p.arenaBytes += 64;
    return s;
  };
  auto expectError = [](const Program &p, const std::string &want) {
    std::string e = p.validate();
    EXPECT_NE(e.find(want), std::string::npos) << "got: " << e << "\nwant: " << want;
  };
  {
    BareStep s = folded();
    s.b.p.updates.erase(s.b.p.updates.begin()); // p' no longer updates p
    expectError(s.b.p, "instr 1 (adamw): an amax buffer 11 'w.amax' needs the parameter updated "
                       "in place");
  }
  {
    BareStep s = folded();
    s.b.p.buffers[s.adamw().out[3]].shape = {1, 2};
    s.b.p.buffers[s.adamw().out[3]].bytes = 8;
    expectError(s.b.p, "instr 1 (adamw): the amax output must be [1, 1] f32, got [1,2] f32");
  }
  {
    BareStep s = folded();
    s.b.p.buffers[s.adamw().out[3]].dtype = DType::BF16; // bf16 storage is the copy's alone
    s.b.p.buffers[s.adamw().out[3]].bytes = 2;
    expectError(s.b.p, "the amax output must be [1, 1] f32, got [1,1] bf16");
  }
  {
    BareStep s = folded();
    s.adamw().ints = {2};
    expectError(s.b.p, "instr 1 (adamw): ints must be empty or [1] (an amax output)");
  }
  {
    BareStep s = folded();
    s.adamw().ints = {}; // four outputs without the flag: a rounded copy of the wrong shape
    expectError(s.b.p, "instr 1 (adamw): output 3 has shape [1,1], expected [3,37]");
  }
  {
    BareStep s = folded();
    s.adamw().out.pop_back(); // the flag without an amax
    s.b.p.instrs[0].in[0] = s.p;
    expectError(s.b.p, "instr 1 (adamw): takes 4 to 5 outputs, got 3");
  }
}

} // namespace
} // namespace loom::rt::test
