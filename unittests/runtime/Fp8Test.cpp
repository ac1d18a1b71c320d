//===- Fp8Test.cpp - OCP FP8 rounding and the fp8 kernels on the CPU ------===//
//
// Part of loom, under the Apache License v2.0.
//
// loom/runtime/Fp8.h against an independent reference written from the OCP
// 8-bit floating point specification (OFP8 v1.0): every code decoded with
// the spec's formula (sign, exponent, mantissa, subnormals, the NaN and
// infinity encodings) in double, and conversion as "the nearest
// representable value, ties to the even code, beyond the largest finite
// value saturate to it" by searching that table. The edge cases are spelled
// out (every code, every midpoint between neighbours and one f32 ulp on
// each side of it, subnormals, half the smallest subnormal, saturation,
// NaN, signed zeros), then random f32 bit patterns. The fp8 opcodes on the
// CPU backend are then checked against straightforward fp64 computations.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

#include "loom/runtime/Fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

//===----------------------------------------------------------------------===//
// The reference: OFP8's tables, decoded and searched in double.
//===----------------------------------------------------------------------===//

struct SpecFormat {
  Fp8Format format;
  int expBits, manBits, bias;
  const char *name;
};

const SpecFormat kE4M3{Fp8Format::E4M3, 4, 3, 7, "e4m3"};
const SpecFormat kE5M2{Fp8Format::E5M2, 5, 2, 15, "e5m2"};

/// The value of `code` by the spec: E4M3 has no infinities and only
/// S.1111.111 as NaN; E5M2 follows IEEE 754 (all-ones exponent: infinity
/// with a zero mantissa, NaN otherwise).
double specValue(const SpecFormat &f, int code) {
  int sign = code >> 7, e = (code >> f.manBits) & ((1 << f.expBits) - 1);
  int m = code & ((1 << f.manBits) - 1);
  int eMax = (1 << f.expBits) - 1;
  double s = sign ? -1.0 : 1.0;
  if (f.format == Fp8Format::E4M3 && e == eMax && m == (1 << f.manBits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  if (f.format == Fp8Format::E5M2 && e == eMax)
    return m == 0 ? s * INFINITY : std::numeric_limits<double>::quiet_NaN();
  double frac = double(m) / double(1 << f.manBits);
  if (e == 0)
    return s * std::ldexp(frac, 1 - f.bias);
  return s * std::ldexp(1.0 + frac, e - f.bias);
}

/// The spec's saturating conversion of x, as a code, by search.
int specConvert(const SpecFormat &f, double x) {
  if (std::isnan(x))
    return -1; // any NaN code; checked separately
  int sign = std::signbit(x) ? 0x80 : 0;
  double a = std::fabs(x);
  int best = -1;
  double maxFinite = 0;
  int maxCode = 0;
  for (int c = 0; c < 0x80; ++c) { // non-negative codes
    double v = specValue(f, c);
    if (std::isfinite(v) && v > maxFinite)
      maxFinite = v, maxCode = c;
  }
  if (a >= maxFinite)
    return sign | maxCode;
  double bestErr = INFINITY;
  for (int c = 0; c < 0x80; ++c) {
    double v = specValue(f, c);
    if (!std::isfinite(v))
      continue;
    double err = std::fabs(v - a);
    // Ties go to the even code (mantissa LSB 0).
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) {
      bestErr = err;
      best = c;
    }
  }
  return sign | best;
}

bool isNaNCode(const SpecFormat &f, int code) { return std::isnan(specValue(f, code)); }

/// Checks floatToFp8(x) against the reference; NaN inputs must give a NaN
/// code (loom gives the canonical 0x7f, as CUDA does).
::testing::AssertionResult convertsLikeSpec(const SpecFormat &f, float x) {
  int got = floatToFp8(x, f.format);
  int want = specConvert(f, double(x));
  if (std::isnan(x)) {
    if (got == kFp8NaN && isNaNCode(f, got))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << f.name << ": NaN gave code " << got;
  }
  if (got == want)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << f.name << ": x = " << x << " (bits 0x" << std::hex
                                       << fp8FloatBits(x) << "): got 0x" << got << " ("
                                       << specValue(f, got) << "), want 0x" << want << " ("
                                       << std::dec << specValue(f, want) << ")";
}

/// Finite non-negative values of a format, ascending.
std::vector<double> finiteValues(const SpecFormat &f) {
  std::vector<double> v;
  for (int c = 0; c < 0x80; ++c)
    if (std::isfinite(specValue(f, c)))
      v.push_back(specValue(f, c));
  std::sort(v.begin(), v.end());
  return v;
}

class OcpFp8 : public ::testing::TestWithParam<SpecFormat> {};

TEST_P(OcpFp8, DecodesEveryCodeAsTheSpec) {
  const SpecFormat &f = GetParam();
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE("code " + std::to_string(c));
    double want = specValue(f, c);
    float got = fp8ToFloat(uint8_t(c), f.format);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(double(got), want);
      EXPECT_EQ(std::signbit(got), std::signbit(want)); // -0 stays -0
    }
  }
}

TEST_P(OcpFp8, EveryValueRoundTrips) {
  const SpecFormat &f = GetParam();
  for (int c = 0; c < 256; ++c) {
    double v = specValue(f, c);
    if (!std::isfinite(v))
      continue;
    EXPECT_EQ(int(floatToFp8(float(v), f.format)), c) << "value " << v;
  }
}

TEST_P(OcpFp8, MidpointsTieToEvenAndNeighboursRoundToNearest) {
  const SpecFormat &f = GetParam();
  std::vector<double> v = finiteValues(f);
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    float mid = float((v[i] + v[i + 1]) / 2); // exact: fp8 midpoints fit f32
    ASSERT_EQ(double(mid), (v[i] + v[i + 1]) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      EXPECT_TRUE(convertsLikeSpec(f, x));
      EXPECT_TRUE(convertsLikeSpec(f, -x));
    }
  }
}

TEST_P(OcpFp8, SubnormalsAndTheUnderflowBoundary) {
  const SpecFormat &f = GetParam();
  double minSub = std::ldexp(1.0, 1 - f.bias - f.manBits);
  double minNormal = std::ldexp(1.0, 1 - f.bias);
  // Exactly half the smallest subnormal ties to the even code 0 (a zero of
  // the input's sign); anything above it rounds up to the subnormal.
  EXPECT_EQ(int(floatToFp8(float(minSub / 2), f.format)), 0x00);
  EXPECT_EQ(int(floatToFp8(float(-minSub / 2), f.format)), 0x80);
  EXPECT_EQ(int(floatToFp8(std::nextafter(float(minSub / 2), 1.0f), f.format)), 0x01);
  EXPECT_EQ(int(floatToFp8(-std::nextafter(float(minSub / 2), 1.0f), f.format)), 0x81);
  // 1.5 subnormals ties to 2 (even), 2.5 to 2, 3.5 to 4.
  for (double k : {0.25, 0.75, 1.5, 2.5, 3.5, 5.5, 6.5, 7.25})
    EXPECT_TRUE(convertsLikeSpec(f, float(k * minSub))) << k << " subnormals";
  // Just below the smallest normal rounds up into it.
  EXPECT_TRUE(convertsLikeSpec(f, std::nextafter(float(minNormal), 0.0f)));
  // f32 subnormals and tiny normals are zeros of their sign.
  for (float tiny : {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                     1e-30f}) {
    EXPECT_EQ(int(floatToFp8(tiny, f.format)), 0x00);
    EXPECT_EQ(int(floatToFp8(-tiny, f.format)), 0x80);
  }
  // A dense sweep of the subnormal range.
  for (double x = 0; x < 2 * minNormal; x += minSub / 64)
    EXPECT_TRUE(convertsLikeSpec(f, float(x)));
}

TEST_P(OcpFp8, SaturatesBeyondTheLargestFiniteValue) {
  const SpecFormat &f = GetParam();
  float max = fp8Max(f.format);
  int maxCode = f.format == Fp8Format::E4M3 ? 0x7e : 0x7b;
  EXPECT_EQ(double(max), finiteValues(f).back());
  for (float x : {max, std::nextafter(max, INFINITY), max * 1.0625f, max * 1.2f, 1e30f,
                  std::numeric_limits<float>::max(), INFINITY}) {
    EXPECT_EQ(int(floatToFp8(x, f.format)), maxCode) << x;
    EXPECT_EQ(int(floatToFp8(-x, f.format)), 0x80 | maxCode) << -x;
    EXPECT_TRUE(convertsLikeSpec(f, x));
  }
}

TEST_P(OcpFp8, NaNAndSignedZeros) {
  const SpecFormat &f = GetParam();
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu})
    EXPECT_TRUE(convertsLikeSpec(f, fp8BitsFloat(bits)));
  EXPECT_EQ(int(floatToFp8(0.0f, f.format)), 0x00);
  EXPECT_EQ(int(floatToFp8(-0.0f, f.format)), 0x80);
  EXPECT_TRUE(std::signbit(fp8ToFloat(0x80, f.format)));
}

TEST_P(OcpFp8, RandomFloatsConvertLikeTheSpec) {
  const SpecFormat &f = GetParam();
  Rng rng;
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<double> near(-2.0 * fp8Max(f.format), 2.0 * fp8Max(f.format));
  for (int i = 0; i < 100000; ++i) {
    ASSERT_TRUE(convertsLikeSpec(f, fp8BitsFloat(bits(rng.gen()))));
    ASSERT_TRUE(convertsLikeSpec(f, float(near(rng.gen()))));
    // Magnitudes spread over the format's whole exponent range.
    float spread = float(std::ldexp(near(rng.gen()) / fp8Max(f.format),
                                    int(bits(rng.gen()) % 48) - 30));
    ASSERT_TRUE(convertsLikeSpec(f, spread));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, OcpFp8, ::testing::Values(kE4M3, kE5M2),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Fp8Scale, FormulaMatchesTorchao) {
  // s = fmax / max(amax, 1e-12), one f32 division.
  EXPECT_EQ(fp8ScaleFromAmax(2.0f, Fp8Format::E4M3, false), 224.0f);
  EXPECT_EQ(fp8ScaleFromAmax(3.0f, Fp8Format::E4M3, false), 448.0f / 3.0f);
  EXPECT_EQ(fp8ScaleFromAmax(3.0f, Fp8Format::E5M2, false), 57344.0f / 3.0f);
  EXPECT_EQ(fp8ScaleFromAmax(0.0f, Fp8Format::E4M3, false), 448.0f / 1e-12f);
  // Rounded down to a power of two: 149.33 -> 128.
  EXPECT_EQ(fp8ScaleFromAmax(3.0f, Fp8Format::E4M3, true), 128.0f);
  EXPECT_EQ(fp8ScaleFromAmax(3.5f, Fp8Format::E4M3, true), 128.0f);
  EXPECT_EQ(fp8ScaleFromAmax(3.5f, Fp8Format::E4M3, false), 128.0f);
  EXPECT_TRUE(std::isnan(fp8ScaleFromAmax(NAN, Fp8Format::E4M3, false)));
  EXPECT_TRUE(std::isnan(fp8ScaleFromAmax(NAN, Fp8Format::E4M3, true)));
  EXPECT_EQ(fp8Inverse(224.0f), 1.0f / 224.0f);
}

//===----------------------------------------------------------------------===//
// The fp8 opcodes on the CPU backend.
//===----------------------------------------------------------------------===//

/// x as bf16 storage and the f32 values it holds.
Bytes bf16Bytes(const std::vector<float> &x, std::vector<float> &held) {
  held = toBf16Values(x);
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = uint16_t(fp8FloatBits(held[i]) >> 16);
  return toBytes(h);
}

struct ScaleCase {
  Shape scale;
  DType dtype;
  bool pow2;
};

TEST(Fp8Kernels, ScalePerTensorRowAndColumn) {
  Rng rng;
  const int64_t R = 37, C = 53;
  for (ScaleCase sc : {ScaleCase{{1, 1}, DType::F32, false}, ScaleCase{{R, 1}, DType::F32, true},
                       ScaleCase{{1, C}, DType::BF16, false}, ScaleCase{{1, 1}, DType::BF16, true}}) {
    SCOPED_TRACE("scale " + std::to_string(sc.scale[0]) + "x" + std::to_string(sc.scale[1]) +
                 (sc.dtype == DType::BF16 ? " bf16" : " f32") + (sc.pow2 ? " pow2" : ""));
    ProgramBuilder b;
    uint32_t x = b.input(sc.dtype, {R, C});
    b.instr(OpCode::Fp8Scale, {x}, {b.output(DType::F32, sc.scale), b.output(DType::F32, sc.scale)},
            {0, sc.pow2});
    std::vector<float> xv = rng.uniform(R * C, -3, 3);
    xv[17] = -7.5f; // the largest magnitude is negative
    std::vector<float> held = xv;
    Bytes in = sc.dtype == DType::BF16 ? bf16Bytes(xv, held) : toBytes(xv);
    RunResult r = runProgram(b.p, {in});
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<float> s = r.out<float>(0), inv = r.out<float>(1);
    for (size_t g = 0; g < s.size(); ++g) {
      double amax = 0;
      for (int64_t i = 0; i < R; ++i)
        for (int64_t k = 0; k < C; ++k) {
          bool in = sc.scale == Shape{1, 1} || (sc.scale[0] == R ? i == int64_t(g) : k == int64_t(g));
          if (in) amax = std::max(amax, std::fabs(double(held[size_t(i * C + k)])));
        }
      float want = 448.0f / float(amax);
      if (sc.pow2)
        want = float(std::exp2(std::floor(std::log2(double(want)))));
      EXPECT_EQ(s[g], want) << "group " << g;
      EXPECT_EQ(inv[g], 1.0f / want) << "group " << g;
    }
  }
}

TEST(Fp8Kernels, ScaleOfANaNTensorIsNaN) {
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {2, 3});
  b.instr(OpCode::Fp8Scale, {x}, {b.output(DType::F32, {1, 1}), b.output(DType::F32, {1, 1})}, {0, 0});
  RunResult r = runProgram(b.p, {toBytes(std::vector<float>{1, 2, NAN, 4, 5, 6})});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_TRUE(std::isnan(r.out<float>(0)[0]));
}

TEST(Fp8Kernels, CastEveryLayoutAndFormat) {
  Rng rng;
  const int64_t R = 19, C = 33;
  for (DType q : {DType::F8E4M3, DType::F8E5M2})
    for (int64_t layout : {0, 1, 2})
      for (Shape ss : {Shape{1, 1}, Shape{R, 1}, Shape{1, C}}) {
        SCOPED_TRACE(std::string(dtypeName(q)) + " layout " + std::to_string(layout) + " scale " +
                     std::to_string(ss[0]) + "x" + std::to_string(ss[1]));
        ProgramBuilder b;
        uint32_t x = b.input(DType::BF16, {R, C}), s = b.input(DType::F32, ss);
        std::vector<uint32_t> outs;
        if (layout != 1) outs.push_back(b.output(q, {R, C}));
        if (layout != 0) outs.push_back(b.output(q, {C, R}));
        b.instr(OpCode::Fp8Cast, {x, s}, outs, {layout});
        std::vector<float> held, sv = rng.uniform(numel(ss), 10, 900);
        Bytes xb = bf16Bytes(rng.uniform(R * C, -2, 2), held);
        RunResult r = runProgram(b.p, {xb, toBytes(sv)});
        ASSERT_TRUE(r.ok) << r.err;
        Fp8Format f = q == DType::F8E5M2 ? Fp8Format::E5M2 : Fp8Format::E4M3;
        for (size_t o = 0; o < outs.size(); ++o) {
          bool transposed = layout == 1 || o == 1;
          const Bytes &got = r.outputs[o];
          for (int64_t i = 0; i < R; ++i)
            for (int64_t k = 0; k < C; ++k) {
              float sc = sv[size_t(ss[0] == 1 ? (ss[1] == 1 ? 0 : k) : i)];
              uint8_t want = floatToFp8(held[size_t(i * C + k)] * sc, f);
              ASSERT_EQ(int(got[size_t(transposed ? k * R + i : i * C + k)]), int(want))
                  << "element " << i << "," << k;
            }
        }
      }
}

/// The cast kernel itself against the spec's reference on the edge cases
/// (every value, midpoints and their neighbours, subnormals, saturation,
/// NaN, both zeros, negatives), stored f32 and scaled by 1.
TEST(Fp8Kernels, CastKernelMatchesTheSpecOnEdgeCases) {
  for (const SpecFormat &f : {kE4M3, kE5M2}) {
    SCOPED_TRACE(f.name);
    std::vector<float> x;
    std::vector<double> v = finiteValues(f);
    for (size_t i = 0; i < v.size(); ++i) {
      x.push_back(float(v[i]));
      if (i + 1 < v.size()) {
        float mid = float((v[i] + v[i + 1]) / 2);
        x.insert(x.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)});
      }
    }
    for (float e : {float(v[1] / 2), float(v.back() * 1.01), 1e30f, INFINITY, NAN, 0.0f, 1e-30f})
      x.push_back(e);
    size_t n = x.size();
    for (size_t i = 0; i < n; ++i) x.push_back(-x[i]);
    ProgramBuilder b;
    int64_t count = int64_t(x.size());
    uint32_t in = b.input(DType::F32, {1, count}), s = b.input(DType::F32, {1, 1});
    DType q = f.format == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2;
    b.instr(OpCode::Fp8Cast, {in, s}, {b.output(q, {1, count})}, {0});
    RunResult r = runProgram(b.p, {toBytes(x), toBytes(std::vector<float>{1.0f})});
    ASSERT_TRUE(r.ok) << r.err;
    for (size_t i = 0; i < x.size(); ++i) {
      int got = r.outputs[0][i];
      if (std::isnan(x[i]))
        EXPECT_TRUE(isNaNCode(f, got)) << "NaN gave " << got;
      else
        EXPECT_EQ(got, specConvert(f, double(x[i]))) << "x = " << x[i];
    }
  }
}

/// ScaledMatMul against an fp64 sum of the decoded operands: the f32 sum's
/// error is within K * 2^-24 of sum |a b| (a loose, order-free bound).
TEST(Fp8Kernels, ScaledMatMulMatchesFp64) {
  Rng rng;
  const int64_t M = 23, N = 17, K = 48;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (DType outType : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::string("ta ") + std::to_string(ta) + " tb " + std::to_string(tb) + " " +
                     dtypeName(outType));
        ProgramBuilder b;
        uint32_t a = b.input(DType::F8E4M3, ta ? Shape{K, M} : Shape{M, K});
        uint32_t bb = b.input(DType::F8E5M2, tb ? Shape{N, K} : Shape{K, N});
        Shape dashape = ta ? Shape{1, M} : Shape{M, 1}, dbshape = tb ? Shape{N, 1} : Shape{1, N};
        uint32_t da = b.input(DType::F32, dashape), db = b.input(DType::F32, dbshape);
        b.instr(OpCode::ScaledMatMul, {a, bb, da, db}, {b.output(outType, {M, N})}, {ta, tb, 1});
        std::vector<uint8_t> av(size_t(M * K)), bv(size_t(K * N));
        for (uint8_t &v : av) v = uint8_t(rng.ints(1, 0, 255)[0]) & 0xf7; // no e4m3 NaN (0x7f/0xff)
        for (uint8_t &v : bv) v = uint8_t(rng.ints(1, 0, 0xf7)[0]) & 0xf7; // no e5m2 NaN/inf
        std::vector<float> dav = rng.uniform(M, 0.001, 0.01), dbv = rng.uniform(N, 0.5, 2);
        RunResult r = runProgram(b.p, {av, bv, toBytes(dav), toBytes(dbv)});
        ASSERT_TRUE(r.ok) << r.err;
        std::vector<float> got;
        if (outType == DType::F32) {
          got = r.out<float>();
        } else {
          for (uint16_t h : r.out<uint16_t>()) got.push_back(fp8BitsFloat(uint32_t(h) << 16));
        }
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double sum = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
              double x = fp8ToFloat(av[size_t(ta ? k * M + i : i * K + k)], Fp8Format::E4M3);
              double y = fp8ToFloat(bv[size_t(tb ? j * K + k : k * N + j)], Fp8Format::E5M2);
              sum += x * y;
              mag += std::fabs(x * y);
            }
            double scale = double(dav[size_t(i)]) * dbv[size_t(j)];
            double want = sum * scale;
            double tol = (double(K) * std::ldexp(1.0, -24) * mag + 1e-30) * scale +
                         std::fabs(want) * (outType == DType::BF16 ? std::ldexp(1.0, -8) : 1e-6);
            ASSERT_NEAR(got[size_t(i * N + j)], want, tol) << i << "," << j;
          }
      }
}

TEST(Fp8Kernels, ValidateRefusesBadOperands) {
  auto expectError = [](const Program &p, const std::string &part) {
    std::string e = p.validate();
    EXPECT_NE(e.find(part), std::string::npos) << "got '" << e << "'";
  };
  {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, {4, 8});
    b.instr(OpCode::Fp8Scale, {x}, {b.output(DType::F32, {4, 8}), b.output(DType::F32, {4, 8})}, {0, 0});
    expectError(b.p, "is not one per tensor");
  }
  {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, {4, 8}), s = b.input(DType::F32, {1, 1});
    b.instr(OpCode::Fp8Cast, {x, s}, {b.output(DType::F32, {4, 8})}, {0});
    expectError(b.p, "must be f8e4m3 or f8e5m2");
  }
  {
    ProgramBuilder b;
    uint32_t a = b.input(DType::F8E4M3, {4, 16}), c = b.input(DType::F8E4M3, {8, 32});
    uint32_t s = b.input(DType::F32, {1, 1}), t = b.input(DType::F32, {1, 1});
    b.instr(OpCode::ScaledMatMul, {a, c, s, t}, {b.output(DType::F32, {4, 8})}, {0, 1, 0});
    expectError(b.p, "contracting dims differ");
  }
  {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F8E4M3, {4});
    b.instr(OpCode::Cast, {x}, {b.output(DType::F32, {4})});
    expectError(b.p, "fp8 conversions need a scale");
  }
}

} // namespace
} // namespace loom::rt::test
