//===- GemmStagingTest.cpp - Which GEMMs run padded, and how --------------===//
//
// Part of loom, under the Apache License v2.0.
//
// planGemmStaging on hand-built products: GPT-2's logits GEMM and its two
// gradients run as the 50,264-wide problem with exactly the matrices that
// hold the vocabulary dim staged; whole-word, small, batched, f64 and
// biased-in-N products are left alone; the scratch and copy bytes are what
// the CUDA backend allocates and the planner prices. The CUDA side (the
// staged product equals the CPU's) is CudaBackend.OddSizedProductsRunPadded.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

#include "loom/runtime/GemmStaging.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

GemmStaging staging(DType in, DType out, const Shape &a, const Shape &b, const Shape &c, bool ta,
                    bool tb, bool bias = false) {
  ProgramBuilder pb;
  uint32_t x = pb.input(in, a), w = pb.input(in, b);
  std::vector<uint32_t> ins{x, w};
  if (bias) ins.push_back(pb.input(out, {c.back()}));
  pb.instr(OpCode::MatMul, ins, {pb.output(out, c)}, {ta, tb});
  return planGemmStaging(pb.p, pb.p.instrs[0]);
}

TEST(GemmStaging, Gpt2LogitsAndTheirGradients) {
  // logits = h W^T: W's 50,257 rows and the [8192, 50257] result.
  GemmStaging fwd = staging(DType::BF16, DType::BF16, {8, 1024, 1280}, {50257, 1280},
                            {8, 1024, 50257}, false, true);
  EXPECT_EQ(fwd.m, 8192);
  EXPECT_EQ(fwd.n, 50264); // whole 16-byte words of bf16
  EXPECT_EQ(fwd.k, 1280);
  EXPECT_FALSE(fwd.a.staged);
  ASSERT_TRUE(fwd.b.staged && fwd.out.staged);
  EXPECT_EQ(fwd.b.paddedRows, 50264);
  EXPECT_EQ(fwd.b.paddedCols, 1280);
  EXPECT_EQ(fwd.out.rows, 8192);
  EXPECT_EQ(fwd.out.cols, 50257);
  EXPECT_EQ(fwd.out.paddedCols, 50264);
  EXPECT_EQ(fwd.offsetOfB(), 0u);
  EXPECT_EQ(fwd.offsetOfOut(), (50264ull * 1280 * 2 + 255) / 256 * 256);
  EXPECT_EQ(fwd.scratchBytes(), fwd.offsetOfOut() + (8192ull * 50264 * 2 + 255) / 256 * 256);
  EXPECT_EQ(fwd.copyBytes(), (50257ull * 1280 + 50264ull * 1280 + 2 * 8192ull * 50257 +
                              8192ull * 50264 - 8192ull * 50257) * 2);
  // dh = dlogits W: K is the vocabulary; both operands pad it with zeros.
  GemmStaging dgrad = staging(DType::BF16, DType::BF16, {8192, 50257}, {50257, 1280},
                              {8192, 1280}, false, false);
  EXPECT_EQ(dgrad.k, 50264);
  EXPECT_TRUE(dgrad.a.staged && dgrad.b.staged);
  EXPECT_EQ(dgrad.a.paddedCols, 50264);
  EXPECT_EQ(dgrad.b.paddedRows, 50264);
  EXPECT_FALSE(dgrad.out.staged);
  // dW = dlogits^T h with an f32 result: M is the vocabulary.
  GemmStaging wgrad = staging(DType::BF16, DType::F32, {8192, 50257}, {8192, 1280},
                              {50257, 1280}, true, false);
  EXPECT_EQ(wgrad.m, 50264);
  EXPECT_TRUE(wgrad.a.staged && wgrad.out.staged);
  EXPECT_EQ(wgrad.a.rows, 8192);
  EXPECT_EQ(wgrad.a.paddedCols, 50264);
  EXPECT_EQ(wgrad.out.paddedRows, 50264);
  EXPECT_EQ(wgrad.out.elemBytes, 4u);
  EXPECT_FALSE(wgrad.b.staged);
  // f32 operands pad to 4 elements.
  GemmStaging f32 = staging(DType::F32, DType::F32, {8192, 1280}, {1280, 50257}, {8192, 50257},
                            false, false);
  EXPECT_EQ(f32.n, 50260);
  EXPECT_TRUE(f32.b.staged && f32.out.staged);
}

TEST(GemmStaging, WholeWordSmallBatchedAndBiasedProductsAreLeftAlone) {
  // Llama's head: 128,256 columns are whole 16-byte words.
  EXPECT_FALSE(staging(DType::BF16, DType::BF16, {4, 2048, 2048}, {128256, 2048},
                       {4, 2048, 128256}, false, true).any());
  // The tiny fixtures' odd vocabularies: below 2^30 FLOPs.
  EXPECT_FALSE(staging(DType::BF16, DType::F32, {8, 64, 32}, {101, 32}, {8, 64, 101}, false,
                       true).any());
  // A batched product with odd dims: one call per batch, unstaged.
  EXPECT_FALSE(staging(DType::BF16, DType::BF16, {16, 1021, 1023}, {16, 1023, 1021},
                       {16, 1021, 1021}, false, false).any());
  // The same product with a weight shared by the batch folds into one call.
  EXPECT_TRUE(staging(DType::BF16, DType::BF16, {16, 1021, 1023}, {1023, 1021}, {16, 1021, 1021},
                      false, false).any());
  // A bias over an N that would need padding (the epilogue reads N values).
  EXPECT_FALSE(staging(DType::BF16, DType::BF16, {8192, 1280}, {1280, 3841}, {8192, 3841}, false,
                       false, /*bias=*/true).any());
  // A bias over a whole-word N with an odd K stays possible.
  EXPECT_TRUE(staging(DType::BF16, DType::BF16, {8192, 1281}, {1281, 3840}, {8192, 3840}, false,
                      false, /*bias=*/true).any());
  // f64 stays as it is.
  EXPECT_FALSE(staging(DType::F64, DType::F64, {8192, 1281}, {1281, 1281}, {8192, 1281}, false,
                       false).any());
}

} // namespace
