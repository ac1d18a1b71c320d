//===- AttentionTest.cpp - Grouped-query attention vs a naive reference ---===//
//
// Part of loom, under the Apache License v2.0.
//
// The reference materializes the full score matrix, applies the mask as
// -inf and repeats kv heads explicitly (repeat_kv), i.e. the unfused graph
// the attention fusion replaces. The logsumexp output has a reference of
// its own, summed in long double without the max shift the kernel uses.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

struct AttentionCase {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  bool causal;
  int64_t window = 0; // a sliding window (causal only)
  double softcap = 0; // scores capped to softcap tanh(s / softcap)

  bool hidden(int64_t i, int64_t j) const {
    int64_t offset = S > T ? S - T : 0;
    return (causal && j > i + offset) || (window > 0 && j <= i + offset - window);
  }
  double score(double scaled) const {
    return softcap > 0 ? softcap * std::tanh(scaled / softcap) : scaled;
  }
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
          s[j] = c.hidden(i, j) ? -INFINITY : c.score(scale * dot);
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double &x : s) sum += x = std::exp(x - mx);
        for (int64_t d = 0; d < c.Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < c.S; ++j) acc += s[j] * v[((b * c.Hkv + g) * c.S + j) * c.Dv + d];
          // No key at all (S == 0): the opcode's contract is o = 0 where
          // the unfused graph would divide 0 by 0.
          out.push_back(c.S ? acc / sum : 0.0);
        }
      }
    }
  return out;
}

/// Per query row, log sum_j exp(scale q_i.k_j) over the keys the mask lets
/// through, in long double straight from the definition (no max shift:
/// these scores are a few units). +inf for a row that sees no key, by the
/// opcode's contract (Program.h).
std::vector<double> naiveLogsumexp(const AttentionCase &c, const std::vector<float> &q,
                                   const std::vector<float> &k, double scale) {
  std::vector<double> out;
  int64_t offset = c.S > c.T ? c.S - c.T : 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      int64_t g = h / (c.Hq / c.Hkv);
      for (int64_t i = 0; i < c.T; ++i) {
        long double sum = 0;
        int64_t seen = 0;
        for (int64_t j = 0; j < c.S; ++j) {
          if (c.hidden(i, j))
            continue;
          long double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot += (long double)q[((b * c.Hq + h) * c.T + i) * c.D + d] *
                   k[((b * c.Hkv + g) * c.S + j) * c.D + d];
          sum += std::exp((long double)c.score(double((long double)scale * dot)));
          ++seen;
        }
        out.push_back(seen ? double(std::log(sum)) : INFINITY);
      }
    }
  return out;
}

/// `got` equals `want` within the tolerance where `want` is finite, and is
/// +inf exactly where `want` is.
::testing::AssertionResult lseClose(const std::vector<float> &got, const std::vector<double> &want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  std::vector<float> finiteGot;
  std::vector<double> finiteWant;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      if (!(std::isinf(got[i]) && got[i] > 0))
        return ::testing::AssertionFailure() << "row " << i << ": got " << got[i] << ", expected +inf";
      continue;
    }
    finiteGot.push_back(got[i]);
    finiteWant.push_back(want[i]);
  }
  // One f32 rounding of a value of a few units.
  return allClose(finiteGot, finiteWant, 1e-6, 1e-6);
}

/// Runs attention over fresh random inputs; checks o against the unfused
/// graph and lse against naiveLogsumexp.
void checkAttention(const AttentionCase &c, Rng &rng) {
  SCOPED_TRACE("Hq " + std::to_string(c.Hq) + " Hkv " + std::to_string(c.Hkv) + " T " +
               std::to_string(c.T) + " S " + std::to_string(c.S) + " causal " +
               std::to_string(c.causal));
  Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D}, vs = {c.B, c.Hkv, c.S, c.Dv};
  double scale = 1 / std::sqrt(double(c.D));
  ProgramBuilder pb;
  uint32_t q = pb.input(DType::F32, qs), k = pb.input(DType::F32, ks), v = pb.input(DType::F32, vs);
  uint32_t o = pb.output(DType::F32, {c.B, c.Hq, c.T, c.Dv});
  uint32_t lse = pb.output(DType::F32, {c.B, c.Hq, c.T});
  std::vector<int64_t> ints = {c.causal};
  std::vector<double> floats = {scale};
  if (c.window)
    ints = {c.causal, 0, c.window};
  if (c.softcap)
    floats.push_back(c.softcap);
  pb.instr(OpCode::Attention, {q, k, v}, {o, lse}, ints, floats);
  ASSERT_EQ(pb.p.validate(), "");
  auto qv = rng.uniform(numel(qs), -2, 2), kv = rng.uniform(numel(ks), -2, 2),
       vv = rng.uniform(numel(vs));
  RunResult r = runProgram(pb.p, {toBytes(qv), toBytes(kv), toBytes(vv)});
  ASSERT_TRUE(r.ok) << r.err;
  // Outputs are convex combinations of values in [-1, 1].
  EXPECT_TRUE(allClose(r.out<float>(0), naiveAttention(c, qv, kv, vv, scale), 1e-6, 1e-7));
  EXPECT_TRUE(lseClose(r.out<float>(1), naiveLogsumexp(c, qv, kv, scale)));
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

TEST(Attention, SlidingWindowAndSoftcap) {
  // Mistral's window (also with more keys than queries), Gemma 2's capped
  // scores, and both; the window wider than the sequence cuts nothing.
  Rng rng;
  AttentionCase window = {2, 4, 2, 9, 9, 8, 8, true, 3};
  checkAttention(window, rng);
  AttentionCase cached = {1, 4, 2, 3, 10, 8, 8, true, 4};
  checkAttention(cached, rng);
  AttentionCase capped = {2, 4, 2, 9, 9, 8, 8, true, 0, 1.5};
  checkAttention(capped, rng);
  AttentionCase both = {1, 4, 1, 12, 12, 8, 8, true, 5, 2.0};
  checkAttention(both, rng);
  AttentionCase wide = {1, 2, 2, 6, 6, 8, 8, true, 100};
  checkAttention(wide, rng);
}

TEST(Attention, WindowWithoutCausalIsInvalid) {
  ProgramBuilder pb;
  uint32_t q = pb.input(DType::F32, {1, 1, 4, 8}), k = pb.input(DType::F32, {1, 1, 4, 8});
  uint32_t o = pb.output(DType::F32, {1, 1, 4, 8}), lse = pb.output(DType::F32, {1, 1, 4});
  pb.instr(OpCode::Attention, {q, k, k}, {o, lse}, {0, 0, 2}, {0.5});
  EXPECT_NE(pb.p.validate().find("window 2 must be 0, or positive with causal"), std::string::npos)
      << pb.p.validate();
  pb.p.instrs[0].ints = {1, 0, 2};
  pb.p.instrs[0].floats = {0.5, -1.0};
  EXPECT_NE(pb.p.validate().find("softcap -1 must be 0 (off) or positive"), std::string::npos)
      << pb.p.validate();
}

/// x [B, H, T, D] <-> [B, T, H, D] (the swap is its own inverse given the
/// source's dims).
std::vector<float> swapHeadsAndTokens(const std::vector<float> &x, int64_t B, int64_t H, int64_t T,
                                      int64_t D) {
  std::vector<float> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          y[((b * T + t) * H + h) * D + d] = x[((b * H + h) * T + t) * D + d];
  return y;
}

/// Tokens-major attention (ints[3] = 1, AttentionLayout.h): q [B, T, Hq, D]
/// ... o [B, T, Hq, Dv], lse still [B, Hq, T]; against the unfused graph of
/// the heads-major operands.
void checkTokensMajor(const AttentionCase &c, Rng &rng) {
  SCOPED_TRACE("tokens-major Hq " + std::to_string(c.Hq) + " Hkv " + std::to_string(c.Hkv) +
               " T " + std::to_string(c.T) + " S " + std::to_string(c.S));
  Shape qs = {c.B, c.T, c.Hq, c.D}, ks = {c.B, c.S, c.Hkv, c.D}, vs = {c.B, c.S, c.Hkv, c.Dv};
  double scale = 1 / std::sqrt(double(c.D));
  ProgramBuilder pb;
  uint32_t q = pb.input(DType::F32, qs), k = pb.input(DType::F32, ks), v = pb.input(DType::F32, vs);
  uint32_t o = pb.output(DType::F32, {c.B, c.T, c.Hq, c.Dv});
  uint32_t lse = pb.output(DType::F32, {c.B, c.Hq, c.T});
  std::vector<double> floats = {scale};
  if (c.softcap)
    floats.push_back(c.softcap);
  pb.instr(OpCode::Attention, {q, k, v}, {o, lse}, {c.causal, 0, c.window, 1}, floats);
  ASSERT_EQ(pb.p.validate(), "");
  // Heads-major values, stored tokens-major.
  auto qh = rng.uniform(numel(qs), -2, 2), kh = rng.uniform(numel(ks), -2, 2),
       vh = rng.uniform(numel(vs));
  RunResult r = runProgram(pb.p, {toBytes(swapHeadsAndTokens(qh, c.B, c.Hq, c.T, c.D)),
                                  toBytes(swapHeadsAndTokens(kh, c.B, c.Hkv, c.S, c.D)),
                                  toBytes(swapHeadsAndTokens(vh, c.B, c.Hkv, c.S, c.Dv))});
  ASSERT_TRUE(r.ok) << r.err;
  // o back to heads-major: [B, T, Hq, Dv] is the swap of [B, Hq, T, Dv].
  std::vector<float> got(r.out<float>(0).size());
  std::vector<float> stored = r.out<float>(0);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t d = 0; d < c.Dv; ++d)
          got[((b * c.Hq + h) * c.T + t) * c.Dv + d] = stored[((b * c.T + t) * c.Hq + h) * c.Dv + d];
  EXPECT_TRUE(allClose(got, naiveAttention(c, qh, kh, vh, scale), 1e-6, 1e-7));
  EXPECT_TRUE(lseClose(r.out<float>(1), naiveLogsumexp(c, qh, kh, scale)));
}

TEST(Attention, TokensMajorOperands) {
  Rng rng;
  checkTokensMajor({2, 4, 2, 9, 9, 16, 16, true}, rng);
  checkTokensMajor({1, 4, 2, 3, 10, 8, 8, true}, rng);         // more keys than queries
  checkTokensMajor({2, 4, 1, 6, 6, 8, 12, false}, rng);        // one kv head, Dv != D
  checkTokensMajor({1, 4, 1, 12, 12, 8, 8, true, 5, 2.0}, rng); // window and softcap
}

TEST(Attention, BadLayoutIsInvalid) {
  ProgramBuilder pb;
  uint32_t q = pb.input(DType::F32, {1, 4, 2, 8}), k = pb.input(DType::F32, {1, 4, 1, 8});
  uint32_t o = pb.output(DType::F32, {1, 4, 2, 8}), lse = pb.output(DType::F32, {1, 2, 4});
  pb.instr(OpCode::Attention, {q, k, k}, {o, lse}, {1, 0, 0, 2}, {0.5});
  EXPECT_NE(pb.p.validate().find("layout 2 must be 0 (heads-major) or 1 (tokens-major)"),
            std::string::npos)
      << pb.p.validate();
  // Tokens-major, lse is [B, Hq, T] = [1, 2, 4]: valid.
  pb.p.instrs[0].ints = {1, 0, 0, 1};
  EXPECT_EQ(pb.p.validate(), "");
  // Read heads-major, the same buffers do not fit (2 query heads over 4 kv heads).
  pb.p.instrs[0].ints = {1, 0, 0, 0};
  EXPECT_NE(pb.p.validate(), "");
}

TEST(Attention, LongSequenceAcrossThreads) {
  Rng rng;
  checkAttention({1, 4, 2, 128, 128, 32, 32, true}, rng);
}

TEST(Attention, LogsumexpIsTheScaledMaskedScoresLogsumexp) {
  // lse against a long-double logsumexp of the scores the mask leaves,
  // row by row: causal with the offset (T < S, the queries the last T of S
  // positions) and without (T > S), grouped-query, not causal.
  Rng rng;
  checkAttention({1, 4, 2, 3, 10, 8, 8, true}, rng);
  checkAttention({2, 4, 2, 5, 17, 8, 6, true}, rng);
  checkAttention({1, 2, 2, 6, 4, 8, 8, true}, rng);
  checkAttention({2, 4, 2, 7, 11, 8, 8, false}, rng);
}

TEST(Attention, RowsWithoutKeysGetZeroOutputAndInfiniteLogsumexp) {
  // With no key at all (S == 0) every row is fully masked: its softmax is
  // empty, so o = 0, and lse = +inf, which makes the backward's
  // exp(s - lse) zero. (With S >= 1 every row sees key 0, causal or not.)
  Rng rng;
  checkAttention({1, 2, 1, 3, 0, 8, 8, true}, rng);
  checkAttention({2, 2, 2, 4, 0, 8, 5, false}, rng);
}

TEST(Attention, LogsumexpIsF64ForF64Operands) {
  // The statistics have the computation's dtype: an f64 run keeps them to
  // double rounding (the compiler's gradient checks run in f64).
  Rng rng;
  AttentionCase c{1, 4, 2, 5, 7, 8, 8, true};
  Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D};
  double scale = 0.4;
  ProgramBuilder pb;
  uint32_t q = pb.input(DType::F64, qs), k = pb.input(DType::F64, ks), v = pb.input(DType::F64, ks);
  pb.instr(OpCode::Attention, {q, k, v},
           {pb.output(DType::F64, qs), pb.output(DType::F64, {c.B, c.Hq, c.T})}, {c.causal},
           {scale});
  ASSERT_EQ(pb.p.validate(), "");
  auto qv = rng.uniform(numel(qs), -2, 2), kv = rng.uniform(numel(ks), -2, 2),
       vv = rng.uniform(numel(ks));
  auto f64 = [](const std::vector<float> &x) { return std::vector<double>(x.begin(), x.end()); };
  RunResult r = runProgram(pb.p, {toBytes(f64(qv)), toBytes(f64(kv)), toBytes(f64(vv))});
  ASSERT_TRUE(r.ok) << r.err;
  std::vector<double> got = r.out<double>(1), want = naiveLogsumexp(c, qv, kv, scale);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-13) << "row " << i;
}

/// bf16 bits (the top half) of f32 values, and the f32 value of bf16 bits.
uint16_t bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}
float bf16Value(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Attention, Bf16StorageMatchesTheReference) {
  // q, k, v and the output in bf16 storage (autocast's casts folded in):
  // the inputs widen exactly and the f32 result is rounded once, so the
  // output is the reference on the widened inputs within one bf16 rounding.
  Rng rng;
  AttentionCase c{2, 4, 2, 19, 19, 16, 16, true};
  Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D};
  std::vector<uint16_t> bits[3];
  std::vector<float> widened[3];
  for (int k = 0; k < 3; ++k)
    for (float x : rng.uniform(numel(k == 0 ? qs : ks), -2, 2)) {
      bits[k].push_back(bf16Bits(x));
      widened[k].push_back(bf16Value(bits[k].back()));
    }
  double scale = 1 / std::sqrt(double(c.D));
  ProgramBuilder pb;
  uint32_t q = pb.input(DType::BF16, qs), k = pb.input(DType::BF16, ks),
           v = pb.input(DType::BF16, ks), o = pb.output(DType::BF16, qs);
  uint32_t lse = pb.output(DType::F32, {c.B, c.Hq, c.T}); // never bf16
  pb.instr(OpCode::Attention, {q, k, v}, {o, lse}, {c.causal, 1}, {scale});
  ASSERT_EQ(pb.p.validate(), "");
  RunResult r = runProgram(pb.p, {toBytes(bits[0]), toBytes(bits[1]), toBytes(bits[2])});
  ASSERT_TRUE(r.ok) << r.err;
  std::vector<float> got;
  for (uint16_t h : r.out<uint16_t>(0)) got.push_back(bf16Value(h));
  // Rounding to nearest bf16 (8 significant bits) moves a value by at most
  // 2^-8 of itself.
  EXPECT_TRUE(allClose(got, naiveAttention(c, widened[0], widened[1], widened[2], scale),
                       1.0 / 256 + 1e-6, 1e-7));
  // lse is f32 beside bf16 storage: rounded once, from the f32 computation.
  EXPECT_TRUE(lseClose(r.out<float>(1), naiveLogsumexp(c, widened[0], widened[1], scale)));
}

} // namespace
