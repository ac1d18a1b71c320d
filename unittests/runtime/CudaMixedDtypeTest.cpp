//===- CudaMixedDtypeTest.cpp - CUDA kernels on bf16 storage --------------===//
//
// Part of loom, under the Apache License v2.0.
//
// The CUDA kernels read and write bf16 storage of their f32 computations
// themselves (FloatIn/FloatOut, cuda/CudaCommon.cuh), which is how
// autocast's casts fold into them. For every slot Program.h allows
// (MixedDtypeCases.h), each test runs
//   - the fused program on the GPU against the unfused one (Cast, f32
//     instruction, Cast) on the GPU: the same bits, since the fold must not
//     change a training run;
//   - the fused program on the GPU against the CPU reference: within the
//     tolerance the f32 kernels have (CudaBackendTest.cpp), comparing bf16
//     results as the f32 values they stand for.
// Attention's cases run through each of its implementations, and once
// with an operand the flash kernels cannot load (the staged fallback).
// Inputs are fresh random values every run (the seed is printed on
// failure). Both executors start from a 0xff-filled arena, so an output
// element a kernel leaves unwritten is NaN and fails. Without a usable GPU
// every test reports SKIPPED.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "MixedDtypeCases.h"

#ifdef LOOM_HAVE_CUDA
#include "cuda/CudaExecutor.h"
#endif

namespace loom::rt::test {
namespace {

/// Output k as doubles, widening bf16.
std::vector<double> valuesOf(const Program &p, const RunResult &r, size_t k) {
  std::vector<double> v;
  if (p.buffers[p.outputs[k]].dtype == DType::BF16)
    for (uint16_t h : r.out<uint16_t>(k)) {
      uint32_t u = uint32_t(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      v.push_back(f);
    }
  else
    for (float f : r.out<float>(k)) v.push_back(f);
  return v;
}

/// |got - want| <= atol + rtol |want| everywhere, NaN never passing; a bf16
/// result may also be one bf16 step (2^-8 relative) off, when the f32
/// values of the two backends straddle a rounding boundary.
::testing::AssertionResult closeValues(const std::vector<double> &got,
                                       const std::vector<double> &want, double rtol, double atol,
                                       bool bf16) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " values, expected " << want.size();
  double slack = bf16 ? 1.0 / 128 : 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= atol + (rtol + slack) * std::fabs(want[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", expected " << want[i];
  return ::testing::AssertionSuccess();
}

/// The fused program on the GPU gives the unfused one's bits on the GPU.
void expectFusedEqualsUnfusedOnGpu(const MixedCase &c, Rng &rng) {
  SCOPED_TRACE(c.name);
  MixedPrograms m = buildMixed(c, rng);
  RunResult fused = runProgram(m.fused, m.inputs, 0, "cuda");
  ASSERT_TRUE(fused.ok) << "cuda fused: " << fused.err;
  RunResult unfused = runProgram(m.unfused, m.inputs, 0, "cuda");
  ASSERT_TRUE(unfused.ok) << "cuda unfused: " << unfused.err;
  for (size_t k = 0; k < fused.outputs.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    EXPECT_EQ(fused.outputs[k], unfused.outputs[k]);
  }
}

/// The fused program on the GPU is within the case's tolerance of the CPU.
void expectFusedMatchesCpu(const MixedCase &c, Rng &rng) {
  SCOPED_TRACE(c.name);
  MixedPrograms m = buildMixed(c, rng);
  RunResult cpu = runProgram(m.fused, m.inputs, 2, "cpu");
  ASSERT_TRUE(cpu.ok) << "cpu: " << cpu.err;
  RunResult gpu = runProgram(m.fused, m.inputs, 0, "cuda");
  ASSERT_TRUE(gpu.ok) << "cuda: " << gpu.err;
  for (size_t k = 0; k < m.fused.outputs.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    bool bf16 = m.fused.buffers[m.fused.outputs[k]].dtype == DType::BF16;
    EXPECT_TRUE(closeValues(valuesOf(m.fused, gpu, k), valuesOf(m.fused, cpu, k), c.rtol, c.atol,
                            bf16));
  }
}

TEST(CudaMixedDtype, FusedEqualsUnfusedOnTheGpu) {
  REQUIRE_GPU();
  Rng rng;
  for (const MixedCase &c : mixedCases()) expectFusedEqualsUnfusedOnGpu(c, rng);
}

TEST(CudaMixedDtype, FusedMatchesTheCpuReference) {
  REQUIRE_GPU();
  Rng rng;
  for (const MixedCase &c : mixedCases()) expectFusedMatchesCpu(c, rng);
}

/// Sets LOOM_CUDA_ATTENTION for one scope: "" leaves the choice among
/// loom's kernels to the backend, with cuDNN off (LOOM_CUDNN=0); "cudnn"
/// lets cuDNN's engines take what they can.
class AttentionPath {
public:
  explicit AttentionPath(const std::string &path) {
    if (path.empty()) {
      unsetenv("LOOM_CUDA_ATTENTION");
      setenv("LOOM_CUDNN", "0", 1);
    } else {
      setenv("LOOM_CUDA_ATTENTION", path.c_str(), 1);
    }
  }
  ~AttentionPath() {
    unsetenv("LOOM_CUDA_ATTENTION");
    unsetenv("LOOM_CUDNN");
  }
};

TEST(CudaMixedDtype, AttentionFusedEqualsUnfusedOnEveryPath) {
  // Through each implementation (AttentionKernels.cu): the flash kernels
  // read and write bf16 themselves (the head dim 64 cases with
  // bf16_operands; by default and under "flash" the others take the
  // GEMMs), the GEMM, chunked and plain ones are staged through f32
  // scratch. Either way the fused program computes the unfused one's bits
  // (Cast, f32 instruction, Cast), and stays near the CPU reference.
  REQUIRE_GPU();
  Rng rng;
  for (const char *path : {"", "flash", "gemm", "chunked", "plain"}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_ATTENTION=") + path);
    AttentionPath forced(path);
    for (const MixedCase &c : attentionMixedCases()) {
      expectFusedEqualsUnfusedOnGpu(c, rng);
      expectFusedMatchesCpu(c, rng);
    }
  }
}

TEST(CudaMixedDtype, AttentionOnCudnnMatchesTheCpuReference) {
  // cuDNN's engines (CudnnAttentionLaunch.cu) on bf16 storage and on f32
  // storage staged through bf16 copies: near the CPU reference. Not bit for
  // bit against the unfused program: its backward adds dQ with atomics.
  REQUIRE_GPU();
  Rng rng;
  AttentionPath forced("cudnn");
  for (const MixedCase &c : attentionMixedCases()) expectFusedMatchesCpu(c, rng);
}

TEST(CudaMixedDtype, AttentionOnUnalignedBf16FallsBackStaged) {
  // The flash kernels copy rows 16 bytes at a time; an operand only 8-byte
  // aligned sends the instruction to the chunked kernels, staged, and the
  // executor's scratch must have room for the f32 copies. The result is
  // then the unfused program's bits under the chunked kernels.
  REQUIRE_GPU();
  Rng rng;
  for (const MixedCase &c : attentionMixedCases()) {
    if (c.in[0].shape.back() != 64 || !c.in[0].bf16) continue; // flash cases with bf16 q
    AttentionPath loomKernels(""); // cuDNN would take a staged copy
    SCOPED_TRACE(c.name);
    MixedPrograms m = buildMixed(c, rng);
    // Move q past the end of the arena, 8 bytes off a 16-byte boundary.
    BufferDesc &q = m.fused.buffers[m.fused.instrs[0].in[0]];
    q.offset = (m.fused.arenaBytes + 63) / 64 * 64 + 8;
    m.fused.arenaBytes = q.offset + q.bytes;
    ASSERT_EQ(m.fused.validate(), "");
    RunResult fused = runProgram(m.fused, m.inputs, 0, "cuda");
    ASSERT_TRUE(fused.ok) << "cuda fused: " << fused.err;
    RunResult cpu = runProgram(m.fused, m.inputs, 2, "cpu");
    ASSERT_TRUE(cpu.ok) << "cpu: " << cpu.err;
    AttentionPath chunked("chunked");
    RunResult unfused = runProgram(m.unfused, m.inputs, 0, "cuda");
    ASSERT_TRUE(unfused.ok) << "cuda unfused: " << unfused.err;
    for (size_t k = 0; k < fused.outputs.size(); ++k) {
      SCOPED_TRACE("output " + std::to_string(k));
      EXPECT_EQ(fused.outputs[k], unfused.outputs[k]);
      bool bf16 = m.fused.buffers[m.fused.outputs[k]].dtype == DType::BF16;
      EXPECT_TRUE(closeValues(valuesOf(m.fused, fused, k), valuesOf(m.fused, cpu, k), c.rtol,
                              c.atol, bf16));
    }
  }
}

} // namespace
} // namespace loom::rt::test
