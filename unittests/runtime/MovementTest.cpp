//===- MovementTest.cpp - Transpose, Slice, Concat, Split, Expand, ... ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Movement must be bit exact, so these compare with rtol 0. The references
// index with explicit coordinates rather than strides.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

/// Row-major coordinates of flat index i.
Shape coords(int64_t i, const Shape &s) {
  Shape c(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    c[d] = i % s[d];
    i /= s[d];
  }
  return c;
}

int64_t flat(const Shape &c, const Shape &s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + c[d];
  return i;
}

TEST(Movement, TransposeEveryPermutationOfRank3) {
  Rng rng;
  Shape s = {3, 4, 5};
  std::vector<int64_t> perm = {0, 1, 2};
  auto xv = rng.uniform(numel(s));
  do {
    Shape os = {s[perm[0]], s[perm[1]], s[perm[2]]};
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, s), o = b.output(DType::F32, os);
    b.instr(OpCode::Transpose, {x}, {o}, perm);
    RunResult r = runProgram(b.p, {toBytes(xv)});
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<double> want;
    for (int64_t i = 0; i < numel(os); ++i) {
      Shape oc = coords(i, os), ic(3);
      for (int d = 0; d < 3; ++d) ic[perm[d]] = oc[d];
      want.push_back(xv[flat(ic, s)]);
    }
    EXPECT_TRUE(allClose(r.out<float>(), want, 0)) << perm[0] << perm[1] << perm[2];
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Movement, TransposeRank4OfI64) {
  // [B, T, H, D] -> [B, H, T, D], the attention head split, on 8-byte words.
  Shape s = {2, 3, 4, 5}, os = {2, 4, 3, 5};
  std::vector<int64_t> xv(size_t(numel(s)));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = int64_t(i) * 7 - 50;
  ProgramBuilder b;
  uint32_t x = b.input(DType::I64, s), o = b.output(DType::I64, os);
  b.instr(OpCode::Transpose, {x}, {o}, {0, 2, 1, 3});
  RunResult r = runProgram(b.p, {toBytes(xv)});
  ASSERT_TRUE(r.ok) << r.err;
  auto got = r.out<int64_t>();
  for (int64_t i = 0; i < numel(os); ++i) {
    Shape c = coords(i, os);
    EXPECT_EQ(got[i], xv[flat({c[0], c[2], c[1], c[3]}, s)]);
  }
}

TEST(Movement, SliceWithStepsIncludingNegative) {
  Rng rng;
  Shape s = {6, 7, 8};
  auto xv = rng.uniform(numel(s));
  struct Window { int64_t start, step, count; };
  std::vector<std::vector<Window>> cases = {
      {{1, 1, 4}, {0, 2, 4}, {7, -1, 8}},  // reverse the last dim
      {{5, -2, 3}, {6, -3, 3}, {2, 3, 2}}, // negative steps on two dims
      {{0, 1, 6}, {0, 1, 7}, {3, 1, 5}},   // a contiguous window
      {{2, 1, 0}, {0, 1, 7}, {0, 1, 8}},   // empty
  };
  for (const auto &w : cases) {
    Shape os;
    std::vector<int64_t> ints;
    for (const Window &d : w) {
      os.push_back(d.count);
      ints.push_back(d.start);
      ints.push_back(d.step);
    }
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, s), o = b.output(DType::F32, os);
    b.instr(OpCode::Slice, {x}, {o}, ints);
    RunResult r = runProgram(b.p, {toBytes(xv)});
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<double> want;
    for (int64_t i = 0; i < numel(os); ++i) {
      Shape c = coords(i, os);
      for (int d = 0; d < 3; ++d) c[d] = w[d].start + c[d] * w[d].step;
      want.push_back(xv[flat(c, s)]);
    }
    EXPECT_TRUE(allClose(r.out<float>(), want, 0));
  }
}

TEST(Movement, ConcatAndSplitAreInverse) {
  Rng rng;
  for (int64_t axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Shape base = {3, 4, 5};
    std::vector<Shape> parts(3, base);
    parts[0][axis] = 1;
    parts[1][axis] = 2;
    parts[2][axis] = 4;
    Shape whole = base;
    whole[axis] = 7;
    ProgramBuilder b;
    std::vector<uint32_t> ins, outs;
    for (const Shape &p : parts) ins.push_back(b.input(DType::F32, p));
    uint32_t joined = b.output(DType::F32, whole);
    b.instr(OpCode::Concat, ins, {joined}, {axis});
    for (const Shape &p : parts) outs.push_back(b.output(DType::F32, p));
    b.instr(OpCode::Split, {joined}, outs, {axis});

    std::vector<std::vector<float>> pv;
    std::vector<Bytes> inputs;
    for (const Shape &p : parts) {
      pv.push_back(rng.uniform(numel(p)));
      inputs.push_back(toBytes(pv.back()));
    }
    RunResult r = runProgram(b.p, inputs);
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<double> want;
    for (int64_t i = 0; i < numel(whole); ++i) {
      Shape c = coords(i, whole);
      size_t k = 0;
      while (c[axis] >= parts[k][axis]) c[axis] -= parts[k++][axis];
      want.push_back(pv[k][flat(c, parts[k])]);
    }
    EXPECT_TRUE(allClose(r.out<float>(0), want, 0));
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(r.out<float>(1 + k), pv[k]);
  }
}

TEST(Movement, ExpandBroadcastsToOutputShape) {
  Rng rng;
  Shape s = {3, 1, 5}, os = {2, 3, 4, 5};
  auto xv = rng.uniform(numel(s));
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, s), o = b.output(DType::F32, os);
  b.instr(OpCode::Expand, {x}, {o});
  RunResult r = runProgram(b.p, {toBytes(xv)});
  ASSERT_TRUE(r.ok) << r.err;
  std::vector<double> want;
  for (int64_t i = 0; i < numel(os); ++i) want.push_back(xv[broadcastIndex(i, os, s)]);
  EXPECT_TRUE(allClose(r.out<float>(), want, 0));
}

TEST(Movement, ExpandFromRankZeroAndSizeOneDims) {
  // Backward graphs broadcast a scalar loss gradient, or a reduced [1, 1]
  // tensor, back to a full shape.
  Rng rng;
  struct Case {
    Shape in, out;
  };
  for (const Case &c : {Case{{}, {2, 3, 4}}, Case{{1, 1}, {4, 5}}, Case{{1}, {3, 1, 4}},
                        Case{{2, 1, 1}, {2, 3, 5}}}) {
    SCOPED_TRACE(std::to_string(c.in.size()) + "d -> " + std::to_string(numel(c.out)));
    auto xv = rng.uniform(numel(c.in));
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, c.in), o = b.output(DType::F32, c.out);
    b.instr(OpCode::Expand, {x}, {o});
    RunResult r = runProgram(b.p, {toBytes(xv)});
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<double> want;
    for (int64_t i = 0; i < numel(c.out); ++i) want.push_back(xv[broadcastIndex(i, c.out, c.in)]);
    EXPECT_TRUE(allClose(r.out<float>(), want, 0));
  }
}

TEST(Movement, EmbeddingGathersRowsForI64AndI32Ids) {
  Rng rng;
  int64_t V = 50, D = 24;
  Shape ids = {3, 7};
  auto table = rng.uniform(V * D);
  auto idv = rng.ints(numel(ids), 0, V - 1);
  for (DType idType : {DType::I64, DType::I32}) {
    SCOPED_TRACE(dtypeName(idType));
    ProgramBuilder b;
    uint32_t t = b.constant(DType::F32, {V, D}, toBytes(table), "wte");
    uint32_t x = b.input(idType, ids), o = b.output(DType::F32, {3, 7, D});
    b.instr(OpCode::Embedding, {t, x}, {o});
    Bytes idBytes = idType == DType::I64
                        ? toBytes(idv)
                        : toBytes(std::vector<int32_t>(idv.begin(), idv.end()));
    RunResult r = runProgram(b.p, {idBytes});
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<double> want;
    for (int64_t id : idv)
      for (int64_t d = 0; d < D; ++d) want.push_back(table[id * D + d]);
    EXPECT_TRUE(allClose(r.out<float>(), want, 0));
  }
}

TEST(Movement, EmbeddingRejectsOutOfRangeId) {
  ProgramBuilder b;
  uint32_t t = b.constant(DType::F32, {10, 4}, toBytes(std::vector<float>(40, 1.0f)), "wte");
  uint32_t x = b.input(DType::I64, {4}), o = b.output(DType::F32, {4, 4});
  b.instr(OpCode::Embedding, {t, x}, {o});
  for (int64_t bad : {int64_t(10), int64_t(-1)}) {
    RunResult r = runProgram(b.p, {toBytes(std::vector<int64_t>{0, 9, bad, 3})});
    ASSERT_FALSE(r.ok);
    EXPECT_EQ(r.err, "instr 0 (embedding): id " + std::to_string(bad) +
                         " at position 2 out of range [0, 10)");
  }
}

TEST(Movement, RotaryWithBroadcastTables) {
  Rng rng;
  int64_t B = 2, H = 3, T = 5, D = 8;
  Shape xs = {B, H, T, D}, ts = {T, D};
  auto xv = rng.uniform(numel(xs)), cv = rng.uniform(numel(ts)), sv = rng.uniform(numel(ts));
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, xs), c = b.input(DType::F32, ts), s = b.input(DType::F32, ts);
  uint32_t o = b.output(DType::F32, xs);
  b.instr(OpCode::Rotary, {x, c, s}, {o});
  RunResult r = runProgram(b.p, {toBytes(xv), toBytes(cv), toBytes(sv)});
  ASSERT_TRUE(r.ok) << r.err;
  std::vector<double> want;
  for (int64_t i = 0; i < numel(xs); ++i) {
    int64_t d = i % D, row = i - d, t = (i / D) % T;
    double rot = d < D / 2 ? -double(xv[row + d + D / 2]) : double(xv[row + d - D / 2]);
    want.push_back(xv[i] * double(cv[t * D + d]) + rot * sv[t * D + d]);
  }
  EXPECT_TRUE(allClose(r.out<float>(), want, 2e-7, 1e-7));
}

} // namespace
