//===- Fp8GemmCheckTest.cpp - The fp8 GEMM bound, checked on the CPU ------===//
//
// Part of loom, under the Apache License v2.0.
//
// Fp8CudaTest.cpp judges cuBLASLt's fp8 GEMMs with Fp8GemmCheck.h; these
// tests show, without a GPU, that the judgement means something: on the
// exact operands a model of Hopper's truncating fp8 accumulator gives the
// CPU's result bit for bit (so the GPU test may demand equality), on random
// operands the model stays inside accumulationBound, and every bug the
// bound is there to catch (an operand read transposed, a scale doubled,
// missing, applied twice, or paired with the wrong row) falls outside it.
//===----------------------------------------------------------------------===//
#include "Fp8GemmCheck.h"

namespace loom::rt::test {
namespace {

using namespace fp8gemm;

/// The CPU's ScaledMatMul of `o` for `g` (the reference the GPU meets).
Bytes cpuScaledGemm(const GemmCase &g, const GemmOperands &o) {
  RunResult r = runProgram(scaledGemmProgram(g), gemmInputs(o), 4, "cpu");
  EXPECT_TRUE(r.ok) << r.err;
  return r.ok ? r.outputs[0] : Bytes();
}

/// Small shapes of each accumulation regime the GPU test covers: K within
/// one promotion interval and past it, fast and not, both scalings and
/// outputs, an e5m2 operand.
const GemmCase kCases[] = {
    {96, 80, 64, false, false, DType::F32},
    {96, 80, 128, false, true, DType::BF16},
    {96, 80, 64, true, false, DType::F32},
    {80, 80, 512, true, true, DType::BF16},
    {64, 48, 1024, false, true, DType::BF16, DType::F8E4M3, DType::F8E5M2},
    {64, 48, 4096, true, false, DType::F32},
    {48, 64, 4096, false, true, DType::F32},
};

TEST(Fp8GemmCheck, ExactOperandsAreExactUnderTheAccumulatorModel) {
  Rng rng;
  for (const GemmCase &g : kCases) {
    SCOPED_TRACE(caseName(g));
    GemmOperands o = exactOperands(g, rng);
    Bytes want = cpuScaledGemm(g, o), got = emulateHopper(g, o);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want) << "the truncating accumulator changed an exact sum";
    // And the operands are not trivial: most results are nonzero.
    D v = values(want, g.out);
    size_t nonzero = size_t(std::count_if(v.begin(), v.end(), [](double x) { return x != 0; }));
    EXPECT_GT(nonzero, v.size() / 2);
  }
}

/// Every case of kCases on random operands: `check(case, operands, sum
/// |a b|, the CPU's result)`.
template <typename Check> void onRandomOperands(Check check) {
  Rng rng;
  for (const GemmCase &g : kCases) {
    SCOPED_TRACE(caseName(g));
    GemmOperands o = randomOperands(g, rng);
    check(g, o, magnitudes(g, o), values(cpuScaledGemm(g, o), g.out));
  }
}

TEST(Fp8GemmCheck, BoundAdmitsTheAccumulatorModel) {
  onRandomOperands([](const GemmCase &g, const GemmOperands &o, const F &mag, const D &want) {
    D got = values(emulateHopper(g, o), g.out);
    Verdict v = judge(g, o, got, want, mag);
    std::printf("model %s: worst error / bound %.3f, worst error / sum|ab| 2^%.2f\n",
                caseName(g).c_str(), v.worstOverTol,
                v.worstOverMag > 0 ? std::log2(v.worstOverMag) : -999.0);
    EXPECT_EQ(v.outside, 0u) << "worst error / bound " << v.worstOverTol;
  });
}

/// The reading of the operands that diagnose() finds nearest to `got`.
std::string nearestReading(const GemmCase &g, const GemmOperands &o, const D &got) {
  std::vector<Reading> r = diagnose(g, o, got);
  return std::min_element(r.begin(), r.end(), [](const Reading &x, const Reading &y) {
           return x.relErr < y.relErr;
         })->name;
}

TEST(Fp8GemmCheck, BoundRejectsLayoutAndScaleBugs) {
  onRandomOperands([](const GemmCase &g, const GemmOperands &o, const F &mag, const D &want) {
    EXPECT_EQ(nearestReading(g, o, want), "as specified: acc da db");
    struct Bug {
      const char *name;
      GemmOperands operands;
      const char *reading; // diagnose()'s name for it, if it has one
    };
    std::vector<Bug> bugs;
    GemmOperands b = o;
    b.b = reinterpretTransposed(o.b, g.n, g.k);
    bugs.push_back({"b read as [K, N]", b, "b read as [K, N]"});
    b = o;
    b.a = reinterpretTransposed(o.a, g.m, g.k);
    bugs.push_back({"a read as [K, M]", b, "a read as [K, M]"});
    b = o;
    for (float &s : b.da) s *= 2;
    bugs.push_back({"a's scale doubled", b, nullptr});
    b = o;
    for (float &s : b.da) s = 1;
    for (float &s : b.db) s = 1;
    bugs.push_back({"scales missing", b, "scales missing: acc"});
    b = o;
    for (float &s : b.da) s *= s;
    for (float &s : b.db) s *= s;
    bugs.push_back({"scales applied twice", b, "scales twice: acc (da db)^2"});
    if (g.rowwise) {
      b = o;
      std::reverse(b.da.begin(), b.da.end());
      bugs.push_back({"a's row scales in the wrong rows", b, nullptr});
    }
    for (const Bug &bug : bugs) {
      D got = values(cpuScaledGemm(g, bug.operands), g.out);
      Verdict v = judge(g, o, got, want, mag);
      double caught = double(v.outside) / double(want.size());
      std::printf("bug %s, %s: %.1f%% of the elements outside the bound\n", caseName(g).c_str(),
                  bug.name, 100 * caught);
      // Each bug moves a result by about its own size; the bound is
      // loosest with fast accumulation over a long K, where it still
      // leaves over a quarter of a transposition's elements outside it
      // (one suffices to fail the GPU test).
      EXPECT_GT(caught, 0.1) << bug.name;
      if (bug.reading) // and the diagnosis names it: its reading is the nearest
        EXPECT_EQ(nearestReading(g, o, got), bug.reading);
    }
  });
}

} // namespace
} // namespace loom::rt::test
