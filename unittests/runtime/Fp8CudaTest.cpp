//===- Fp8CudaTest.cpp - The CUDA fp8 kernels against the CPU reference ---===//
//
// Part of loom, under the Apache License v2.0.
//
// Issue 17, criterion 2: on an H100 the CUDA casts (the hardware's
// cvt.rn.satfinite conversion) equal the CPU emulation (loom/runtime/Fp8.h,
// itself checked against the OCP spec in Fp8Test.cpp) bit for bit, on the
// edge cases and random data, in every layout; the scales and inverses are
// bit-identical too (an unsigned max of bit patterns, the same f32
// division); and the cuBLASLt fp8 GEMMs equal the CPU's bit for bit on
// operands whose sums are exact in any accumulator, and agree within the
// bound of Hopper's fp8 accumulation on random ones (Fp8GemmCheck.h, whose
// bound Fp8GemmCheckTest.cpp checks on the CPU against the bugs it must
// catch). Without a GPU every test reports SKIPPED.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include "RuntimeTestUtil.h"

#include "Fp8GemmCheck.h"
#include "loom/runtime/Fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::rt::test {
namespace {

using F = std::vector<float>;

Bytes asBf16(const F &x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = uint16_t(fp8FloatBits(toBf16Values({x[i]})[0]) >> 16);
  return toBytes(h);
}

/// Runs `p` on both backends; every output must be byte-identical.
void expectIdenticalOnGpu(const Program &p, const std::vector<Bytes> &inputs) {
  RunResult cpu = runProgram(p, inputs, 2, "cpu");
  ASSERT_TRUE(cpu.ok) << "cpu: " << cpu.err;
  RunResult gpu = runProgram(p, inputs, 0, "cuda");
  ASSERT_TRUE(gpu.ok) << "cuda: " << gpu.err;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Bytes &want = cpu.outputs[k], &got = gpu.outputs[k];
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i] && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0u) << "output " << k << " (" << dtypeName(p.buffers[p.outputs[k]].dtype)
                       << "): " << bad << " bytes differ, first at byte " << first << ": gpu 0x"
                       << std::hex << int(got[first]) << ", cpu 0x" << int(want[first]);
  }
}

/// Values that exercise every rule of the conversion once scaled by 1:
/// each fp8 value of both formats, the midpoints between neighbours and
/// one f32 ulp on either side, subnormals and half the smallest one,
/// values past the largest finite one, infinities, NaNs and both zeros.
F edgeCases() {
  F v;
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    F values;
    for (int c = 0; c < 0x80; ++c) {
      float x = fp8ToFloat(uint8_t(c), f);
      if (std::isfinite(x)) values.push_back(x);
    }
    std::sort(values.begin(), values.end());
    for (size_t i = 0; i < values.size(); ++i) {
      v.push_back(values[i]);
      if (i + 1 < values.size()) {
        float mid = (values[i] + values[i + 1]) / 2;
        for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) v.push_back(x);
      }
    }
    float minSub = values[1];
    for (float x : {minSub / 2, std::nextafter(minSub / 2, 1.0f), minSub * 1.5f, fp8Max(f) * 1.01f,
                    fp8Max(f) * 4, 1e30f})
      v.push_back(x);
  }
  for (float x : {INFINITY, NAN, 0.0f, std::numeric_limits<float>::denorm_min(), 1e-30f})
    v.push_back(x);
  size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]); // and every negative
  return v;
}

TEST(CudaFp8, CastsEdgeCasesBitForBit) {
  REQUIRE_GPU();
  F edges = edgeCases();
  const int64_t C = 64, R = int64_t((edges.size() + C - 1) / C);
  edges.resize(size_t(R * C), 1.0f);
  for (DType q : {DType::F8E4M3, DType::F8E5M2})
    for (DType src : {DType::F32, DType::BF16})
      for (int64_t layout : {0, 1, 2}) {
        SCOPED_TRACE(std::string(dtypeName(src)) + " -> " + dtypeName(q) + " layout " +
                     std::to_string(layout));
        ProgramBuilder b;
        uint32_t x = b.input(src, {R, C}), s = b.input(DType::F32, {1, 1});
        std::vector<uint32_t> outs;
        if (layout != 1) outs.push_back(b.output(q, {R, C}));
        if (layout != 0) outs.push_back(b.output(q, {C, R}));
        b.instr(OpCode::Fp8Cast, {x, s}, outs, {layout});
        Bytes xb = src == DType::BF16 ? asBf16(edges) : toBytes(edges);
        expectIdenticalOnGpu(b.p, {xb, toBytes(F{1.0f})});
      }
}

struct CastCase {
  Shape x, scale;
};

TEST(CudaFp8, ScalesAndCastsOfRandomTensorsBitForBit) {
  REQUIRE_GPU();
  Rng rng;
  // Aligned tiles (the packed path) and ragged edges (element by element).
  const CastCase cases[] = {{{256, 128}, {1, 1}}, {{256, 128}, {256, 1}}, {{256, 128}, {1, 128}},
                            {{37, 53}, {1, 1}},   {{37, 53}, {37, 1}},    {{37, 53}, {1, 53}},
                            {{1000, 176}, {1, 176}}};
  for (const CastCase &cc : cases)
    for (DType src : {DType::F32, DType::BF16})
      for (bool pow2 : {false, true}) {
        SCOPED_TRACE(std::to_string(cc.x[0]) + "x" + std::to_string(cc.x[1]) + " scale " +
                     std::to_string(cc.scale[0]) + "x" + std::to_string(cc.scale[1]) + " " +
                     dtypeName(src) + (pow2 ? " pow2" : ""));
        ProgramBuilder b;
        uint32_t x = b.input(src, cc.x);
        uint32_t s = b.output(DType::F32, cc.scale), inv = b.output(DType::F32, cc.scale);
        b.instr(OpCode::Fp8Scale, {x}, {s, inv}, {0, pow2});
        b.instr(OpCode::Fp8Cast, {x, s},
                {b.output(DType::F8E4M3, cc.x), b.output(DType::F8E4M3, {cc.x[1], cc.x[0]})}, {2});
        F xv = rng.uniform(numel(cc.x), -3, 3);
        for (float &v : xv) v *= std::exp2(float(rng.ints(1, -20, 12)[0])); // many magnitudes
        expectIdenticalOnGpu(b.p, {src == DType::BF16 ? asBf16(xv) : toBytes(xv)});
      }
}

TEST(CudaFp8, ScaleOfANaNTensorIsNaNOnBoth) {
  REQUIRE_GPU();
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {64, 64});
  b.instr(OpCode::Fp8Scale, {x}, {b.output(DType::F32, {1, 1}), b.output(DType::F32, {1, 1})}, {0, 0});
  F xv(64 * 64, 1.0f);
  xv[777] = NAN;
  // NaN payloads are not values: the CPU keeps the input's quiet NaN, the
  // GPU's arithmetic writes its canonical one (0x7fffffff); both must be NaN.
  RunResult cpu = runProgram(b.p, {toBytes(xv)}, 2, "cpu");
  ASSERT_TRUE(cpu.ok) << cpu.err;
  RunResult gpu = runProgram(b.p, {toBytes(xv)}, 0, "cuda");
  ASSERT_TRUE(gpu.ok) << gpu.err;
  for (size_t k = 0; k < 2; ++k) {
    float c, g;
    std::memcpy(&c, cpu.outputs[k].data(), 4);
    std::memcpy(&g, gpu.outputs[k].data(), 4);
    EXPECT_TRUE(std::isnan(c) && std::isnan(g)) << "output " << k << ": cpu " << c << ", gpu " << g;
  }
}

/// The GEMM cases on the GPU: K within one promotion interval and past
/// it, fast accumulation and not, tensorwise and rowwise (outer-vector
/// scales in cuBLASLt, or the fallback kernel), f32 and bf16 results, an
/// M that is no multiple of 16, e5m2 on either side, and the 4096 x 1024 x
/// 4096 of a real layer.
const fp8gemm::GemmCase kGemmCases[] = {
    {256, 192, 128, false, false, DType::F32},
    {256, 192, 128, false, true, DType::BF16},
    {1000, 176, 64, true, false, DType::F32},
    {1000, 176, 64, true, true, DType::BF16},
    {512, 256, 1024, false, false, DType::BF16, DType::F8E4M3, DType::F8E5M2},
    {512, 256, 1024, true, true, DType::F32, DType::F8E5M2, DType::F8E4M3},
    {4096, 1024, 4096, false, true, DType::BF16},
    {4096, 1024, 4096, true, false, DType::BF16},
};

/// Runs every case of kGemmCases on both backends, on operands from
/// `make(case, rng)`, and hands the results (as doubles) to
/// `check(case, operands, cpu, gpu)`.
template <typename Make, typename Check> void onEveryGemmCase(Make make, Check check) {
  Rng rng;
  for (const fp8gemm::GemmCase &g : kGemmCases) {
    SCOPED_TRACE(fp8gemm::caseName(g));
    fp8gemm::GemmOperands o = make(g, rng);
    Program p = fp8gemm::scaledGemmProgram(g);
    RunResult cpu = runProgram(p, fp8gemm::gemmInputs(o), 8, "cpu");
    EXPECT_TRUE(cpu.ok) << "cpu: " << cpu.err;
    RunResult gpu = runProgram(p, fp8gemm::gemmInputs(o), 0, "cuda");
    EXPECT_TRUE(gpu.ok) << "cuda: " << gpu.err;
    if (!cpu.ok || !gpu.ok)
      continue;
    fp8gemm::D want = fp8gemm::values(cpu.outputs[0], g.out);
    fp8gemm::D got = fp8gemm::values(gpu.outputs[0], g.out);
    EXPECT_EQ(got.size(), want.size());
    if (got.size() == want.size())
      check(g, o, want, got);
  }
}

/// On operands whose every partial sum is exact in any accumulator (f32,
/// or Hopper's 13-fraction-bit fp8 one: Fp8GemmCheck.h, checked on the CPU
/// in Fp8GemmCheckTest.cpp) and power-of-two scales, cuBLASLt's result is
/// the CPU's bit for bit: no tolerance for a layout, transposition, leading
/// dimension or scale to hide in. On a difference the test prints how far
/// the GPU's result is from each wrong reading of the operands.
TEST(CudaFp8, ScaledMatMulExactOnExactlySummableOperands) {
  REQUIRE_GPU();
  onEveryGemmCase(fp8gemm::exactOperands, [](const fp8gemm::GemmCase &g,
                                             const fp8gemm::GemmOperands &o,
                                             const fp8gemm::D &want, const fp8gemm::D &got) {
    size_t bad = 0, first = 0;
    for (size_t e = 0; e < want.size(); ++e)
      if (!(want[e] == got[e]) && bad++ == 0) first = e;
    std::printf("exact operands, %s: %zu of %zu elements differ\n", fp8gemm::caseName(g).c_str(),
                bad, want.size());
    if (bad) {
      std::printf("  first at (%lld, %lld): gpu %.9g, cpu %.9g\n", (long long)(first / g.n),
                  (long long)(first % g.n), got[first], want[first]);
      fp8gemm::printDiagnosis("exact operands", fp8gemm::diagnose(g, o, got));
    }
    EXPECT_EQ(bad, 0u) << "first at element " << first << ": gpu " << got[first] << ", cpu "
                       << want[first];
  });
}

/// On random operands (every finite fp8 magnitude), |gpu - cpu| within
/// fp8gemm::accumulationBound: f32 accumulation on both sides plus the
/// truncations of Hopper's fp8 accumulator between promotions to f32, and
/// one bf16 unit for bf16 results. The H100 run of 2026-11-25 failed the
/// earlier bound (2^-20 of sum |a b| without fast accumulation): it
/// assumed f32 accumulation inside the tensor cores, which Hopper's fp8
/// MMA does not have (K <= 128 showed 2^-10.3 with and without fast
/// accumulation alike), and half a bf16 unit, which two roundings of
/// different f32 values can exceed. Prints, per case, the worst error
/// against the bound and against sum |a b|, and the distance to each
/// wrong reading of the operands.
TEST(CudaFp8, ScaledMatMulWithinAccumulationBound) {
  REQUIRE_GPU();
  onEveryGemmCase(fp8gemm::randomOperands, [](const fp8gemm::GemmCase &g,
                                              const fp8gemm::GemmOperands &o,
                                              const fp8gemm::D &want, const fp8gemm::D &got) {
    fp8gemm::Verdict v = fp8gemm::judge(g, o, got, want, fp8gemm::magnitudes(g, o));
    std::printf("random operands, %s: worst |gpu - cpu| / bound %.3f (bound 2^%.2f of sum|ab|), "
                "worst |gpu - cpu| / sum|ab| 2^%.2f, %zu elements outside\n",
                fp8gemm::caseName(g).c_str(), v.worstOverTol,
                std::log2(fp8gemm::accumulationBound(g.k, g.fast)),
                v.worstOverMag > 0 ? std::log2(v.worstOverMag) : -999.0, v.outside);
    fp8gemm::printDiagnosis("random operands", fp8gemm::diagnose(g, o, got));
    EXPECT_EQ(v.outside, 0u) << "worst error / bound " << v.worstOverTol;
  });
}

TEST(CudaFp8, RefusesLayoutsCublasLtCannotRun) {
  REQUIRE_GPU();
  ProgramBuilder b;
  uint32_t a = b.input(DType::F8E4M3, {32, 48}), w = b.input(DType::F8E4M3, {48, 32});
  uint32_t s = b.input(DType::F32, {1, 1}), t = b.input(DType::F32, {1, 1});
  b.instr(OpCode::ScaledMatMul, {a, w, s, t}, {b.output(DType::F32, {32, 32})}, {0, 0, 0});
  RunResult r = runProgram(b.p, {}, 0, "cuda");
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.err.find("transA = 0, transB = 1"), std::string::npos) << r.err;
}

} // namespace
} // namespace loom::rt::test
