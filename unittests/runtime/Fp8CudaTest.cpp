//===- Fp8CudaTest.cpp - The CUDA fp8 kernels against the CPU reference ---===//
//
// Part of loom, under the Apache License v2.0.
//
// Issue 17, criterion 2: on an H100 the CUDA casts (the hardware's
// cvt.rn.satfinite conversion) equal the CPU emulation (loom/runtime/Fp8.h,
// itself checked against the OCP spec in Fp8Test.cpp) bit for bit, on the
// edge cases and random data, in every layout; the scales and inverses are
// bit-identical too (an unsigned max of bit patterns, the same f32
// division); and the cuBLASLt fp8 GEMMs agree with the CPU's within the
// noise of their accumulation order (tighter without fast accumulation).
// Without a GPU every test reports SKIPPED.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include "RuntimeTestUtil.h"

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

struct GemmCase {
  int64_t m, n, k;
  bool rowwise, fast;
  DType out;
};

/// Scaled GEMMs on cuBLASLt against the CPU: |gpu - cpu| within the
/// accumulation's noise, 2^-20 (f32 accumulation in another order) or,
/// with fast accumulation, 2^-11 of sum |a b| (Hopper keeps fewer bits
/// between promotions), plus one rounding of a bf16 result.
/// On the H100 (2026-11-25) this failed: without fast accumulation loom's
/// f32 results were off by up to 2^-10.3 of sum |a b| (K = 64 and 128),
/// and rowwise bf16 results at K = 4096 by about 57 times the bound.
/// Whether that is Hopper's fp8 accumulation (the DeepSeek-V3 report
/// measured about 14 bits) or loom's rowwise path is open:
/// bench/gpu/fp8_accumulation.py measures torch._scaled_mm's own error on
/// the same shapes, the anchor to set this bound from. The test prints the
/// worst error per case.
TEST(CudaFp8, ScaledMatMulWithinAccumulationNoise) {
  REQUIRE_GPU();
  Rng rng;
  const GemmCase cases[] = {
      {256, 192, 128, false, false, DType::F32}, {256, 192, 128, false, true, DType::BF16},
      {1000, 176, 64, true, false, DType::F32},  {1000, 176, 64, true, true, DType::BF16},
      {4096, 1024, 4096, false, true, DType::BF16}, {4096, 1024, 4096, true, false, DType::BF16},
  };
  for (const GemmCase &g : cases) {
    SCOPED_TRACE(std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) +
                 (g.rowwise ? " rowwise" : " tensorwise") + (g.fast ? " fast" : "") + " -> " +
                 dtypeName(g.out));
    ProgramBuilder b;
    uint32_t a = b.input(DType::F8E4M3, {g.m, g.k}), w = b.input(DType::F8E4M3, {g.n, g.k});
    Shape sa = g.rowwise ? Shape{g.m, 1} : Shape{1, 1}, sb = g.rowwise ? Shape{g.n, 1} : Shape{1, 1};
    uint32_t da = b.input(DType::F32, sa), db = b.input(DType::F32, sb);
    b.instr(OpCode::ScaledMatMul, {a, w, da, db}, {b.output(g.out, {g.m, g.n})}, {0, 1, g.fast});
    std::vector<uint8_t> av(size_t(g.m * g.k)), wv(size_t(g.n * g.k));
    for (uint8_t &v : av) v = uint8_t(rng.ints(1, 0, 255)[0]) & 0xf7; // finite e4m3 only
    for (uint8_t &v : wv) v = uint8_t(rng.ints(1, 0, 255)[0]) & 0xf7;
    F dav(size_t(numel(sa))), dbv(size_t(numel(sb)));
    for (float &v : dav) v = std::exp2(float(rng.ints(1, -12, -4)[0]));
    for (float &v : dbv) v = std::exp2(float(rng.ints(1, -12, -4)[0]));
    std::vector<Bytes> in = {av, wv, toBytes(dav), toBytes(dbv)};
    RunResult cpu = runProgram(b.p, in, 2, "cpu");
    ASSERT_TRUE(cpu.ok) << cpu.err;
    RunResult gpu = runProgram(b.p, in, 0, "cuda");
    ASSERT_TRUE(gpu.ok) << gpu.err;
    auto values = [&](const RunResult &r) {
      if (g.out == DType::F32) return r.out<float>();
      F v;
      for (uint16_t h : r.out<uint16_t>()) v.push_back(fp8BitsFloat(uint32_t(h) << 16));
      return v;
    };
    F c = values(cpu), d = values(gpu);
    // sum_k |a b| for every output, as an f32 GEMM of the magnitudes on
    // the CPU (its own rounding is far below the bounds).
    F absA(av.size()), absW(wv.size());
    for (size_t i = 0; i < av.size(); ++i) absA[i] = std::fabs(fp8ToFloat(av[i], Fp8Format::E4M3));
    for (size_t i = 0; i < wv.size(); ++i) absW[i] = std::fabs(fp8ToFloat(wv[i], Fp8Format::E4M3));
    ProgramBuilder mb;
    uint32_t ma = mb.input(DType::F32, {g.m, g.k}), mw = mb.input(DType::F32, {g.n, g.k});
    mb.instr(OpCode::MatMul, {ma, mw}, {mb.output(DType::F32, {g.m, g.n})}, {0, 1});
    RunResult mags = runProgram(mb.p, {toBytes(absA), toBytes(absW)}, 8, "cpu");
    ASSERT_TRUE(mags.ok) << mags.err;
    F mag = mags.out<float>();
    double accNoise = g.fast ? std::ldexp(1.0, -11) : std::ldexp(1.0, -20);
    size_t bad = 0;
    double worst = 0, worstOfMag = 0;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        size_t o = size_t(i * g.n + j);
        double scale = double(dav[g.rowwise ? size_t(i) : 0]) * dbv[g.rowwise ? size_t(j) : 0];
        double want = c[o], got = d[o];
        double tol = accNoise * 1.01 * mag[o] * scale +
                     (g.out == DType::BF16 ? std::ldexp(std::fabs(want), -8) : 0) + 1e-30;
        double err = std::fabs(got - want);
        if (!(err <= tol)) ++bad;
        worst = std::max(worst, err / tol);
        if (g.out == DType::F32)
          worstOfMag = std::max(worstOfMag, err / (mag[o] * scale + 1e-30));
      }
    std::printf("scaled GEMM %lldx%lldx%lld %s%s: worst |gpu - cpu| / tolerance %.3f; f32 results: "
                "worst |gpu - cpu| / sum|ab| = 2^%.2f\n",
                (long long)g.m, (long long)g.n, (long long)g.k, g.rowwise ? "rowwise" : "tensorwise",
                g.fast ? " fast" : "", worst, worstOfMag > 0 ? std::log2(worstOfMag) : -999.0);
    EXPECT_EQ(bad, 0u) << "worst error / tolerance " << worst;
  }
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
