//===- Fp8AmaxCudaTest.cpp - amax found inside the CUDA producing kernels --===//
//
// Part of loom, under the Apache License v2.0.
//
// On a GPU: each producing kernel's fused amax (cuda/Fp8Amax.cuh: block
// maxima of |stored value| bits, atomicMax across blocks) equals the amax
// of the values it stored, bit for bit, on every case of Fp8AmaxCases.h;
// the standalone Fp8Amax and Fp8Scale of a [1, 1] amax equal the CPU's;
// AdamW's kept weight amax (WeightAmaxCases.h) is max |p'| of the weights
// it stored, bit for bit as the CPU defines it, run after run and after a
// refresh, and the folded step's scales equal the unfolded step's.
// Without a GPU every test reports SKIPPED.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include "Fp8AmaxCases.h"
#include "WeightAmaxCases.h"

namespace loom::rt::test {
namespace {

TEST(CudaFp8Amax, FusedOutputsEqualTheStoredValuesAmax) {
  REQUIRE_GPU();
  expectFusedAmaxExact("cuda", 0);
}

TEST(CudaFp8Amax, StandaloneAmaxAndItsScaleEqualTheCpus) {
  REQUIRE_GPU();
  Rng rng;
  for (auto &[name, data] : amaxData(rng, 256 * 96))
    for (DType t : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(name + " " + dtypeName(t));
      ProgramBuilder b;
      uint32_t x = b.input(t, {256, 96}), a = b.output(DType::F32, {1, 1}, "amax");
      b.instr(OpCode::Fp8Amax, {x}, {a});
      b.instr(OpCode::Fp8Scale, {a}, {b.output(DType::F32, {1, 1}), b.output(DType::F32, {1, 1})},
              {0, 0});
      RunResult cpu = runProgram(b.p, {amaxInputBytes(t, data)}, 2, "cpu");
      ASSERT_TRUE(cpu.ok) << cpu.err;
      RunResult gpu = runProgram(b.p, {amaxInputBytes(t, data)}, 0, "cuda");
      ASSERT_TRUE(gpu.ok) << gpu.err;
      for (size_t k = 0; k < 3; ++k) EXPECT_EQ(gpu.outputs[k], cpu.outputs[k]) << "output " << k;
    }
}

TEST(CudaFp8Amax, AdamWsWeightAmaxEqualsTheStoredWeightsAmax) {
  REQUIRE_GPU();
  expectWeightAmaxFoldExact("cuda", {3, 37});   // element-wise kernel, one block
  expectWeightAmaxFoldExact("cuda", {96, 256}); // packed kernel, several blocks
  expectWeightAmaxFoldExact("cuda", {97, 255}); // element-wise kernel, many blocks
}

} // namespace
} // namespace loom::rt::test
