//===- MixedDtypeTest.cpp - bf16 storage of f32 instructions on the CPU ---===//
//
// Part of loom, under the Apache License v2.0.
//
// The CPU backend runs an instruction with bf16 operands as its definition
// (widen, compute in f32, round once); these tests check that it gives the
// bits of the unfused program (Cast, f32 instruction, Cast) for every slot
// Program.h allows, and that validate() refuses bf16 everywhere else.
//===----------------------------------------------------------------------===//
#include "MixedDtypeCases.h"

namespace loom::rt::test {
namespace {

void expectFusedEqualsUnfused(const MixedCase &c, Rng &rng) {
  SCOPED_TRACE(c.name);
  MixedPrograms m = buildMixed(c, rng);
  ASSERT_EQ(m.fused.validate(), "");
  ASSERT_EQ(m.unfused.validate(), "");
  RunResult fused = runProgram(m.fused, m.inputs), unfused = runProgram(m.unfused, m.inputs);
  ASSERT_TRUE(fused.ok) << fused.err;
  ASSERT_TRUE(unfused.ok) << unfused.err;
  for (size_t k = 0; k < fused.outputs.size(); ++k) EXPECT_EQ(fused.outputs[k], unfused.outputs[k]);
}

TEST(MixedDtype, FusedEqualsUnfusedBitForBit) {
  Rng rng;
  for (const MixedCase &c : mixedCases()) expectFusedEqualsUnfused(c, rng);
}

TEST(MixedDtype, AttentionFusedEqualsUnfusedBitForBit) {
  // Grouped-query, causal and not, head dims 64 and 16; the forward and the
  // gradient with every slot in bf16 in some case (MixedDtypeCases.h).
  Rng rng;
  for (const MixedCase &c : attentionMixedCases()) expectFusedEqualsUnfused(c, rng);
}

TEST(MixedDtype, Bf16OutputsRoundLikeCast) {
  // A value halfway between two bf16 numbers rounds to the even one, and the
  // folded store must agree: 1 + 2^-8 lies between 1 and 1 + 2^-7.
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {2}), y = b.output(DType::BF16, {2});
  b.instr(OpCode::Neg, {x}, {y});
  ASSERT_EQ(b.p.validate(), "");
  RunResult r = runProgram(b.p, {toBytes(std::vector<float>{1.0f + 1.0f / 256, 1.0f + 3.0f / 256})});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out<uint16_t>(), (std::vector<uint16_t>{0xbf80, 0xbf82})); // -1, -(1 + 2^-6)
}

/// validate()'s verdict on a one-instruction program whose operands have the
/// given dtypes.
std::string verdict(OpCode op, const std::vector<std::pair<DType, Shape>> &ins,
                    const std::vector<std::pair<DType, Shape>> &outs, std::vector<int64_t> ints = {},
                    std::vector<double> floats = {}) {
  ProgramBuilder b;
  std::vector<uint32_t> in, out;
  for (auto &[t, s] : ins) in.push_back(b.input(t, s));
  for (auto &[t, s] : outs) out.push_back(b.output(t, s));
  b.instr(op, in, out, std::move(ints), std::move(floats));
  return b.p.validate();
}

TEST(MixedDtype, ValidateRefusesBf16OutsideTheAllowedSlots) {
  const DType F = DType::F32, H = DType::BF16, D = DType::F64;
  Shape x = {4, 8}, w = {8};
  EXPECT_EQ(verdict(OpCode::Add, {{H, x}, {F, x}}, {{H, x}}), "");
  EXPECT_NE(verdict(OpCode::Add, {{H, x}, {D, x}}, {{D, x}}), ""); // bf16 with f64
  EXPECT_EQ(verdict(OpCode::RmsNorm, {{H, x}, {F, w}}, {{H, x}}, {}, {1e-5}), "");
  EXPECT_NE(verdict(OpCode::RmsNorm, {{F, x}, {H, w}}, {{F, x}}, {}, {1e-5}), ""); // weight
  EXPECT_EQ(verdict(OpCode::RmsNormGrad, {{F, x}, {F, w}, {H, x}}, {{H, x}, {F, w}}, {}, {1e-5}),
            "");
  EXPECT_EQ(verdict(OpCode::RmsNormGrad, {{H, x}, {F, w}, {F, x}}, {{F, x}, {F, w}}, {}, {1e-5}),
            ""); // x (a per-head q/k norm's bf16 product)
  EXPECT_NE(verdict(OpCode::RmsNormGrad, {{F, x}, {H, w}, {F, x}}, {{F, x}, {F, w}}, {}, {1e-5}),
            ""); // w
  EXPECT_NE(verdict(OpCode::RmsNormGrad, {{F, x}, {F, w}, {F, x}}, {{F, x}, {H, w}}, {}, {1e-5}),
            ""); // dw
  EXPECT_EQ(verdict(OpCode::LayerNorm, {{F, x}, {F, w}, {F, w}}, {{H, x}}, {}, {1e-5}), "");
  EXPECT_NE(verdict(OpCode::LayerNorm, {{F, x}, {F, w}, {H, w}}, {{F, x}}, {}, {1e-5}), ""); // b
  EXPECT_EQ(verdict(OpCode::LayerNormGrad, {{F, x}, {F, w}, {H, x}}, {{H, x}, {F, w}, {F, w}}, {},
                    {1e-5}),
            "");
  EXPECT_NE(verdict(OpCode::LayerNormGrad, {{F, x}, {F, w}, {H, x}}, {{F, x}, {F, w}, {H, w}}, {},
                    {1e-5}),
            ""); // db
  Shape t = {1, 8};
  EXPECT_EQ(verdict(OpCode::Rotary, {{H, x}, {F, t}, {F, t}}, {{F, x}}), "");
  EXPECT_NE(verdict(OpCode::Rotary, {{F, x}, {H, t}, {F, t}}, {{F, x}}), ""); // a table
  EXPECT_NE(verdict(OpCode::Softmax, {{H, x}}, {{F, x}}, {1}), ""); // not a folding opcode
  EXPECT_EQ(verdict(OpCode::Reduce, {{H, x}}, {{F, {4, 1}}}, {0, 1}), ""); // a bias gradient
  EXPECT_NE(verdict(OpCode::Reduce, {{H, x}}, {{H, {4, 1}}}, {0, 1}), ""); // the sum stays f32
  EXPECT_EQ(verdict(OpCode::SumSquares, {{H, x}}, {{F, {}}}), "");
  EXPECT_NE(verdict(OpCode::SumSquares, {{H, x}}, {{H, {}}}), ""); // the sum stays f32
  std::vector<std::pair<DType, Shape>> adam = {{F, x}, {H, x}, {F, x}, {F, x}, {F, {}}, {F, {}}};
  std::vector<std::pair<DType, Shape>> adamOut = {{F, x}, {F, x}, {F, x}};
  EXPECT_EQ(verdict(OpCode::AdamW, adam, adamOut, {}, {0.9, 0.95, 1e-8, 0.1}), ""); // g
  adam[1].first = F, adam[2].first = H;
  EXPECT_NE(verdict(OpCode::AdamW, adam, adamOut, {}, {0.9, 0.95, 1e-8, 0.1}), ""); // a moment
  EXPECT_NE(verdict(OpCode::Slice, {{H, x}}, {{F, x}}, {0, 1, 0, 1}), "");
  EXPECT_EQ(verdict(OpCode::Transpose, {{H, x}}, {{F, {8, 4}}}, {1, 0}), "");
  EXPECT_NE(verdict(OpCode::Transpose, {{H, x}}, {{D, {8, 4}}}, {1, 0}), "");
  // Attention: every operand but lse, beside f32 ones only; lse has the
  // computation's dtype (f32, f64 for f64 operands), never bf16.
  Shape q = {1, 4, 5, 8}, kv = {1, 2, 5, 8}, rows = {1, 4, 5};
  EXPECT_EQ(verdict(OpCode::Attention, {{H, q}, {H, kv}, {F, kv}}, {{H, q}, {F, rows}}, {1, 1},
                    {0.3}),
            "");
  EXPECT_EQ(verdict(OpCode::Attention, {{F, q}, {F, kv}, {F, kv}}, {{H, q}, {F, rows}}, {1}, {0.3}),
            "");
  EXPECT_EQ(verdict(OpCode::Attention, {{D, q}, {D, kv}, {D, kv}}, {{D, q}, {D, rows}}, {1}, {0.3}),
            "");
  EXPECT_NE(verdict(OpCode::Attention, {{H, q}, {D, kv}, {D, kv}}, {{D, q}, {D, rows}}, {1}, {0.3}),
            "");
  const std::string notBf16 = "lse must be f32 (the computation's dtype), got bf16";
  EXPECT_NE(verdict(OpCode::Attention, {{H, q}, {H, kv}, {H, kv}}, {{H, q}, {H, rows}}, {1}, {0.3})
                .find(notBf16),
            std::string::npos);
  EXPECT_NE(verdict(OpCode::Attention, {{D, q}, {D, kv}, {D, kv}}, {{D, q}, {F, rows}}, {1}, {0.3})
                .find("lse must be f64 (the computation's dtype), got f32"),
            std::string::npos);
  EXPECT_EQ(verdict(OpCode::AttentionGrad, {{F, q}, {F, kv}, {F, kv}, {H, q}, {F, rows}, {H, q}},
                    {{H, q}, {F, kv}, {H, kv}}, {1, 1}, {0.3}),
            "");
  EXPECT_NE(verdict(OpCode::AttentionGrad, {{D, q}, {D, kv}, {D, kv}, {D, q}, {D, rows}, {D, q}},
                    {{D, q}, {D, kv}, {H, kv}}, {1}, {0.3}),
            ""); // bf16 beside f64
  EXPECT_NE(verdict(OpCode::AttentionGrad, {{H, q}, {H, kv}, {H, kv}, {H, q}, {H, rows}, {H, q}},
                    {{H, q}, {H, kv}, {H, kv}}, {1}, {0.3})
                .find(notBf16),
            std::string::npos);
}

} // namespace
} // namespace loom::rt::test
