//===- ElementwiseTest.cpp - Binary, unary, where and cast kernels --------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

#include <functional>
#include <limits>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

struct BinaryCase {
  Shape a, b, out;
};

// Shapes that exercise right-alignment, stretched dims on either side, a
// scalar, and dims that collapse (or not) in the strided loop.
const std::vector<BinaryCase> kBroadcastCases = {
    {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}, {2, 3, 4}},
    {{2, 1, 4}, {3, 1}, {2, 3, 4}},    {{}, {5}, {5}},
    {{5, 1}, {1, 7}, {5, 7}},          {{1}, {}, {1}},
    {{3, 1, 5, 1}, {4, 1, 6}, {3, 4, 5, 6}}, {{129, 257}, {257}, {129, 257}},
    {{}, {}, {}}, // rank-0 scalars (a training step's loss and norm arithmetic)
};

double refBinary(OpCode op, double a, double b) {
  switch (op) {
  case OpCode::Add: return a + b;
  case OpCode::Sub: return a - b;
  case OpCode::Mul: return a * b;
  case OpCode::Div: return a / b;
  case OpCode::Pow: return std::pow(a, b);
  case OpCode::Max: return std::max(a, b);
  case OpCode::Min: return std::min(a, b);
  default: return NAN;
  }
}

TEST(Elementwise, BinaryF32MatchesReferenceWithBroadcasting) {
  Rng rng;
  for (OpCode op : {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div, OpCode::Pow, OpCode::Max,
                    OpCode::Min}) {
    for (const BinaryCase &c : kBroadcastCases) {
      SCOPED_TRACE(std::string(opcodeName(op)) + " " + std::to_string(c.a.size()) + "d x " +
                   std::to_string(c.b.size()) + "d -> " + std::to_string(numel(c.out)));
      ProgramBuilder b;
      uint32_t x = b.input(DType::F32, c.a), y = b.input(DType::F32, c.b);
      uint32_t o = b.output(DType::F32, c.out);
      b.instr(op, {x, y}, {o});
      // Pow needs a positive base; Div a divisor away from zero.
      auto av = op == OpCode::Pow ? rng.uniform(numel(c.a), 0.1, 2) : rng.uniform(numel(c.a));
      auto bv = op == OpCode::Div ? rng.uniform(numel(c.b), 0.5, 2) : rng.uniform(numel(c.b));
      RunResult r = runProgram(b.p, {toBytes(av), toBytes(bv)});
      ASSERT_TRUE(r.ok) << r.err;
      std::vector<double> want(static_cast<size_t>(numel(c.out)));
      for (int64_t i = 0; i < numel(c.out); ++i)
        want[i] = refBinary(op, av[broadcastIndex(i, c.out, c.a)], bv[broadcastIndex(i, c.out, c.b)]);
      EXPECT_TRUE(allClose(r.out<float>(), want, 1e-6));
    }
  }
}

TEST(Elementwise, BinaryI64AndDivisionByZero) {
  Rng rng;
  Shape s = {4, 5}, row = {5};
  ProgramBuilder b;
  uint32_t x = b.input(DType::I64, s), y = b.input(DType::I64, row);
  uint32_t add = b.output(DType::I64, s), div = b.output(DType::I64, s);
  b.instr(OpCode::Add, {x, y}, {add});
  b.instr(OpCode::Div, {x, y}, {div});
  auto xv = rng.ints(20, -1000, 1000), yv = rng.ints(5, 1, 9);
  yv[2] = -yv[2];
  RunResult r = runProgram(b.p, {toBytes(xv), toBytes(yv)});
  ASSERT_TRUE(r.ok) << r.err;
  auto sum = r.out<int64_t>(0), quo = r.out<int64_t>(1);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(sum[i], xv[i] + yv[i % 5]);
    EXPECT_EQ(quo[i], xv[i] / yv[i % 5]); // truncates toward zero
  }
  yv[3] = 0;
  r = runProgram(b.p, {toBytes(xv), toBytes(yv)});
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.err.find("instr 1 (div): integer division by zero at output element 3"),
            std::string::npos)
      << r.err;
}

TEST(Elementwise, MaxMinPropagateNaN) {
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {3}), y = b.input(DType::F32, {3});
  uint32_t mx = b.output(DType::F32, {3}), mn = b.output(DType::F32, {3});
  b.instr(OpCode::Max, {x, y}, {mx});
  b.instr(OpCode::Min, {x, y}, {mn});
  std::vector<float> xv = {NAN, 1, 2}, yv = {1, NAN, 3};
  RunResult r = runProgram(b.p, {toBytes(xv), toBytes(yv)});
  ASSERT_TRUE(r.ok) << r.err;
  for (int k = 0; k < 2; ++k) {
    auto v = r.out<float>(k);
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
    EXPECT_EQ(v[2], k == 0 ? 3.0f : 2.0f);
  }
}

struct UnaryCase {
  OpCode op;
  double lo, hi; // input range inside the op's domain
  std::function<double(double)> ref;
};

TEST(Elementwise, UnaryMatchesReference) {
  const double kPi = 3.14159265358979323846;
  std::vector<UnaryCase> cases = {
      {OpCode::Neg, -3, 3, [](double x) { return -x; }},
      {OpCode::Sqrt, 0.01, 4, [](double x) { return std::sqrt(x); }},
      {OpCode::Rsqrt, 0.01, 4, [](double x) { return 1 / std::sqrt(x); }},
      {OpCode::Reciprocal, 0.1, 4, [](double x) { return 1 / x; }},
      {OpCode::Exp, -5, 5, [](double x) { return std::exp(x); }},
      {OpCode::Log, 0.01, 10, [](double x) { return std::log(x); }},
      {OpCode::Tanh, -4, 4, [](double x) { return std::tanh(x); }},
      {OpCode::Sigmoid, -8, 8, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {OpCode::Silu, -8, 8, [](double x) { return x / (1 + std::exp(-x)); }},
      {OpCode::GeluTanh, -5, 5,
       [&](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x))); }},
      {OpCode::GeluErf, -5, 5, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {OpCode::Cos, -6, 6, [](double x) { return std::cos(x); }},
      {OpCode::Sin, -6, 6, [](double x) { return std::sin(x); }},
      {OpCode::Relu, -3, 3, [](double x) { return x > 0 ? x : 0.0; }},
      {OpCode::Erf, -3, 3, [](double x) { return std::erf(x); }},
      // log(1 + e^x) directly: the range keeps e^x finite and the sum exact enough.
      {OpCode::Softplus, -30, 30, [](double x) { return std::log1p(std::exp(x)); }},
  };
  Rng rng;
  Shape s = {3, 70, 41}; // large enough to be split over the pool
  for (const UnaryCase &c : cases) {
    SCOPED_TRACE(opcodeName(c.op));
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, s), o = b.output(DType::F32, s);
    b.instr(c.op, {x}, {o});
    auto xv = rng.uniform(numel(s), c.lo, c.hi);
    RunResult r = runProgram(b.p, {toBytes(xv)});
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<double> want;
    for (float v : xv) want.push_back(c.ref(v));
    // Evaluated in double and rounded once: within an f32 ulp.
    EXPECT_TRUE(allClose(r.out<float>(), want, 1.2e-7, 1e-30));
  }
}

TEST(Elementwise, RankZeroScalarsLikeGradientClipping) {
  // The scalar arithmetic a training step emits for clipping by global
  // norm: n = sqrt(sum(g^2)); s = min(1, c / max(n, eps)); g' = g * s; and
  // a loss scaled by a rank-0 constant.
  Rng rng;
  Shape gs = {6, 7};
  ProgramBuilder b;
  uint32_t g = b.input(DType::F32, gs), clip = b.input(DType::F32, {}), eps = b.input(DType::F32, {});
  uint32_t one = b.input(DType::F32, {}), loss = b.input(DType::F32, {});
  uint32_t sq = b.temp(DType::F32, gs), ss = b.temp(DType::F32, {}), n = b.temp(DType::F32, {});
  uint32_t nm = b.temp(DType::F32, {}), ratio = b.temp(DType::F32, {}), s = b.output(DType::F32, {});
  uint32_t gout = b.output(DType::F32, gs), l2 = b.output(DType::F32, {});
  b.instr(OpCode::Mul, {g, g}, {sq});
  b.instr(OpCode::Reduce, {sq}, {ss}, {0, 0, 1}); // sum over all axes to rank 0
  b.instr(OpCode::Sqrt, {ss}, {n});
  b.instr(OpCode::Max, {n, eps}, {nm});
  b.instr(OpCode::Div, {clip, nm}, {ratio});
  b.instr(OpCode::Min, {one, ratio}, {s});
  b.instr(OpCode::Mul, {g, s}, {gout});
  b.instr(OpCode::Add, {loss, loss}, {l2});
  auto gv = rng.uniform(numel(gs));
  float clipV = 0.5f, epsV = 1e-6f, lossV = 2.25f;
  RunResult r = runProgram(b.p, {toBytes(gv), toBytes(std::vector<float>{clipV}),
                                 toBytes(std::vector<float>{epsV}), toBytes(std::vector<float>{1.0f}),
                                 toBytes(std::vector<float>{lossV})});
  ASSERT_TRUE(r.ok) << r.err;
  double sum = 0;
  for (float v : gv) sum += double(v) * v;
  double scale = std::min(1.0, clipV / std::max(std::sqrt(sum), double(epsV)));
  ASSERT_LT(scale, 1.0); // the clipping branch is the one taken
  EXPECT_TRUE(allClose(r.out<float>(0), {scale}, 1e-6));
  std::vector<double> want;
  for (float v : gv) want.push_back(v * scale);
  EXPECT_TRUE(allClose(r.out<float>(1), want, 1e-6));
  EXPECT_EQ(r.out<float>(2), std::vector<float>{4.5f});
}

TEST(Elementwise, UnaryF64) {
  Rng rng;
  ProgramBuilder b;
  uint32_t x = b.input(DType::F64, {50}), o = b.output(DType::F64, {50});
  b.instr(OpCode::Exp, {x}, {o});
  auto xf = rng.uniform(50);
  std::vector<double> xv(xf.begin(), xf.end());
  RunResult r = runProgram(b.p, {toBytes(xv)});
  ASSERT_TRUE(r.ok) << r.err;
  auto got = r.out<double>();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(got[i], std::exp(xv[i]));
}

TEST(Elementwise, WhereBroadcastsConditionAndOperands) {
  Rng rng;
  Shape cs = {1, 4, 1}, as = {3, 1, 5}, bs = {5}, os = {3, 4, 5};
  ProgramBuilder b;
  uint32_t c = b.input(DType::Bool, cs), x = b.input(DType::F32, as), y = b.input(DType::F32, bs);
  uint32_t o = b.output(DType::F32, os);
  b.instr(OpCode::Where, {c, x, y}, {o});
  auto cv = rng.ints(numel(cs), 0, 1);
  Bytes cb(cv.begin(), cv.end());
  auto xv = rng.uniform(numel(as)), yv = rng.uniform(numel(bs));
  RunResult r = runProgram(b.p, {cb, toBytes(xv), toBytes(yv)});
  ASSERT_TRUE(r.ok) << r.err;
  std::vector<double> want;
  for (int64_t i = 0; i < numel(os); ++i)
    want.push_back(cb[broadcastIndex(i, os, cs)] ? xv[broadcastIndex(i, os, as)]
                                                 : yv[broadcastIndex(i, os, bs)]);
  EXPECT_TRUE(allClose(r.out<float>(), want, 0));
}

TEST(Elementwise, WhereOnI64) {
  ProgramBuilder b;
  uint32_t c = b.input(DType::Bool, {4}), x = b.input(DType::I64, {4}), y = b.input(DType::I64, {});
  uint32_t o = b.output(DType::I64, {4});
  b.instr(OpCode::Where, {c, x, y}, {o});
  RunResult r = runProgram(b.p, {Bytes{1, 0, 0, 1}, toBytes(std::vector<int64_t>{1, 2, 3, 4}),
                                 toBytes(std::vector<int64_t>{-7})});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out<int64_t>(), (std::vector<int64_t>{1, -7, -7, 4}));
}

/// Runs one Cast from `from` to `to` on raw input bytes.
Bytes cast(DType from, DType to, const Bytes &in, int64_t n) {
  ProgramBuilder b;
  uint32_t x = b.input(from, {n}), o = b.output(to, {n});
  b.instr(OpCode::Cast, {x}, {o});
  RunResult r = runProgram(b.p, {in});
  EXPECT_TRUE(r.ok) << r.err;
  return r.ok ? r.outputs[0] : Bytes();
}

/// `values` stored as dtype t (each value must be exact in t).
Bytes encode(DType t, const std::vector<double> &values) {
  Bytes b(values.size() * dtypeSize(t));
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    float f = float(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint16_t h = uint16_t(u >> 16);
    int64_t k64 = int64_t(v);
    int32_t k32 = int32_t(v);
    switch (t) {
    case DType::F32: std::memcpy(&b[4 * i], &f, 4); break;
    case DType::F64: std::memcpy(&b[8 * i], &v, 8); break;
    case DType::BF16: std::memcpy(&b[2 * i], &h, 2); break;
    case DType::I64: std::memcpy(&b[8 * i], &k64, 8); break;
    case DType::I32: std::memcpy(&b[4 * i], &k32, 4); break;
    case DType::Bool: b[i] = v != 0; break;
    }
  }
  return b;
}

TEST(Elementwise, CastBetweenAllDTypes) {
  // Small integers are exact in every dtype; bool holds v != 0.
  std::vector<double> values = {0, 1, -3, 7, 100, -128, 1, 0}, truth;
  for (double v : values) truth.push_back(v != 0);
  int64_t n = int64_t(values.size());
  const DType all[] = {DType::F32, DType::F64, DType::BF16, DType::I64, DType::I32, DType::Bool};
  for (DType from : all)
    for (DType to : all) {
      SCOPED_TRACE(std::string(dtypeName(from)) + " -> " + dtypeName(to));
      const std::vector<double> &src = from == DType::Bool ? truth : values;
      EXPECT_EQ(cast(from, to, encode(from, src), n), encode(to, src));
    }
}

TEST(Elementwise, CastRoundsAndSaturates) {
  // f32 -> bf16 rounds to nearest even: 1 + 2^-8 is halfway between 1 and
  // 1 + 2^-7 and rounds to 1; 1 + 3 * 2^-9 rounds up.
  std::vector<float> f = {1.0f + 1.0f / 256, 1.0f + 3.0f / 512, -2.5f, NAN};
  auto h = fromBytes<uint16_t>(cast(DType::F32, DType::BF16, toBytes(f), 4));
  EXPECT_EQ(h[0], 0x3f80);
  EXPECT_EQ(h[1], 0x3f81);
  EXPECT_EQ(h[2], 0xc020);
  EXPECT_EQ(h[3] & 0x7f80, 0x7f80);
  EXPECT_NE(h[3] & 0x007f, 0); // still NaN, not infinity

  // f64 -> i32 truncates toward zero and saturates; NaN becomes 0.
  std::vector<double> d = {2.9, -2.9, 1e20, -1e20, NAN};
  auto i = fromBytes<int32_t>(cast(DType::F64, DType::I32, toBytes(d), 5));
  EXPECT_EQ(i, (std::vector<int32_t>{2, -2, std::numeric_limits<int32_t>::max(),
                                     std::numeric_limits<int32_t>::min(), 0}));

  // Large i64 values survive i64 -> i64-sized paths exactly and wrap to i32.
  std::vector<int64_t> big = {(int64_t(1) << 53) + 1, (int64_t(1) << 32) + 5};
  auto w = fromBytes<int32_t>(cast(DType::I64, DType::I32, toBytes(big), 2));
  EXPECT_EQ(w[1], 5);
}

TEST(Elementwise, CastReshapesWithSameDType) {
  Rng rng;
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {6, 4}), o = b.output(DType::F32, {2, 3, 4});
  b.instr(OpCode::Cast, {x}, {o});
  auto xv = rng.uniform(24);
  RunResult r = runProgram(b.p, {toBytes(xv)});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out<float>(), xv);
}

} // namespace
