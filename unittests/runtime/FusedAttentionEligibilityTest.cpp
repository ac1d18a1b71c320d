//===- FusedAttentionEligibilityTest.cpp - Which attention runs fused -----===//
//
// Part of loom, under the Apache License v2.0.
//
// checkFusedAttention on hand-built attention instructions: what the fused
// bf16 engines take (grouped kv heads included), and each refusal named.
// The programs of real models are checked by test/integration/
// train-fused-attention.test.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

#include "loom/runtime/FusedAttentionEligibility.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

/// One attention forward on q [2, Hq, T, 8], k and v [2, Hkv, S, 8], bf16
/// storage unless `f32`, with the given ints and floats.
Program attention(std::vector<int64_t> ints, std::vector<double> floats, int64_t Hq = 4,
                  int64_t Hkv = 2, int64_t T = 16, int64_t S = 16, bool f32 = false) {
  ProgramBuilder b;
  DType t = f32 ? DType::F32 : DType::BF16;
  uint32_t q = b.input(t, {2, Hq, T, 8}), k = b.input(t, {2, Hkv, S, 8}),
           v = b.input(t, {2, Hkv, S, 8});
  uint32_t o = b.output(t, {2, Hq, T, 8}), lse = b.output(DType::F32, {2, Hq, T});
  b.instr(OpCode::Attention, {q, k, v}, {o, lse}, std::move(ints), std::move(floats));
  return b.p;
}

std::string why(const Program &p) { return checkFusedAttention(p, p.instrs[0]).why; }

TEST(FusedAttentionEligibility, CausalBf16GroupedQuery) {
  Program p = attention({1, 1}, {0.35});
  FusedAttentionCheck c = checkFusedAttention(p, p.instrs[0]);
  ASSERT_TRUE(c.eligible) << c.why;
  EXPECT_EQ(c.why, "");
  EXPECT_EQ(c.shape.B, 2);
  EXPECT_EQ(c.shape.Hq, 4);
  EXPECT_EQ(c.shape.Hkv, 2);
  EXPECT_EQ(c.shape.T, 16);
  EXPECT_EQ(c.shape.D, 8);
  EXPECT_FLOAT_EQ(c.shape.scale, 0.35f);
  // A window of 0 is no window.
  p = attention({1, 1, 0}, {0.35});
  EXPECT_TRUE(checkFusedAttention(p, p.instrs[0]).eligible);
}

TEST(FusedAttentionEligibility, GradientSignature) {
  ProgramBuilder b;
  Shape s = {1, 2, 4, 8};
  uint32_t q = b.input(DType::BF16, s), k = b.input(DType::BF16, s), v = b.input(DType::BF16, s),
           o = b.input(DType::BF16, s), lse = b.input(DType::F32, {1, 2, 4}),
           dy = b.input(DType::BF16, s);
  uint32_t dq = b.output(DType::BF16, s), dk = b.output(DType::BF16, s),
           dv = b.output(DType::BF16, s);
  b.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dy}, {dq, dk, dv}, {1, 1}, {0.5});
  EXPECT_TRUE(checkFusedAttention(b.p, b.p.instrs[0]).eligible);
  b.p.instrs[0].in.pop_back();
  EXPECT_EQ(checkFusedAttention(b.p, b.p.instrs[0]).why,
            "not the signature with the forward's lse statistics");
}

TEST(FusedAttentionEligibility, Refusals) {
  // Without the bf16 mark: in an f32 program that is what was asked for,
  // in a program with bf16 values it is a lost mark, worth saying.
  Program f32 = attention({1}, {0.35}, 4, 2, 16, 16, /*f32=*/true);
  FusedAttentionCheck c = checkFusedAttention(f32, f32.instrs[0]);
  EXPECT_FALSE(c.eligible);
  EXPECT_TRUE(c.f32Program);
  EXPECT_EQ(c.why, "q, k, v are not marked as bf16 values (bf16_operands = 0)");
  Program mixed = attention({1, 0}, {0.35});
  c = checkFusedAttention(mixed, mixed.instrs[0]);
  EXPECT_FALSE(c.eligible);
  EXPECT_FALSE(c.f32Program);
  EXPECT_EQ(why(attention({0, 1}, {0.35})), "not causal");
  EXPECT_EQ(why(attention({1, 1, 4}, {0.35})), "a sliding window of 4");
  EXPECT_EQ(why(attention({1, 1}, {0.35, 50.0})), "a softcap of 50");
  EXPECT_EQ(why(attention({1, 1}, {0.35}, 4, 2, 8, 16)),
            "keys [2,2,16,8] not as many as queries [2,4,8,8]");
  EXPECT_EQ(why(attention({1, 1}, {0.35}, 4, 3)), "3 kv heads do not divide 4 query heads");
  Program p = attention({1, 1}, {0.35});
  p.buffers[p.instrs[0].in[2]].shape = {2, 2, 16, 4};
  EXPECT_EQ(why(p), "v [2,2,16,4] unlike k [2,2,16,8]");
  p.instrs[0].op = OpCode::Softmax;
  EXPECT_EQ(why(p), "softmax is not an attention");
}

} // namespace
