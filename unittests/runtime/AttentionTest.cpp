//===- AttentionTest.cpp - Grouped-query attention vs a naive reference ---===//
//
// Part of loom, under the Apache License v2.0.
//
// The reference materializes the full score matrix, applies the mask as
// -inf and repeats kv heads explicitly (repeat_kv), i.e. the unfused graph
// the attention fusion replaces.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

struct AttentionCase {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  bool causal;
};

std::vector<double> naiveAttention(const AttentionCase &c, const std::vector<float> &q,
                                   const std::vector<float> &k, const std::vector<float> &v,
                                   double scale) {
  std::vector<double> out;
  int64_t offset = c.S > c.T ? c.S - c.T : 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      int64_t g = h / (c.Hq / c.Hkv); // repeat_kv: each kv head serves Hq/Hkv query heads
      for (int64_t i = 0; i < c.T; ++i) {
        std::vector<double> s(size_t(c.S));
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.S; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot += double(q[((b * c.Hq + h) * c.T + i) * c.D + d]) *
                   k[((b * c.Hkv + g) * c.S + j) * c.D + d];
          s[j] = c.causal && j > i + offset ? -INFINITY : scale * dot;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double &x : s) sum += x = std::exp(x - mx);
        for (int64_t d = 0; d < c.Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < c.S; ++j) acc += s[j] * v[((b * c.Hkv + g) * c.S + j) * c.Dv + d];
          out.push_back(acc / sum);
        }
      }
    }
  return out;
}

void checkAttention(const AttentionCase &c, Rng &rng) {
  SCOPED_TRACE("Hq " + std::to_string(c.Hq) + " Hkv " + std::to_string(c.Hkv) + " T " +
               std::to_string(c.T) + " S " + std::to_string(c.S) + " causal " +
               std::to_string(c.causal));
  Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D}, vs = {c.B, c.Hkv, c.S, c.Dv};
  double scale = 1 / std::sqrt(double(c.D));
  ProgramBuilder pb;
  uint32_t q = pb.input(DType::F32, qs), k = pb.input(DType::F32, ks), v = pb.input(DType::F32, vs);
  uint32_t o = pb.output(DType::F32, {c.B, c.Hq, c.T, c.Dv});
  pb.instr(OpCode::Attention, {q, k, v}, {o}, {c.causal}, {scale});
  auto qv = rng.uniform(numel(qs), -2, 2), kv = rng.uniform(numel(ks), -2, 2),
       vv = rng.uniform(numel(vs));
  RunResult r = runProgram(pb.p, {toBytes(qv), toBytes(kv), toBytes(vv)});
  ASSERT_TRUE(r.ok) << r.err;
  // Outputs are convex combinations of values in [-1, 1].
  EXPECT_TRUE(allClose(r.out<float>(), naiveAttention(c, qv, kv, vv, scale), 1e-6, 1e-7));
}

TEST(Attention, GroupedQueryCausal) {
  Rng rng;
  checkAttention({2, 4, 2, 9, 9, 16, 16, true}, rng);
}

TEST(Attention, GroupedQueryNotCausal) {
  Rng rng;
  checkAttention({2, 4, 2, 7, 11, 8, 8, false}, rng);
}

TEST(Attention, CausalWithMoreKeysThanQueries) {
  Rng rng;
  // The T queries are the last T of S positions (a KV cache).
  checkAttention({1, 4, 2, 3, 10, 8, 8, true}, rng);
}

TEST(Attention, CausalWithFewerKeysThanQueries) {
  Rng rng;
  checkAttention({1, 2, 2, 6, 4, 8, 8, true}, rng);
}

TEST(Attention, MultiHeadAndMultiQueryAndValueWidth) {
  Rng rng;
  checkAttention({1, 3, 3, 5, 5, 8, 8, true}, rng);  // Hkv == Hq
  checkAttention({2, 4, 1, 6, 6, 8, 12, true}, rng); // one kv head, Dv != D
}

TEST(Attention, LongSequenceAcrossThreads) {
  Rng rng;
  checkAttention({1, 4, 2, 128, 128, 32, 32, true}, rng);
}

} // namespace
