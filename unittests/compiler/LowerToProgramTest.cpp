//===- LowerToProgramTest.cpp - Codegen decisions visible in the program --===//
//
// Part of loom, under the Apache License v2.0.
//
// Codegen choices that change which kernels run: a bf16 -> f32 cast that
// only feeds matmuls is folded into a bf16 GEMM with an f32 result (and
// kept when another user needs the f32 copy), and the program computes the
// same values either way; autocast's other casts fold into the kernels
// that read or write their values (codegen/FoldCasts.cpp), bit for bit.
//===----------------------------------------------------------------------===//
#include "codegen/LowerToProgram.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "loom/runtime/Executor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

using namespace mlir;

namespace {

constexpr const char *kWidened = R"mlir(
func.func @f(%a: tensor<3x8xbf16>, %w: tensor<8x5xbf16>, %v: tensor<8x5xbf16>)
    -> (tensor<3x5xf32>, tensor<8x5xf32>) {
  %0 = loom.cast %a : tensor<3x8xbf16> -> tensor<3x8xf32>
  %1 = loom.cast %w : tensor<8x5xbf16> -> tensor<8x5xf32>
  %2 = loom.cast %v : tensor<8x5xbf16> -> tensor<8x5xf32>
  %7 = loom.cast %a : tensor<3x8xbf16> -> tensor<3x8xf32>
  %3 = loom.matmul %0, %1 : tensor<3x8xf32>, tensor<8x5xf32>
  %4 = loom.matmul %7, %2 : tensor<3x8xf32>, tensor<8x5xf32>
  %5 = loom.add %3, %4 : tensor<3x5xf32>, tensor<3x5xf32>
  %6 = loom.add %2, %2 : tensor<8x5xf32>, tensor<8x5xf32>
  return %5, %6 : tensor<3x5xf32>, tensor<8x5xf32>
}
)mlir";

struct Lowered {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  loom::rt::Program program;
  std::string err;
  explicit Lowered(const char *text) {
    ctx.loadDialect<func::FuncDialect, loom::LoomDialect>();
    module = parseSourceString<ModuleOp>(text, &ctx);
    if (module)
      loom::lowerToProgram(*module->getOps<func::FuncOp>().begin(), program, err);
  }
};

TEST(LowerToProgram, WideningCastsFoldIntoBf16Gemms) {
  Lowered l(kWidened);
  ASSERT_TRUE(l.module);
  ASSERT_EQ(l.err, "");
  const loom::rt::Program &p = l.program;
  int casts = 0, bf16Gemms = 0, f32Gemms = 0;
  for (const loom::rt::Instr &I : p.instrs) {
    if (I.op == loom::rt::OpCode::Cast) ++casts;
    if (I.op != loom::rt::OpCode::MatMul) continue;
    bool bf16In = p.buffers[I.in[0]].dtype == loom::rt::DType::BF16 &&
                  p.buffers[I.in[1]].dtype == loom::rt::DType::BF16;
    (bf16In ? bf16Gemms : f32Gemms) += 1;
    EXPECT_EQ(p.buffers[I.out[0]].dtype, loom::rt::DType::F32);
  }
  // Both matmuls read bf16: %0, %1 and %7 only feed matmuls and are never
  // emitted; %2 also feeds an add, yet its matmul reads the bf16 source all
  // the same (the widening is exact), and the add reads that source too
  // (FoldCasts: an add may read bf16 storage), so no cast is left.
  EXPECT_EQ(bf16Gemms, 2);
  EXPECT_EQ(f32Gemms, 0);
  EXPECT_EQ(casts, 0);

  // Same numbers as widening first: bf16 values are exact in f32.
  auto exec = loom::rt::createExecutor(std::make_shared<loom::rt::Program>(p), "cpu", 1, l.err);
  ASSERT_TRUE(exec) << l.err;
  std::vector<uint16_t> a(24), w(40), v(40);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint16_t(0x3f80 + (i * 37) % 64); // 1.0 .. 1.49
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint16_t(0xbf80 + (i * 11) % 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint16_t(0x3f00 + (i * 5) % 64);
  ASSERT_TRUE(exec->setInput(0, a.data(), 48, l.err) && exec->setInput(1, w.data(), 80, l.err) &&
              exec->setInput(2, v.data(), 80, l.err) && exec->run(l.err))
      << l.err;
  std::vector<float> out(15);
  ASSERT_TRUE(exec->getOutput(0, out.data(), 60, l.err)) << l.err;
  auto f = [](uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return double(x);
  };
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double want = 0;
      for (int k = 0; k < 8; ++k) want += f(a[i * 8 + k]) * (f(w[k * 5 + j]) + f(v[k * 5 + j]));
      EXPECT_NEAR(out[size_t(i * 5 + j)], want, 1e-4 * std::abs(want));
    }
}

// One MLP-like block as autocast leaves it: every op's f32 result rounded
// through a cast pair, bf16 GEMMs, and a bf16 value that leaves the function.
constexpr const char *kAutocast = R"mlir(
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %m: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) {
  %0 = loom.rms_norm %x, %w {epsilon = 1.0E-5 : f64} : tensor<4x8xf32>, tensor<8xf32>
  %1 = loom.cast %0 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %2 = loom.cast %1 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %3 = loom.cast %m : tensor<8x8xf32> -> tensor<8x8xbf16>
  %4 = loom.matmul %1, %3 : tensor<4x8xbf16>, tensor<8x8xbf16>
  %5 = loom.cast %4 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %6 = loom.silu %5 : tensor<4x8xf32>
  %7 = loom.cast %6 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %8 = loom.cast %7 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %9 = loom.mul %8, %2 : tensor<4x8xf32>, tensor<4x8xf32>
  %10 = loom.transpose %9 [1, 0] : tensor<4x8xf32>
  %11 = loom.cast %10 : tensor<8x4xf32> -> tensor<8x4xbf16>
  %12 = loom.cast %11 : tensor<8x4xbf16> -> tensor<8x4xf32>
  %13 = loom.softmax %5 {axis = 1 : i64} : tensor<4x8xf32>
  return %13, %12, %9 : tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>
}
)mlir";

struct CastCounts {
  int casts = 0, converting = 0;
};

CastCounts countCasts(const loom::rt::Program &p) {
  CastCounts c;
  for (const loom::rt::Instr &I : p.instrs)
    if (I.op == loom::rt::OpCode::Cast) {
      ++c.casts;
      c.converting += p.buffers[I.in[0]].dtype != p.buffers[I.out[0]].dtype;
    }
  return c;
}

std::vector<std::vector<uint8_t>> runOnCpu(const loom::rt::Program &p,
                                           const std::vector<std::vector<float>> &inputs,
                                           std::string &err) {
  std::vector<std::vector<uint8_t>> outs;
  auto exec = loom::rt::createExecutor(std::make_shared<loom::rt::Program>(p), "cpu", 2, err);
  if (!exec)
    return outs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!exec->setInput(i, inputs[i].data(), inputs[i].size() * 4, err))
      return outs;
  if (!exec->run(err))
    return outs;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    outs.emplace_back(p.buffers[p.outputs[k]].bytes);
    if (!exec->getOutput(k, outs.back().data(), outs.back().size(), err))
      return {};
  }
  return outs;
}

/// Runs both programs on the same fresh inputs in [-2, 2) (one vector per
/// argument, of the given sizes) and expects the same output bits.
void expectSameBits(const loom::rt::Program &a, const loom::rt::Program &b,
                    const std::vector<size_t> &sizes) {
  std::mt19937 gen(std::random_device{}());
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<std::vector<float>> inputs;
  for (size_t n : sizes) {
    inputs.emplace_back(n);
    for (float &x : inputs.back()) x = u(gen);
  }
  std::string err;
  auto want = runOnCpu(a, inputs, err);
  ASSERT_EQ(err, "");
  auto got = runOnCpu(b, inputs, err);
  ASSERT_EQ(err, "");
  ASSERT_EQ(got.size(), a.outputs.size());
  EXPECT_EQ(got, want);
}

TEST(LowerToProgram, AutocastCastsFoldIntoKernels) {
  setenv("LOOM_FOLD_CASTS", "0", 1);
  Lowered plain(kAutocast);
  unsetenv("LOOM_FOLD_CASTS");
  Lowered folded(kAutocast);
  ASSERT_TRUE(plain.module && folded.module);
  ASSERT_EQ(plain.err, "");
  ASSERT_EQ(folded.err, "");
  CastCounts before = countCasts(plain.program), after = countCasts(folded.program);
  EXPECT_EQ(before.converting, 8);
  // Left: the weight's rounding (%3, read by the GEMM; an argument has no
  // kernel to fold into) and %5, which softmax reads (softmax takes no bf16
  // storage), and %12, a result of the function. rms_norm and silu store
  // bf16, the mul reads both bf16 values and the transpose stores bf16.
  EXPECT_EQ(after.converting, 3);
  EXPECT_EQ(after.casts, 3);
  const loom::rt::Program &p = folded.program;
  for (const loom::rt::Instr &I : p.instrs) {
    if (I.op == loom::rt::OpCode::RmsNorm || I.op == loom::rt::OpCode::Silu)
      EXPECT_EQ(p.buffers[I.out[0]].dtype, loom::rt::DType::BF16);
    if (I.op == loom::rt::OpCode::Mul) {
      EXPECT_EQ(p.buffers[I.in[0]].dtype, loom::rt::DType::BF16);
      EXPECT_EQ(p.buffers[I.in[1]].dtype, loom::rt::DType::BF16);
      EXPECT_EQ(p.buffers[I.out[0]].dtype, loom::rt::DType::F32); // %9 is a result
    }
  }
  // Fewer instructions, the same bits.
  expectSameBits(plain.program, p, {32, 8, 64});
}

// Reshapes around bf16 GEMMs as autocast and the exporters spell them:
// reshape then cast (%5 -> %6, %11 -> %16), cast then reshape (%8 -> %9),
// and a reshape of a reshape (%2 -> %12).
constexpr const char *kReshapes = R"mlir(
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %r: tensor<8xf32>)
    -> (tensor<2x16xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<32xf32>) {
  %0 = loom.rms_norm %x, %r {epsilon = 1.0E-5 : f64} : tensor<4x8xf32>, tensor<8xf32>
  %1 = loom.cast %0 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %2 = loom.reshape %1 : tensor<4x8xbf16> -> tensor<2x2x8xbf16>
  %3 = loom.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
  %4 = loom.matmul %2, %3 : tensor<2x2x8xbf16>, tensor<8x8xbf16>
  %5 = loom.reshape %4 : tensor<2x2x8xbf16> -> tensor<2x16xbf16>
  %6 = loom.cast %5 : tensor<2x16xbf16> -> tensor<2x16xf32>
  %7 = loom.silu %6 : tensor<2x16xf32>
  %8 = loom.cast %4 : tensor<2x2x8xbf16> -> tensor<2x2x8xf32>
  %9 = loom.reshape %8 : tensor<2x2x8xf32> -> tensor<4x8xf32>
  %10 = loom.neg %9 : tensor<4x8xf32>
  %11 = loom.reshape %4 : tensor<2x2x8xbf16> -> tensor<8x4xbf16>
  %16 = loom.cast %11 : tensor<8x4xbf16> -> tensor<8x4xf32>
  %13 = loom.exp %16 : tensor<8x4xf32>
  %12 = loom.reshape %2 : tensor<2x2x8xbf16> -> tensor<32xbf16>
  %14 = loom.cast %12 : tensor<32xbf16> -> tensor<32xf32>
  %15 = loom.tanh %14 : tensor<32xf32>
  return %7, %10, %13, %15 : tensor<2x16xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<32xf32>
}
)mlir";

TEST(LowerToProgram, ReshapesOfTemporariesAreViews) {
  setenv("LOOM_FOLD_CASTS", "0", 1);
  Lowered plain(kReshapes);
  unsetenv("LOOM_FOLD_CASTS");
  Lowered viewed(kReshapes);
  ASSERT_TRUE(plain.module && viewed.module);
  ASSERT_EQ(plain.err, "");
  ASSERT_EQ(viewed.err, "");
  EXPECT_TRUE(plain.program.views.empty());
  // Every reshape is a view; the one cast left rounds the weight (an
  // argument: no kernel writes it). silu, neg, exp and tanh widen as they
  // read, the rms_norm stores bf16.
  const loom::rt::Program &p = viewed.program;
  CastCounts c = countCasts(p);
  EXPECT_EQ(c.casts, 1);
  EXPECT_EQ(c.converting, 1);
  EXPECT_EQ(p.views.size(), 5u); // %2, %5, %11, %12 and the [4, 8] half of %8 -> %9
  EXPECT_EQ(p.instrs.size(), 7u); // rms_norm, cast, matmul, silu, neg, exp, tanh
  for (const loom::rt::BufferView &v : p.views) {
    EXPECT_EQ(p.buffers[v.view].offset, p.buffers[v.base].offset);
    EXPECT_EQ(p.buffers[v.view].bytes, p.buffers[v.base].bytes);
  }
  expectSameBits(plain.program, p, {32, 64, 8});
}

} // namespace
