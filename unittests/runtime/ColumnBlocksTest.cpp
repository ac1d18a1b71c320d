//===- ColumnBlocksTest.cpp - Sibling operands side by side in one buffer -===//
//
// Part of loom, under the Apache License v2.0.
//
// Column blocks (Program.h, BufferView with a column): what validate()
// accepts and refuses, the artifact round trip, and a SwiGLU block's
// backward joined as codegen's joinSiblingInputGradients leaves it (the
// gradients written into blocks of one buffer, AdamW's rounded copies into
// blocks of another, one input-gradient GEMM over both) against the same
// step apart, over two runs (the second reads the copies AdamW stored):
// on the CPU, and on CUDA in the suite CudaBackend.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include "loom/runtime/Artifact.h"
#include "loom/runtime/Executor.h"
#include "loom/runtime/RowDivision.h"

#include <unistd.h>

namespace loom::rt::test {
namespace {

constexpr int64_t kRows = 6, kIn = 5, kWidth = 8;

/// The backward of y = silu(x Wg) * (x Wu) from dy, and AdamW on Wg and Wu
/// keeping bf16 copies, which the input gradient reads. Outputs: dx (f32),
/// dWg, dWu (bf16), then p', m', v' of each weight.
Program siblingStep(bool joined) {
  ProgramBuilder b;
  Shape act = {kRows, kWidth}, w = {kIn, kWidth};
  uint32_t g = b.input(DType::BF16, act, "g"), u = b.input(DType::BF16, act, "u");
  uint32_t dy = b.input(DType::BF16, act, "dy"), x = b.input(DType::BF16, {kRows, kIn}, "x");
  uint32_t lr = b.input(DType::F32, {}, "lr"), step = b.input(DType::F32, {}, "step");
  struct Weight {
    uint32_t p, grad, m, v, copy;
  } ws[2];
  for (Weight &k : ws) {
    k.p = b.input(DType::F32, w, "p");
    k.grad = b.input(DType::F32, w, "grad");
    k.m = b.input(DType::F32, w, "m");
    k.v = b.input(DType::F32, w, "v");
  }
  uint32_t dx = b.output(DType::F32, {kRows, kIn}, "dx");
  uint32_t dwg = b.output(DType::BF16, w, "dWg"), dwu = b.output(DType::BF16, w, "dWu");
  uint32_t dg, du, grads = 0, copies = 0;
  if (joined) {
    grads = b.temp(DType::BF16, {kRows, 2 * kWidth});
    copies = b.temp(DType::BF16, {kIn, 2 * kWidth});
  }
  // A column block at `col` of `base` (or a temp of its own, apart).
  auto block = [&](uint32_t base, const Shape &s, int64_t col) {
    uint32_t id = b.temp(DType::BF16, s);
    if (joined) {
      b.p.buffers[id].offset = b.p.buffers[base].offset + uint64_t(col) * 2;
      b.p.buffers[id].rowPitch = 2 * kWidth;
      b.p.views.push_back({id, base, col});
    }
    return id;
  };
  dg = block(grads, act, 0);
  du = block(grads, act, kWidth);
  ws[0].copy = block(copies, w, 0);
  ws[1].copy = block(copies, w, kWidth);
  b.instr(OpCode::SwiGluGrad, {g, u, dy}, {dg, du});
  if (joined) {
    b.instr(OpCode::MatMul, {grads, copies}, {dx}, {0, 1});
  } else {
    uint32_t part = b.temp(DType::F32, {kRows, kIn});
    b.instr(OpCode::MatMul, {dg, ws[0].copy}, {part}, {0, 1});
    b.instr(OpCode::MatMul, {du, ws[1].copy, part}, {dx}, {0, 1});
  }
  b.instr(OpCode::MatMul, {x, dg}, {dwg}, {1, 0});
  b.instr(OpCode::MatMul, {x, du}, {dwu}, {1, 0});
  for (Weight &k : ws) {
    uint32_t po = b.output(DType::F32, w, "p'"), mo = b.output(DType::F32, w, "m'");
    uint32_t vo = b.output(DType::F32, w, "v'");
    b.instr(OpCode::AdamW, {k.p, k.grad, k.m, k.v, lr, step}, {po, mo, vo, k.copy}, {},
            {0.9, 0.95, 1e-8, 0.1});
    for (auto [o, i] : {std::pair{po, k.p}, std::pair{mo, k.m}, std::pair{vo, k.v}}) {
      b.p.buffers[o].offset = b.p.buffers[i].offset;
      b.p.updates.push_back({o, i});
    }
  }
  return b.p;
}

std::vector<Bytes> siblingInputs(Rng &rng) {
  const int64_t a = kRows * kWidth, w = kIn * kWidth;
  std::vector<Bytes> in = {bf16StorageBytes(rng.uniform(a, -3, 3)), bf16StorageBytes(rng.uniform(a)),
                           bf16StorageBytes(rng.uniform(a)), bf16StorageBytes(rng.uniform(kRows * kIn)),
                           toBytes(std::vector<float>{1e-2f}), toBytes(std::vector<float>{2.f})};
  for (int k = 0; k < 2; ++k) {
    in.push_back(toBytes(rng.uniform(w)));
    in.push_back(toBytes(rng.uniform(w, -5, 5)));
    in.push_back(toBytes(rng.uniform(w, -1e-2, 1e-2)));
    in.push_back(toBytes(rng.uniform(w, 0, 1e-3)));
  }
  return in;
}

/// The outputs of two runs on one executor (the state stays resident: the
/// second run's GEMM reads the copies the first run's AdamWs stored).
std::vector<std::vector<Bytes>> twoRuns(const Program &p, const std::vector<Bytes> &inputs,
                                        const std::string &backend) {
  std::vector<std::vector<Bytes>> out;
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(p), backend, 2, err);
  EXPECT_TRUE(exec) << err;
  if (!exec)
    return out;
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(exec->setInput(i, inputs[i].data(), inputs[i].size(), err)) << err;
  for (int run = 0; run < 2; ++run) {
    EXPECT_TRUE(exec->run(err)) << err;
    std::vector<Bytes> outs;
    for (size_t k = 0; k < p.outputs.size(); ++k) {
      Bytes o(p.buffers[p.outputs[k]].bytes);
      EXPECT_TRUE(exec->getOutput(k, o.data(), o.size(), err)) << err;
      outs.push_back(o);
    }
    out.push_back(outs);
  }
  return out;
}

std::vector<float> widened(const Bytes &bf16) {
  std::vector<float> v(bf16.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits = uint32_t(bf16[2 * i]) << 16 | uint32_t(bf16[2 * i + 1]) << 24;
    std::memcpy(&v[i], &bits, 4);
  }
  return v;
}

/// Joined against apart: dx within f32 rounding of the other summation
/// order, dW within a bf16 ulp (bits on the CPU), the updates bit for bit.
void expectSameStep(const std::vector<std::vector<Bytes>> &got,
                    const std::vector<std::vector<Bytes>> &want, bool exactGemms) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t run = 0; run < got.size(); ++run)
    for (size_t k = 0; k < got[run].size(); ++k) {
      SCOPED_TRACE("run " + std::to_string(run) + ", output " + std::to_string(k));
      if (k == 0)
        EXPECT_TRUE(allClose(fromBytes<float>(got[run][k]), toDouble(fromBytes<float>(want[run][k])), 1e-5, 1e-6));
      else if (k < 3 && !exactGemms)
        EXPECT_TRUE(allClose(widened(got[run][k]), toDouble(widened(want[run][k])), 1e-2, 1e-3));
      else
        EXPECT_EQ(got[run][k], want[run][k]);
    }
}

TEST(ColumnBlocks, AJoinedSiblingStepIsTheStepApart) {
  Program joined = siblingStep(true), apart = siblingStep(false);
  ASSERT_EQ(joined.validate(), "");
  ASSERT_EQ(apart.validate(), "");
  Rng rng;
  std::vector<Bytes> inputs = siblingInputs(rng);
  expectSameStep(twoRuns(joined, inputs, "cpu"), twoRuns(apart, inputs, "cpu"), true);
}

TEST(ColumnBlocks, ValidateNamesWhatIsWrong) {
  auto refused = [](Program p, const std::string &what) {
    std::string e = p.validate();
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  Program p = siblingStep(true);
  // The gradient blocks: sibling columns of one pitch never overlap.
  uint32_t dg = p.instrs[0].out[0];
  {
    Program q = p; // a block that does not sit at its column
    q.buffers[dg].offset += 2;
    refused(q, "row pitch 16 and offset");
  }
  {
    Program q = p; // wider than its base leaves room for
    for (BufferView &v : q.views)
      if (v.view == dg) v.column = 9;
    refused(q, "is not rows of");
  }
  {
    Program q = p; // a kernel that takes no block
    q.instrs.push_back(Instr{OpCode::Cast, {dg}, {q.outputs[0]}, {}, {}});
    refused(q, "which is a column block, in a slot that takes none");
  }
  {
    Program q = p; // a pitch without a view
    q.buffers[q.outputs[0]].rowPitch = 16;
    refused(q, "has a row pitch but is no column block");
  }
}

TEST(ColumnBlocks, TheArtifactKeepsThem) {
  Program p = siblingStep(true);
  std::string file = ::testing::TempDir() + "column-blocks-" + std::to_string(getpid()) + ".loom";
  std::string err;
  ASSERT_TRUE(writeArtifact(p, file, err)) << err;
  Program q;
  ASSERT_TRUE(readArtifact(file, q, err)) << err;
  std::remove(file.c_str());
  ASSERT_EQ(q.views.size(), p.views.size());
  for (size_t v = 0; v < p.views.size(); ++v) {
    EXPECT_EQ(q.views[v].column, p.views[v].column);
    EXPECT_EQ(q.buffers[q.views[v].view].rowPitch, p.buffers[p.views[v].view].rowPitch);
  }
}

// The stores' row lookup (RowDivision.h) is floor(n / d) exactly: every
// column count a block might have from 1 to 2^16 and then some wide ones,
// at indices around each multiple near the ends of the range, and past
// 2^31 (the division).
TEST(ColumnBlocks, RowsByMultiplyAndShift) {
  std::vector<uint64_t> divisors;
  for (uint64_t d = 1; d <= (1u << 16); ++d) divisors.push_back(d);
  for (uint64_t d : {100000ull, 151936ull, 1000003ull, (1ull << 30) + 1, (1ull << 31) - 1})
    divisors.push_back(d);
  for (uint64_t d : divisors) {
    RowDivision r = rowDivision(d);
    for (int64_t base : {int64_t(0), int64_t(d) * 7, (int64_t(1) << 31) - int64_t(d) - 2,
                         int64_t(1) << 31, int64_t(1) << 40})
      for (int64_t n = std::max<int64_t>(0, base - 2); n < base + 3; ++n)
        ASSERT_EQ(divideRow(n, r), n / int64_t(d)) << n << " / " << d;
    ASSERT_EQ(divideRow((int64_t(1) << 31) - 1, r), ((int64_t(1) << 31) - 1) / int64_t(d)) << d;
  }
}

TEST(CudaBackend, ColumnBlocksJoinSiblingGemms) {
  REQUIRE_GPU();
  Program joined = siblingStep(true), apart = siblingStep(false);
  Rng rng;
  std::vector<Bytes> inputs = siblingInputs(rng);
  auto cpu = twoRuns(joined, inputs, "cpu");
  expectSameStep(twoRuns(joined, inputs, "cuda"), cpu, false);
  expectSameStep(twoRuns(apart, inputs, "cuda"), cpu, false);
}

} // namespace
} // namespace loom::rt::test
