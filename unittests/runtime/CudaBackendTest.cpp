//===- CudaBackendTest.cpp - Every CUDA kernel against the CPU reference --===//
//
// Part of loom, under the Apache License v2.0.
//
// Each test builds a small program, fills its inputs with fresh random
// values (RuntimeTestUtil's Rng: a new seed every run, printed on failure),
// runs it on the CPU backend (the reference) and on the CUDA backend, and
// compares every output. Both executors start from a 0xff-filled arena, so
// an output element a kernel does not write is NaN, and NaN never passes.
// Shapes are odd on purpose (not multiples of 32) to reach the kernels'
// edges. Without a usable GPU every test reports SKIPPED, never passed.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include "loom/runtime/GemmStaging.h"
#include "loom/runtime/GemmTuning.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#ifdef LOOM_HAVE_CUDA
#include "cuda/CudaExecutor.h"
#endif

namespace loom::rt::test {
namespace {

using F = std::vector<float>;

/// How two bf16 outputs differ: the count, and the first few elements
/// with the f32 inputs of the same size at the same index.
std::string bf16Mismatches(const Program &p, const std::vector<Bytes> &inputs,
                           const Bytes &want, const Bytes &got) {
  auto at = [](const Bytes &b, size_t i) {
    uint16_t h;
    std::memcpy(&h, b.data() + 2 * i, 2);
    return h;
  };
  auto widen = [](uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  size_t n = want.size() / 2, count = 0;
  std::string out;
  char line[160];
  for (size_t i = 0; i < n && got.size() == want.size(); ++i) {
    if (at(want, i) == at(got, i)) continue;
    if (++count > 6) continue;
    std::snprintf(line, sizeof line, "\n  [%zu] cpu %a gpu %a; inputs", i, widen(at(want, i)),
                  widen(at(got, i)));
    out += line;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (p.buffers[p.inputs[k]].dtype != DType::F32 || inputs[k].size() != 4 * n) continue;
      float v;
      std::memcpy(&v, inputs[k].data() + 4 * i, 4);
      std::snprintf(line, sizeof line, " %a", v);
      out += line;
    }
  }
  return std::to_string(count) + " of " + std::to_string(n) + " bf16 elements differ" + out;
}

/// Runs `p` on both backends and compares every output: f32 within
/// rtol/atol, f64 likewise, everything else (ints, bool, bf16 bits) exactly.
void expectSameOnGpu(const Program &p, const std::vector<Bytes> &inputs, double rtol = 1e-5,
                     double atol = 1e-6) {
  RunResult cpu = runProgram(p, inputs, 2, "cpu");
  ASSERT_TRUE(cpu.ok) << "cpu: " << cpu.err;
  RunResult gpu = runProgram(p, inputs, 0, "cuda");
  ASSERT_TRUE(gpu.ok) << "cuda: " << gpu.err;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const BufferDesc &b = p.buffers[p.outputs[k]];
    SCOPED_TRACE("output " + std::to_string(k) + " (" + b.name + ")");
    if (b.dtype == DType::F32) {
      F want = cpu.out<float>(k);
      EXPECT_TRUE(allClose(gpu.out<float>(k), toDouble(want), rtol, atol));
    } else if (b.dtype == DType::F64) {
      auto want = cpu.out<double>(k), got = gpu.out<double>(k);
      EXPECT_TRUE(allClose(F(got.begin(), got.end()), want, rtol, atol));
    } else if (b.dtype == DType::BF16 && gpu.outputs[k] != cpu.outputs[k]) {
      ADD_FAILURE() << bf16Mismatches(p, inputs, cpu.outputs[k], gpu.outputs[k]);
    } else {
      EXPECT_EQ(gpu.outputs[k], cpu.outputs[k]);
    }
  }
}

/// A one-instruction program over fresh f32 inputs of the given shapes.
struct OneOp {
  ProgramBuilder b;
  std::vector<Bytes> inputs;
  std::vector<uint32_t> in;

  uint32_t f32(Rng &rng, const Shape &s, double lo = -1, double hi = 1) {
    uint32_t id = b.input(DType::F32, s);
    inputs.push_back(toBytes(rng.uniform(numel(s), lo, hi)));
    in.push_back(id);
    return id;
  }
  uint32_t ids(Rng &rng, const Shape &s, int64_t lo, int64_t hi) {
    uint32_t id = b.input(DType::I64, s);
    inputs.push_back(toBytes(rng.ints(numel(s), lo, hi)));
    in.push_back(id);
    return id;
  }
  uint32_t scalar(float v) {
    uint32_t id = b.input(DType::F32, {});
    inputs.push_back(toBytes(F{v}));
    in.push_back(id);
    return id;
  }
};

TEST(CudaBackend, BinaryOpsBroadcast) {
  REQUIRE_GPU();
  Rng rng;
  for (OpCode op : {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div, OpCode::Max, OpCode::Min,
                    OpCode::Pow}) {
    SCOPED_TRACE(opcodeName(op));
    OneOp t;
    bool pow = op == OpCode::Pow;
    uint32_t a = t.f32(rng, {3, 5, 37}, pow ? 0.1 : -2, 2), b = t.f32(rng, {5, 1}, 0.5, 2);
    t.b.instr(op, {a, b}, {t.b.output(DType::F32, {3, 5, 37})});
    expectSameOnGpu(t.b.p, t.inputs);
  }
  OneOp t; // integers
  uint32_t a = t.ids(rng, {4, 7}, -100, 100), b = t.ids(rng, {7}, -5, 5);
  t.b.instr(OpCode::Mul, {a, b}, {t.b.output(DType::I64, {4, 7})});
  expectSameOnGpu(t.b.p, t.inputs);
}

TEST(CudaBackend, UnaryOps) {
  REQUIRE_GPU();
  Rng rng;
  for (OpCode op : {OpCode::Neg, OpCode::Sqrt, OpCode::Rsqrt, OpCode::Reciprocal, OpCode::Exp,
                    OpCode::Tanh, OpCode::Sigmoid, OpCode::Silu, OpCode::GeluTanh,
                    OpCode::GeluErf, OpCode::Cos, OpCode::Sin, OpCode::Log, OpCode::Relu,
                    OpCode::Erf, OpCode::Softplus}) {
    SCOPED_TRACE(opcodeName(op));
    OneOp t;
    uint32_t x = t.f32(rng, {1000, 3}, 0.05, 4);
    t.b.instr(op, {x}, {t.b.output(DType::F32, {1000, 3})});
    expectSameOnGpu(t.b.p, t.inputs, 1e-6, 1e-7);
  }
}

TEST(CudaBackend, WhereAndCast) {
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  uint32_t cond = t.b.input(DType::Bool, {4, 1, 9});
  auto bits = rng.ints(36, 0, 1);
  t.inputs.push_back(Bytes(bits.begin(), bits.end()));
  uint32_t a = t.f32(rng, {4, 6, 9}), b = t.f32(rng, {9});
  t.b.instr(OpCode::Where, {cond, a, b}, {t.b.output(DType::F32, {4, 6, 9})});
  // f32 -> bf16 -> f32 rounding, f32 -> i64 truncation, i64 -> f32.
  uint32_t bf = t.b.temp(DType::BF16, {4, 6, 9});
  t.b.instr(OpCode::Cast, {a}, {bf});
  t.b.instr(OpCode::Cast, {bf}, {t.b.output(DType::F32, {4, 6, 9})});
  uint32_t big = t.f32(rng, {50}, -1e4, 1e4);
  uint32_t asInt = t.b.output(DType::I64, {50});
  t.b.instr(OpCode::Cast, {big}, {asInt});
  uint32_t ints = t.ids(rng, {50}, -(int64_t(1) << 40), int64_t(1) << 40);
  t.b.instr(OpCode::Cast, {ints}, {t.b.output(DType::F32, {50})});
  expectSameOnGpu(t.b.p, t.inputs, 0, 0);
}

struct MatMulCase {
  Shape a, b, out;
  bool ta, tb;
};

TEST(CudaBackend, MatMulLayoutsAndBatches) {
  REQUIRE_GPU();
  Rng rng;
  const MatMulCase cases[] = {
      {{4, 9, 33}, {33, 17}, {4, 9, 17}, false, false},    // batch folds into M
      {{4, 9, 33}, {17, 33}, {4, 9, 17}, false, true},     // linear layer, W^T
      {{33, 9}, {33, 17}, {9, 17}, true, false},           // weight gradient x^T dy
      {{2, 3, 5, 7}, {2, 3, 7, 4}, {2, 3, 5, 4}, false, false}, // strided batch
      {{2, 3, 7, 5}, {2, 3, 4, 7}, {2, 3, 5, 4}, true, true},
      {{5, 7}, {3, 7, 4}, {3, 5, 4}, false, false},        // broadcast A: stride 0
      {{2, 1, 5, 7}, {1, 3, 7, 4}, {2, 3, 5, 4}, false, false}, // one call per batch
      {{3, 0}, {0, 4}, {3, 4}, false, false},              // K = 0: zeros
  };
  for (const MatMulCase &c : cases) {
    OneOp t;
    uint32_t a = t.f32(rng, c.a), b = t.f32(rng, c.b);
    t.b.instr(OpCode::MatMul, {a, b}, {t.b.output(DType::F32, c.out)}, {c.ta, c.tb});
    ASSERT_EQ(t.b.p.validate(), "");
    expectSameOnGpu(t.b.p, t.inputs, 1e-5, 1e-5);
  }
}

/// A bf16 input of `shape` holding random values (their f32 bits cut to 16).
uint32_t bf16Input(ProgramBuilder &b, std::vector<Bytes> &inputs, Rng &rng, const Shape &shape) {
  uint32_t id = b.input(DType::BF16, shape);
  F v = rng.uniform(numel(shape));
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    h[i] = uint16_t(u >> 16);
  }
  inputs.push_back(toBytes(h));
  return id;
}

TEST(CudaBackend, Bf16GemmsWithF32Results) {
  // Autocast's GEMMs: bf16 operands on the tensor cores, the f32
  // accumulator as the result (gradient sums), as on the CPU reference.
  REQUIRE_GPU();
  Rng rng;
  for (const MatMulCase &c : {MatMulCase{{4, 9, 48}, {48, 40}, {4, 9, 40}, false, false},
                              MatMulCase{{64, 24}, {64, 40}, {24, 40}, true, false},
                              MatMulCase{{2, 3, 16, 32}, {2, 3, 24, 32}, {2, 3, 16, 24}, false, true}}) {
    ProgramBuilder b;
    std::vector<Bytes> inputs;
    uint32_t a = bf16Input(b, inputs, rng, c.a), w = bf16Input(b, inputs, rng, c.b);
    b.instr(OpCode::MatMul, {a, w}, {b.output(DType::F32, c.out)}, {c.ta, c.tb});
    ASSERT_EQ(b.p.validate(), "");
    expectSameOnGpu(b.p, inputs, 1e-5, 1e-5);
  }
}

TEST(CudaBackend, GemmTuningKeepsTheChoiceAcrossExecutors) {
  // The first executor to plan a product times cuBLASLt's candidates and
  // records the winner (GemmTuning.h); every later one takes it from the
  // table, so two runs of one program give the same bits, and the product
  // is in the file for the next process.
  REQUIRE_GPU();
  Rng rng;
  ProgramBuilder b;
  std::vector<Bytes> inputs;
  uint32_t a = bf16Input(b, inputs, rng, {1024, 1024}), w = bf16Input(b, inputs, rng, {1024, 1024});
  b.instr(OpCode::MatMul, {a, w}, {b.output(DType::F32, {1024, 1024})}, {false, true});
  ASSERT_EQ(b.p.validate(), "");
  RunResult first = runProgram(b.p, inputs, 0, "cuda");
  ASSERT_TRUE(first.ok) << first.err;
  RunResult second = runProgram(b.p, inputs, 0, "cuda");
  ASSERT_TRUE(second.ok) << second.err;
  EXPECT_EQ(first.outputs, second.outputs);
  std::string path = GemmTuningTable::defaultPath(), err;
  if (path.empty())
    GTEST_SKIP() << "LOOM_GEMM_TUNING=0: nothing is timed or kept";
  GemmTuningTable t;
  ASSERT_TRUE(t.load(path, err)) << err;
  // The key names the product as cuBLASLt sees it: C^T [n, m] = ..., so
  // m x n x k of the row-major product, with our B transposed.
  std::ifstream in(path);
  std::string line;
  bool found = false;
  while (std::getline(in, line)) found |= line.find("|1024x1024x1024tB|") != std::string::npos;
  EXPECT_TRUE(found) << "no entry for the 1024^3 product in " << path;
}

TEST(CudaBackend, Bf16GemmsWithABiasEpilogue) {
  // addmm on the tensor cores: the bias (bf16, over N) goes into cuBLASLt's
  // epilogue, added to the f32 accumulator before the one rounding, as the
  // CPU reference adds it. Linear layers (batch folded into M, W^T), a
  // strided batch and one call per batch.
  REQUIRE_GPU();
  Rng rng;
  for (const MatMulCase &c : {MatMulCase{{4, 9, 48}, {40, 48}, {4, 9, 40}, false, true},
                              MatMulCase{{4, 9, 48}, {48, 40}, {4, 9, 40}, false, false},
                              MatMulCase{{2, 3, 16, 32}, {2, 3, 32, 24}, {2, 3, 16, 24}, false, false},
                              MatMulCase{{2, 1, 5, 8}, {1, 3, 8, 16}, {2, 3, 5, 16}, false, false}}) {
    ProgramBuilder b;
    std::vector<Bytes> inputs;
    uint32_t a = bf16Input(b, inputs, rng, c.a), w = bf16Input(b, inputs, rng, c.b);
    uint32_t bias = bf16Input(b, inputs, rng, {c.out.back()});
    uint32_t y = b.temp(DType::BF16, c.out);
    b.instr(OpCode::MatMul, {a, w, bias}, {y}, {c.ta, c.tb});
    b.instr(OpCode::Cast, {y}, {b.output(DType::F32, c.out)});
    ASSERT_EQ(b.p.validate(), "");
    // Compared widened: one bf16 step (2^-8 relative) apart where the two
    // f32 sums, accumulated in different orders, round to neighbours.
    expectSameOnGpu(b.p, inputs, 1e-2, 1e-2);
  }
}

TEST(CudaBackend, WeightGradientGemmsSumBsColumns) {
  // A bias's gradient from its weight-gradient GEMM (matMulSumsB, codegen's
  // foldBiasGradients): dW = x^T dy and the column sums of dy, by
  // columnSumsBf16 (its packed two-pass form, and its simple form for N =
  // 4001) and, with LOOM_GEMM_BIAS_GRAD_EPILOGUE=1, in cuBLASLt's BGRADA
  // epilogue; against the CPU's sums (a double sum, rounded to f32, then
  // to bf16). K = 512 and 8192 token rows, N from 40 to 4001 (staged by
  // GemmStaging: the kernel either way).
  REQUIRE_GPU();
  Rng rng;
  for (const char *epilogue : {"0", "1"})
    for (const MatMulCase &c : {MatMulCase{{512, 48}, {512, 40}, {48, 40}, true, false},
                                MatMulCase{{8192, 64}, {8192, 1280}, {64, 1280}, true, false},
                                MatMulCase{{512, 264}, {512, 4001}, {264, 4001}, true, false}}) {
      SCOPED_TRACE(std::string("epilogue ") + epilogue + ", N " + std::to_string(c.out.back()));
      setenv("LOOM_GEMM_BIAS_GRAD_EPILOGUE", epilogue, 1);
      ProgramBuilder b;
      std::vector<Bytes> inputs;
      uint32_t x = bf16Input(b, inputs, rng, c.a), dy = bf16Input(b, inputs, rng, c.b);
      uint32_t dw = b.temp(DType::BF16, c.out), db = b.temp(DType::BF16, {1, c.out.back()});
      b.instr(OpCode::MatMul, {x, dy}, {dw, db}, {1, 0, 1});
      b.instr(OpCode::Cast, {dw}, {b.output(DType::F32, c.out)});
      b.instr(OpCode::Cast, {db}, {b.output(DType::F32, {1, c.out.back()})});
      ASSERT_EQ(b.p.validate(), "");
      ASSERT_TRUE(matMulSumsB(b.p.instrs[0]));
      // Widened: a bf16 step (2^-8 relative) apart where two f32 sums in
      // different orders round to neighbours; sums of up to 8192 terms of
      // either sign, so an absolute slack too.
      expectSameOnGpu(b.p, inputs, 1e-2, 5e-2);
    }
  unsetenv("LOOM_GEMM_BIAS_GRAD_EPILOGUE");
}

TEST(CudaBackend, GemmsWithAnAddend) {
  // A gradient sum in the GEMM (beta = 1, C the addend laid out as D):
  // bf16 operands with an f32 result and f32 products, against the CPU's
  // MatMul then Add. A linear layer's input gradient (dy W), a strided
  // batch, one call per batch, and a staged product (N = 4001 is not a
  // whole number of 16-byte words of bf16): the addend is staged in place.
  REQUIRE_GPU();
  Rng rng;
  for (DType in : {DType::BF16, DType::F32})
    for (const MatMulCase &c : {MatMulCase{{4, 9, 40}, {48, 40}, {4, 9, 48}, false, true},
                                MatMulCase{{2, 3, 16, 32}, {2, 3, 32, 24}, {2, 3, 16, 24}, false, false},
                                MatMulCase{{2, 1, 5, 8}, {1, 3, 8, 16}, {2, 3, 5, 16}, false, false},
                                MatMulCase{{1024, 264}, {264, 4001}, {1024, 4001}, false, false}}) {
      SCOPED_TRACE(std::string(dtypeName(in)) + " out " + std::to_string(numel(c.out)));
      ProgramBuilder b;
      std::vector<Bytes> inputs;
      uint32_t a, w;
      if (in == DType::BF16) {
        a = bf16Input(b, inputs, rng, c.a), w = bf16Input(b, inputs, rng, c.b);
      } else {
        a = b.input(DType::F32, c.a), w = b.input(DType::F32, c.b);
        inputs.push_back(toBytes(rng.uniform(numel(c.a))));
        inputs.push_back(toBytes(rng.uniform(numel(c.b))));
      }
      uint32_t x = b.input(DType::F32, c.out);
      inputs.push_back(toBytes(rng.uniform(numel(c.out))));
      b.instr(OpCode::MatMul, {a, w, x}, {b.output(DType::F32, c.out)}, {c.ta, c.tb});
      ASSERT_EQ(b.p.validate(), "");
      ASSERT_TRUE(matMulAccumulates(b.p, b.p.instrs.back()));
      if (c.out.back() == 4001 && in == DType::BF16)
        ASSERT_TRUE(planGemmStaging(b.p, b.p.instrs.back()).any());
      // f32 sums of up to 264 products in another order, plus the addend.
      expectSameOnGpu(b.p, inputs, 1e-4, 1e-4);
    }
}

TEST(CudaBackend, OddSizedProductsRunPadded) {
  // Products large enough for GemmStaging with a dim that is not a whole
  // number of 16-byte words (4001): GPT-2's logits layout (h W^T, f32 and
  // bf16 results), its input gradient (dlogits W, K padded with zeros) and
  // weight gradient (dlogits^T h, M padded), an untransposed weight, and a
  // biased product with an odd K. Staging must leave the CPU's results.
  REQUIRE_GPU();
  Rng rng;
  struct Case { MatMulCase mm; DType out; bool bias; };
  for (const Case &c :
       {Case{{{2, 512, 264}, {4001, 264}, {2, 512, 4001}, false, true}, DType::F32, false},
        Case{{{2, 512, 264}, {4001, 264}, {2, 512, 4001}, false, true}, DType::BF16, false},
        Case{{{1024, 4001}, {4001, 264}, {1024, 264}, false, false}, DType::F32, false},
        Case{{{1024, 4001}, {1024, 264}, {4001, 264}, true, false}, DType::F32, false},
        Case{{{1024, 264}, {264, 4001}, {1024, 4001}, false, false}, DType::F32, false},
        Case{{{1024, 4001}, {4001, 264}, {1024, 264}, false, false}, DType::BF16, true}}) {
    ProgramBuilder b;
    std::vector<Bytes> inputs;
    uint32_t a = bf16Input(b, inputs, rng, c.mm.a), w = bf16Input(b, inputs, rng, c.mm.b);
    std::vector<uint32_t> ins{a, w};
    if (c.bias) ins.push_back(bf16Input(b, inputs, rng, {c.mm.out.back()}));
    uint32_t y = c.out == DType::F32 ? b.output(DType::F32, c.mm.out) : b.temp(DType::BF16, c.mm.out);
    b.instr(OpCode::MatMul, ins, {y}, {c.mm.ta, c.mm.tb});
    ASSERT_TRUE(planGemmStaging(b.p, b.p.instrs.back()).any());
    if (c.out == DType::BF16)
      b.instr(OpCode::Cast, {y}, {b.output(DType::F32, c.mm.out)});
    ASSERT_EQ(b.p.validate(), "");
    // Sums of up to 4001 products in another order: f32 results agree to
    // ~1e-5 of the terms' total magnitude (~1e3 here; a result near zero
    // keeps that absolute error: 1.6e-4 seen on an H100); bf16 results to
    // one rounding step where they straddle one.
    bool f32 = c.out == DType::F32;
    expectSameOnGpu(b.p, inputs, f32 ? 1e-4 : 1e-2, f32 ? 1e-3 : 1e-2);
  }
}

TEST(CudaBackend, ReduceSoftmaxNorms) {
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  uint32_t x = t.f32(rng, {3, 7, 45}), w = t.f32(rng, {45}, 0.5, 1.5), bias = t.f32(rng, {45});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {3, 1, 1})}, {0, 1, 2});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {7})}, {1, 0, 2});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {3, 7, 1})}, {2, 2});
  t.b.instr(OpCode::Softmax, {x}, {t.b.output(DType::F32, {3, 7, 45})}, {2});
  t.b.instr(OpCode::Softmax, {x}, {t.b.output(DType::F32, {3, 7, 45})}, {1});
  t.b.instr(OpCode::RmsNorm, {x, w}, {t.b.output(DType::F32, {3, 7, 45})}, {}, {1e-6});
  t.b.instr(OpCode::LayerNorm, {x, w, bias}, {t.b.output(DType::F32, {3, 7, 45})}, {}, {1e-5});
  t.b.instr(OpCode::LayerNorm, {x, w}, {t.b.output(DType::F32, {3, 7, 45})}, {}, {1e-5});
  ASSERT_EQ(t.b.p.validate(), "");
  expectSameOnGpu(t.b.p, t.inputs);
}

TEST(CudaBackend, LargeReductionsAreSliced) {
  // Few outputs, many elements each (a gradient norm's sum of squares):
  // the sliced two-pass path, compared against the CPU.
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  // Sums and means over every axis take the whole-tensor kernel (16,384
  // elements a slice; 900,003 leave a partial pack), one slice or many.
  uint32_t x = t.f32(rng, {3, 300001}), small = t.f32(rng, {5, 7});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {})}, {0, 0, 1});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {})}, {1, 0, 1});
  t.b.instr(OpCode::Reduce, {small}, {t.b.output(DType::F32, {})}, {1, 0, 1});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {3, 1})}, {1, 1});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {1, 300001})}, {2, 0});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {})}, {2, 0, 1});
  ASSERT_EQ(t.b.p.validate(), "");
  expectSameOnGpu(t.b.p, t.inputs, 1e-5, 1e-5);
}

TEST(CudaBackend, LeadingAxisSumsAreColumnSums) {
  // Bias gradients: sums over the leading axes of [tokens, N] (the column
  // sums the norms' weight gradients use, 16 rows a chunk here: 300 rows leave a
  // partial chunk), against the CPU; a mean and few columns keep Reduce's
  // own kernel.
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  uint32_t x = t.f32(rng, {300, 130}), y = t.f32(rng, {2, 150, 96}), z = t.f32(rng, {500, 5});
  t.b.instr(OpCode::Reduce, {x}, {t.b.output(DType::F32, {130})}, {0, 0});
  t.b.instr(OpCode::Reduce, {y}, {t.b.output(DType::F32, {1, 1, 96})}, {0, 0, 1});
  t.b.instr(OpCode::Reduce, {y}, {t.b.output(DType::F32, {96})}, {1, 0, 1});
  t.b.instr(OpCode::Reduce, {z}, {t.b.output(DType::F32, {5})}, {0, 0});
  ASSERT_EQ(t.b.p.validate(), "");
  expectSameOnGpu(t.b.p, t.inputs, 1e-6, 1e-6);
}

// The gradient norm's fused sum of squares: against the CPU, and bit for
// bit against the Mul + Reduce program it replaces on the GPU (the kernel
// keeps Reduce's summation order), run after run. Sizes: one slice, several
// slices (more than 64K elements), a scalar and an empty tensor.
TEST(CudaBackend, SumSquaresEqualsSquareThenReduce) {
  REQUIRE_GPU();
  Rng rng;
  for (const Shape &s : std::vector<Shape>{{3, 7, 45}, {3, 300001}, {}, {0, 5}}) {
    SCOPED_TRACE(std::to_string(numel(s)) + " elements");
    Bytes x = toBytes(rng.uniform(numel(s), -3, 3));
    ProgramBuilder f;
    f.instr(OpCode::SumSquares, {f.input(DType::F32, s)}, {f.output(DType::F32, {})});
    ASSERT_EQ(f.p.validate(), "");
    expectSameOnGpu(f.p, {x}, 1e-6, 1e-6);
    RunResult fused = runProgram(f.p, {x}, 0, "cuda"), again = runProgram(f.p, {x}, 0, "cuda");
    RunResult unfused = runProgram(sumSquaresUnfused(s), {x}, 0, "cuda");
    ASSERT_TRUE(fused.ok && again.ok && unfused.ok) << fused.err << again.err << unfused.err;
    EXPECT_EQ(fused.outputs, unfused.outputs);
    EXPECT_EQ(fused.outputs, again.outputs);
  }
  // Each square is rounded to f32 before it is added, as the Mul it
  // replaces stored it (RuntimeTestUtil.h says why these inputs tell).
  std::vector<float> xv;
  float rounded;
  ASSERT_TRUE(squaresThatRoundDifferently(rng, xv, rounded));
  ProgramBuilder f;
  f.instr(OpCode::SumSquares, {f.input(DType::F32, {16})}, {f.output(DType::F32, {})});
  RunResult r = runProgram(f.p, {toBytes(xv)}, 0, "cuda");
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out<float>(), std::vector<float>{rounded});
}

// f32 -> bf16 rounding (cvt.rn, with NaNs kept as the CPU keeps them) on
// the values where rounding schemes differ: NaNs with payloads and signs,
// infinities, zeros, subnormals and ties among them, ties to even both
// ways, overflow to infinity. Both kernel forms: 24 elements take the packed
// path (pairs converted together), 23 the element-wise one.
TEST(CudaBackend, Bf16RoundingEqualsTheCpusOnEdgeValues) {
  REQUIRE_GPU();
  const std::vector<uint32_t> edge = {
      0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fa12345u, 0x7f800000u, 0xff800000u,
      0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00008000u,
      0x00018000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f7f7fffu, 0xff7fffffu,
      0x3f800001u, 0xbf80ffffu, 0x00ff8000u, 0x4b7f8000u, 0xc0008000u, 0x7f7f8000u};
  for (size_t n : {edge.size(), edge.size() - 1}) {
    SCOPED_TRACE(std::to_string(n) + " elements");
    std::vector<float> v(n);
    std::memcpy(v.data(), edge.data(), n * 4);
    ProgramBuilder b;
    b.instr(OpCode::Cast, {b.input(DType::F32, {int64_t(n)})}, {b.output(DType::BF16, {int64_t(n)})});
    ASSERT_EQ(b.p.validate(), "");
    RunResult cpu = runProgram(b.p, {toBytes(v)}), gpu = runProgram(b.p, {toBytes(v)}, 0, "cuda");
    ASSERT_TRUE(cpu.ok && gpu.ok) << cpu.err << gpu.err;
    EXPECT_EQ(gpu.outputs, cpu.outputs);
  }
}

// The gradient norm's sums in one instruction: bit for bit the SumSquares
// and Adds it replaces on the GPU, run after run, and against the CPU.
// 70 tensors (three launch groups of at most 32), bf16 storage and f32,
// one slice and many (a [3, 300001] tensor has 55), scalars and empties.
TEST(CudaBackend, GlobalSumSquaresEqualsTheChainOfSums) {
  REQUIRE_GPU();
  Rng rng;
  std::vector<Shape> shapes;
  for (int k = 0; k < 70; ++k)
    shapes.push_back(k % 23 == 5 ? Shape{3, 300001} : k % 17 == 3 ? Shape{} : k % 31 == 7 ? Shape{0, 5}
                                                                   : Shape{k + 1, 33});
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    std::vector<Bytes> inputs;
    for (size_t k = 0; k < shapes.size(); ++k) {
      std::vector<float> v = rng.uniform(numel(shapes[k]), -3, 3);
      inputs.push_back(dtype == DType::BF16 ? bf16StorageBytes(v) : toBytes(v));
    }
    Program fused = globalSumSquaresProgram(shapes, dtype, false);
    Program chained = globalSumSquaresProgram(shapes, dtype, true);
    ASSERT_EQ(fused.validate(), "");
    expectSameOnGpu(fused, inputs, 1e-6, 1e-6);
    RunResult f = runProgram(fused, inputs, 0, "cuda"), again = runProgram(fused, inputs, 0, "cuda");
    RunResult c = runProgram(chained, inputs, 0, "cuda");
    ASSERT_TRUE(f.ok && again.ok && c.ok) << f.err << again.err << c.err;
    EXPECT_EQ(f.outputs, c.outputs);
    EXPECT_EQ(f.outputs, again.outputs);
  }
}

// The norms' gradients with an addend (loom-fuse-norm-grad-accumulate) on
// every row path (a warp a row, two and four packs a thread in registers,
// pass by pass, one element at a time): against the CPU, and bit for bit
// against the gradient and an Add on the GPU.
TEST(CudaBackend, NormGradAddendIsTheAddAfter) {
  REQUIRE_GPU();
  Rng rng;
  for (bool layerNorm : {false, true})
    for (auto [rows, D] : {std::pair<int64_t, int64_t>{70, 128}, {70, 264}, {30, 3000},
                           {20, 4104}, {70, 300}, {4100, 16}})
      for (bool bf16 : {false, true}) {
        SCOPED_TRACE(std::string(layerNorm ? "layer_norm_grad " : "rms_norm_grad ") +
                     std::to_string(rows) + " rows of " + std::to_string(D) +
                     (bf16 ? ", bf16" : ""));
        auto f32 = [&](int64_t n, float lo, float hi) { return toBytes(rng.uniform(n, lo, hi)); };
        std::vector<float> g = rng.uniform(rows * D, -1, 1);
        std::vector<Bytes> inputs = {f32(rows * D, -2, 2), f32(D, 0.5, 1.5),
                                     bf16 ? bf16StorageBytes(g) : toBytes(g),
                                     f32(rows * D, -1e3, 1e3)};
        Program fused = normGradAddendProgram(layerNorm, rows, D, DType::F32, true, bf16);
        Program apart = normGradAddendProgram(layerNorm, rows, D, DType::F32, false, bf16);
        ASSERT_EQ(fused.validate(), "");
        expectSameOnGpu(fused, inputs, bf16 ? 1e-2 : 1e-5, bf16 ? 1e-2 : 1e-5);
        RunResult f = runProgram(fused, inputs, 0, "cuda"), a = runProgram(apart, inputs, 0, "cuda");
        ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
        EXPECT_EQ(f.outputs, a.outputs);
      }
}

// AddRmsNorm on the GPU: bit for bit Add then RmsNorm, on rows the
// registers kernel takes with the add inside (2,048 and 4,096: two and four
// packs a thread) and on the rows it hands to the two launches (128: the
// warp kernel; 8,200: too long for registers; 2,052: not packable), f32 and
// with a bf16 sublayer output and norm; and near the CPU.
TEST(CudaBackend, AddRmsNormIsTheAddThenTheNorm) {
  REQUIRE_GPU();
  Rng rng;
  for (int64_t D : {2048, 4096, 128, 8200, 2052})
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("D " + std::to_string(D) + (bf16 ? ", bf16" : ""));
      int64_t rows = 37;
      std::vector<float> x = rng.uniform(rows * D, -1, 1);
      std::vector<Bytes> inputs = {toBytes(rng.uniform(rows * D, -3, 3)),
                                   bf16 ? bf16StorageBytes(x) : toBytes(x),
                                   toBytes(rng.uniform(D, 0.5, 1.5))};
      Program fused = addRmsNormProgram(rows, D, DType::F32, true, bf16);
      Program apart = addRmsNormProgram(rows, D, DType::F32, false, bf16);
      ASSERT_EQ(fused.validate(), "");
      expectSameOnGpu(fused, inputs, bf16 ? 1e-2 : 1e-5, bf16 ? 1e-2 : 1e-5);
      RunResult f = runProgram(fused, inputs, 0, "cuda"), a = runProgram(apart, inputs, 0, "cuda");
      ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
      EXPECT_EQ(f.outputs, a.outputs);
    }
}

// A norm gradient storing dx's rounded copy and reading bf16 x: bit for
// bit the Casts it replaces, on the GPU, for rows the registers kernel
// takes (2,048 and 4,096: the copy stored with dx), eight elements a lane
// (128), a warp a row (40) and the row kernel (2,052; the last three store
// the copy with a Cast after the kernel); and against the CPU.
TEST(CudaBackend, NormGradCopyIsTheCast) {
  REQUIRE_GPU();
  Rng rng;
  for (bool layerNorm : {false, true})
    for (int64_t D : {2048, 4096, 128, 40, 2052})
      for (bool bf16X : {false, true}) {
        SCOPED_TRACE(std::string(layerNorm ? "layer_norm_grad" : "rms_norm_grad") + ", D " +
                     std::to_string(D) + (bf16X ? ", bf16 x" : ""));
        int64_t rows = 37;
        std::vector<Bytes> inputs = normGradCopyInputs(rng, rows, D, bf16X, 3);
        Program fused = normGradCopyProgram(rows, D, layerNorm, true, bf16X);
        Program apart = normGradCopyProgram(rows, D, layerNorm, false, bf16X);
        ASSERT_EQ(fused.validate(), "");
        expectSameOnGpu(fused, inputs, 1e-2, 1e-2);
        RunResult f = runProgram(fused, inputs, 0, "cuda"),
                  a = runProgram(apart, inputs, 0, "cuda");
        ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
        EXPECT_EQ(f.outputs, a.outputs);
      }
}

// The norm gradients of rows of 1,024 to 2,048 (hidden sizes) stream their
// rows through blocks of one chunk each, the weight gradients' partials
// added as dx is written (normGradStreamKernel): chunks of many rows
// (5,000 and 3,001 rows: as many chunks as blocks fit, rows left over in
// the last), a single row, with and without the residual stream's f32
// addend; against the CPU, and the same bits on a second run.
TEST(CudaBackend, StreamedNormGradsOverChunks) {
  REQUIRE_GPU();
  Rng rng;
  for (bool layerNorm : {false, true})
    for (auto [rows, D] : {std::pair<int64_t, int64_t>{5000, 1024}, {3001, 1536}, {1, 2048}})
      for (bool addend : {false, true}) {
        SCOPED_TRACE(std::string(layerNorm ? "layer_norm_grad" : "rms_norm_grad") + ", " +
                     std::to_string(rows) + " rows of " + std::to_string(D) +
                     (addend ? ", addend" : ""));
        std::vector<Bytes> inputs = normGradCopyInputs(rng, rows, D, false, 3);
        ProgramBuilder b;
        Shape s = {rows, D};
        std::vector<uint32_t> ins = {b.input(DType::F32, s), b.input(DType::F32, {D}),
                                     b.input(DType::BF16, s)};
        if (addend)
          ins.push_back(b.input(DType::F32, s));
        else
          inputs.pop_back();
        std::vector<uint32_t> outs = {b.output(DType::F32, s, "dx"),
                                      b.output(DType::F32, {D}, "dw")};
        if (layerNorm) outs.push_back(b.output(DType::F32, {D}, "db"));
        b.instr(layerNorm ? OpCode::LayerNormGrad : OpCode::RmsNormGrad, ins, outs, {}, {1e-5});
        ASSERT_EQ(b.p.validate(), "");
        expectSameOnGpu(b.p, inputs, 1e-5, 1e-5);
        RunResult one = runProgram(b.p, inputs, 0, "cuda"), two = runProgram(b.p, inputs, 0, "cuda");
        ASSERT_TRUE(one.ok && two.ok) << one.err << two.err;
        EXPECT_EQ(one.outputs, two.outputs);
      }
}

// A tied head's gradient as embedding_grad's addend: bit for bit the
// embedding gradient followed by the Add, on the GPU, with the table
// started eight elements a thread (D % 8 == 0) or one (D = 13), runs that
// cross the 64-position segments (300 positions over 5 ids: the join
// kernel adds those rows), an f32 or a bf16 addend; and against the CPU.
TEST(CudaBackend, EmbeddingGradAddendIsTheAddAfter) {
  REQUIRE_GPU();
  Rng rng;
  for (auto [V, D, N] : {std::array<int64_t, 3>{11, 24, 30}, {10, 13, 300}, {10, 256, 300}})
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(std::to_string(V) + " x " + std::to_string(D) + ", " + std::to_string(N) +
                   " positions" + (bf16 ? ", bf16 addend" : ""));
      std::vector<Bytes> inputs = embeddingGradAddendInputs(rng, V, D, N, DType::F32, bf16);
      Program fused = embeddingGradAddendProgram(V, D, N, DType::F32, true, bf16);
      Program apart = embeddingGradAddendProgram(V, D, N, DType::F32, false, bf16);
      ASSERT_EQ(fused.validate(), "");
      expectSameOnGpu(fused, inputs, 1e-5, 1e-5);
      RunResult f = runProgram(fused, inputs, 0, "cuda"), a = runProgram(apart, inputs, 0, "cuda");
      ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
      EXPECT_EQ(f.outputs, a.outputs);
    }
}

// Clipping inside AdamW: against the CPU, and bit for bit against the
// program that writes the clipped gradient with a Mul first.
TEST(CudaBackend, AdamWGradScaleEqualsClippingFirst) {
  REQUIRE_GPU();
  Rng rng;
  Shape s = {37, 45};
  OneOp f;
  uint32_t p = f.f32(rng, s), g = f.f32(rng, s, -5, 5), m = f.f32(rng, s, -1e-2, 1e-2);
  uint32_t v = f.f32(rng, s, 0, 1e-3), lr = f.scalar(3e-3f), step = f.scalar(4.f);
  uint32_t scale = f.scalar(0.3712f);
  f.b.instr(OpCode::AdamW, {p, g, m, v, lr, step, scale},
            {f.b.output(DType::F32, s), f.b.output(DType::F32, s), f.b.output(DType::F32, s)}, {},
            {0.9, 0.95, 1e-8, 0.1});
  ASSERT_EQ(f.b.p.validate(), "");
  expectSameOnGpu(f.b.p, f.inputs, 1e-5, 1e-6);

  ProgramBuilder u;
  std::vector<uint32_t> in;
  for (uint32_t id : f.in) in.push_back(u.input(DType::F32, f.b.p.buffers[id].shape));
  uint32_t clipped = u.temp(DType::F32, s);
  u.instr(OpCode::Mul, {in[1], in[6]}, {clipped});
  u.instr(OpCode::AdamW, {in[0], clipped, in[2], in[3], in[4], in[5]},
          {u.output(DType::F32, s), u.output(DType::F32, s), u.output(DType::F32, s)}, {},
          {0.9, 0.95, 1e-8, 0.1});
  ASSERT_EQ(u.p.validate(), "");
  RunResult fused = runProgram(f.b.p, f.inputs, 0, "cuda");
  RunResult unfused = runProgram(u.p, f.inputs, 0, "cuda");
  ASSERT_TRUE(fused.ok && unfused.ok) << fused.err << unfused.err;
  EXPECT_EQ(fused.outputs, unfused.outputs);
}

/// Element-wise kernels over bf16 and f32 storage, AdamW included, for n
/// elements (ElementwiseKernels.cu packs 8 per thread when n % 8 == 0).
Program elementwiseMix(int64_t n) {
  ProgramBuilder b;
  Shape s = {n};
  uint32_t a = b.input(DType::F32, s, "a"), x = b.input(DType::F32, s, "b");
  uint32_t p = b.input(DType::F32, s, "p"), m = b.input(DType::F32, s, "m");
  uint32_t v = b.input(DType::F32, s, "v"), lr = b.input(DType::F32, {}, "lr");
  uint32_t step = b.input(DType::F32, {}, "step");
  uint32_t abf = b.temp(DType::BF16, s), xbf = b.temp(DType::BF16, s);
  b.instr(OpCode::Cast, {a}, {abf});
  b.instr(OpCode::Cast, {x}, {xbf});
  b.instr(OpCode::Mul, {abf, xbf}, {b.output(DType::BF16, s, "mul")});
  b.instr(OpCode::Add, {a, xbf}, {b.output(DType::F32, s, "add")});
  b.instr(OpCode::Sub, {a, x}, {b.output(DType::F32, s, "sub")});
  b.instr(OpCode::Silu, {abf}, {b.output(DType::BF16, s, "silu")});
  b.instr(OpCode::Exp, {a}, {b.output(DType::F32, s, "exp")});
  b.instr(OpCode::ActivationGrad, {abf, xbf}, {b.output(DType::BF16, s, "silu_grad")}, {0});
  b.instr(OpCode::SwiGlu, {abf, xbf}, {b.output(DType::BF16, s, "swiglu")});
  b.instr(OpCode::SwiGluGrad, {abf, x, xbf},
          {b.output(DType::BF16, s, "swiglu_dgate"), b.output(DType::F32, s, "swiglu_dup")});
  b.instr(OpCode::Cast, {abf}, {b.output(DType::F32, s, "widened")});
  b.instr(OpCode::AdamW, {p, xbf, m, v, lr, step},
          {b.output(DType::F32, s, "p'"), b.output(DType::F32, s, "m'"),
           b.output(DType::F32, s, "v'")},
          {}, {0.9, 0.95, 1e-8, 0.1});
  return b.p;
}

TEST(CudaBackend, PackedElementwiseMatchesScalarPath) {
  REQUIRE_GPU();
  Rng rng;
  const int64_t n = 4096; // packed; n + 1 takes the one-element loops
  std::vector<F> vals = {rng.uniform(n + 1, -4, 4), rng.uniform(n + 1, -4, 4),
                         rng.uniform(n + 1), rng.uniform(n + 1, -1e-2, 1e-2),
                         rng.uniform(n + 1, 0, 1e-3)};
  auto inputs = [&](int64_t count) {
    std::vector<Bytes> in;
    for (const F &v : vals) in.push_back(toBytes(F(v.begin(), v.begin() + count)));
    in.push_back(toBytes(F{3e-3f}));
    in.push_back(toBytes(F{4.f}));
    return in;
  };
  Program packed = elementwiseMix(n), scalar = elementwiseMix(n + 1);
  ASSERT_EQ(packed.validate(), "");
  expectSameOnGpu(packed, inputs(n), 1e-6, 1e-7);
  RunResult a = runProgram(packed, inputs(n), 0, "cuda");
  RunResult b = runProgram(scalar, inputs(n + 1), 0, "cuda");
  ASSERT_TRUE(a.ok && b.ok) << a.err << b.err;
  for (size_t k = 0; k < a.outputs.size(); ++k) {
    SCOPED_TRACE(packed.buffers[packed.outputs[k]].name);
    ASSERT_EQ(b.outputs[k].size() * size_t(n), a.outputs[k].size() * size_t(n + 1));
    EXPECT_TRUE(std::equal(a.outputs[k].begin(), a.outputs[k].end(), b.outputs[k].begin()))
        << "packed and one-element kernels differ in output "
        << packed.buffers[packed.outputs[k]].name;
  }
}

TEST(CudaBackend, Bf16ActivationsKeepTheDoublePathsBits) {
  // GELU, SiLU and SwiGLU (and gradients) with bf16 outputs evaluate in f32
  // and take the double path only where the f32 estimate's error bound
  // straddles a bf16 rounding boundary (ElementwiseKernels.cu): the bits
  // must still be the CPU's, which evaluates in double. A million inputs
  // over [-12, 12] reach the boundaries thousands of times and the
  // derivatives' cancellations; n + 1 elements take the one-element kernels;
  // a second set spreads x, u and dy over many magnitudes (past the fast
  // paths' limits) with the edge cases first.
  REQUIRE_GPU();
  Rng rng;
  std::mt19937 gen(7);
  for (bool wide : {false, true})
    for (int64_t n : {int64_t(1) << 20, (int64_t(1) << 16) + 1}) {
      SCOPED_TRACE(std::to_string(n) + (wide ? " elements, wide magnitudes" : " elements"));
      OneOp t;
      Shape s = {n};
      uint32_t x, dy, u;
      if (wide) {
        for (auto [lo, hi] : {std::pair{-12.0, 4.3}, std::pair{-20.0, 20.0}, std::pair{-20.0, 20.0}}) {
          t.in.push_back(t.b.input(DType::F32, s));
          t.inputs.push_back(toBytes(logUniformWithEdges(gen, n, lo, hi)));
        }
        x = t.in[0], dy = t.in[1], u = t.in[2];
      } else {
        x = t.f32(rng, s, -12, 12), dy = t.f32(rng, s, -3, 3), u = t.f32(rng, s, -3, 3);
      }
      for (OpCode op : {OpCode::Silu, OpCode::GeluTanh, OpCode::GeluErf})
        t.b.instr(op, {x}, {t.b.output(DType::BF16, s)});
      for (int64_t kind : {0, 1, 2})
        t.b.instr(OpCode::ActivationGrad, {x, dy}, {t.b.output(DType::BF16, s)}, {kind});
      t.b.instr(OpCode::SwiGlu, {x, u}, {t.b.output(DType::BF16, s)});
      t.b.instr(OpCode::SwiGluGrad, {x, u, dy},
                {t.b.output(DType::BF16, s), t.b.output(DType::BF16, s)});
      ASSERT_EQ(t.b.p.validate(), "");
      expectSameOnGpu(t.b.p, t.inputs);
    }
}

TEST(CudaBackend, MovementOps) {
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  uint32_t x = t.f32(rng, {2, 3, 5, 7});
  t.b.instr(OpCode::Transpose, {x}, {t.b.output(DType::F32, {2, 5, 3, 7})}, {0, 2, 1, 3});
  t.b.instr(OpCode::Transpose, {x}, {t.b.output(DType::F32, {7, 5, 3, 2})}, {3, 2, 1, 0});
  t.b.instr(OpCode::Slice, {x}, {t.b.output(DType::F32, {2, 2, 3, 4})}, {0, 1, 2, -1, 0, 2, 6, -2});
  uint32_t y = t.f32(rng, {2, 4, 5, 7});
  uint32_t joined = t.b.output(DType::F32, {2, 7, 5, 7});
  t.b.instr(OpCode::Concat, {x, y}, {joined}, {1});
  t.b.instr(OpCode::Split, {joined}, {t.b.output(DType::F32, {2, 6, 5, 7}), t.b.output(DType::F32, {2, 1, 5, 7})}, {1});
  uint32_t small = t.f32(rng, {3, 1, 7});
  t.b.instr(OpCode::Expand, {small}, {t.b.output(DType::F32, {2, 3, 5, 7})});
  uint32_t table = t.f32(rng, {11, 6}), ids = t.ids(rng, {4, 9}, 0, 10);
  t.b.instr(OpCode::Embedding, {table, ids}, {t.b.output(DType::F32, {4, 9, 6})});
  uint32_t q = t.f32(rng, {2, 3, 5, 8}), cs = t.f32(rng, {5, 8}), sn = t.f32(rng, {5, 8});
  t.b.instr(OpCode::Rotary, {q, cs, sn}, {t.b.output(DType::F32, {2, 3, 5, 8})});
  ASSERT_EQ(t.b.p.validate(), "");
  expectSameOnGpu(t.b.p, t.inputs, 0, 1e-6);
}

TEST(CudaBackend, RotaryOnPackedRows) {
  // Rows of D % 16 == 0 take the packed kernel (a thread per eight columns
  // and their partners, and up to eight heads that share table rows):
  // forward and backward, tables broadcast over heads ([B, 1, T, D], as
  // exports emit them) or over the batch too ([T, D]), f32 and bf16
  // storage. With LOOM_CUDA_ROTARY_ROWS=8 (no floor on the thread count)
  // head counts 3, 6, 4 and 16 give a thread 1, 2, 4 and 8 rows; unset,
  // these small shapes take one row a thread. Exact against the CPU: the
  // same double arithmetic.
  REQUIRE_GPU();
  Rng rng;
  for (const char *most : {"8", ""}) {
    if (*most)
      setenv("LOOM_CUDA_ROTARY_ROWS", most, 1);
    else
      unsetenv("LOOM_CUDA_ROTARY_ROWS");
    for (bool bf16 : {false, true})
      for (int64_t heads : {3, 6, 4, 16}) {
        SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + " heads " + std::to_string(heads) +
                     " rows " + most);
        OneOp t;
        Shape s = {2, heads, 5, 32};
        uint32_t q = bf16 ? bf16Input(t.b, t.inputs, rng, s) : t.f32(rng, s);
        uint32_t csB = t.f32(rng, {2, 1, 5, 32}), snB = t.f32(rng, {2, 1, 5, 32});
        uint32_t cs = t.f32(rng, {5, 32}), sn = t.f32(rng, {5, 32});
        // One column per row (broadcast along D): the tables' entries load
        // one at a time; the tables above load four at a time.
        uint32_t cs1 = t.f32(rng, {5, 1}), sn1 = t.f32(rng, {5, 1});
        // Tables that move with every row dimension: no rows to share.
        uint32_t csAll = t.f32(rng, s), snAll = t.f32(rng, s);
        DType out = bf16 ? DType::BF16 : DType::F32;
        for (OpCode op : {OpCode::Rotary, OpCode::RotaryGrad}) {
          t.b.instr(op, {q, csB, snB}, {t.b.output(out, s)});
          t.b.instr(op, {q, cs, sn}, {t.b.output(out, s)});
          t.b.instr(op, {q, cs1, sn1}, {t.b.output(out, s)});
          t.b.instr(op, {q, csAll, snAll}, {t.b.output(out, s)});
        }
        ASSERT_EQ(t.b.p.validate(), "");
        expectSameOnGpu(t.b.p, t.inputs, 0, 0);
      }
  }
  unsetenv("LOOM_CUDA_ROTARY_ROWS");
}

TEST(CudaBackend, CrossEntropyOnBf16LogitsEqualsCastsAround) {
  // The lm head's bf16 logits read in place and a bf16 gradient stored
  // directly (LossKernels.cu) give the bits of the widen / f32 loss /
  // round sequence they replace.
  REQUIRE_GPU();
  Rng rng;
  const int64_t N = 7, V = 3001;
  auto build = [&](bool folded) {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, {N, V}), t = b.input(DType::I64, {N});
    uint32_t dl = b.input(DType::F32, {});
    uint32_t xb = b.temp(DType::BF16, {N, V});
    b.instr(OpCode::Cast, {x}, {xb});
    uint32_t logits = xb, grad = b.output(DType::BF16, {N, V}, "dlogits");
    uint32_t gradOut = grad;
    if (!folded) {
      logits = b.temp(DType::F32, {N, V});
      b.instr(OpCode::Cast, {xb}, {logits});
      gradOut = b.temp(DType::F32, {N, V});
    }
    b.instr(OpCode::CrossEntropy, {logits, t}, {b.output(DType::F32, {}, "loss")});
    b.instr(OpCode::CrossEntropyGrad, {logits, t, dl}, {gradOut});
    if (!folded) b.instr(OpCode::Cast, {gradOut}, {grad});
    return b.p;
  };
  std::vector<Bytes> in = {toBytes(rng.uniform(N * V, -20, 20)), toBytes(rng.ints(N, 0, V - 1)),
                           toBytes(F{1.f})};
  Program folded = build(true), unfolded = build(false);
  ASSERT_EQ(folded.validate(), "");
  ASSERT_EQ(unfolded.validate(), "");
  RunResult a = runProgram(folded, in, 0, "cuda"), b = runProgram(unfolded, in, 0, "cuda");
  ASSERT_TRUE(a.ok && b.ok) << a.err << b.err;
  EXPECT_EQ(a.outputs, b.outputs);
  RunResult cpu = runProgram(folded, in, 2, "cpu");
  ASSERT_TRUE(cpu.ok) << cpu.err;
  EXPECT_TRUE(allClose(a.out<float>(1), toDouble(cpu.out<float>(1)), 1e-6, 1e-6));
}

TEST(CudaBackend, CrossEntropyGradWithLossIsThePair) {
  // CrossEntropyGrad with the loss as a second output (one pass of row
  // statistics for both, loom.cross_entropy_with_grad) gives the bits of
  // CrossEntropy and CrossEntropyGrad run apart: bf16 and f32 logits, rows
  // of 4096 (all packs) and 3001 (a head and tail around the packs,
  // RowSplit), and a gradient that cannot be stored packed (rows off
  // 16-byte alignment: stored one element at a time, while the statistics
  // still read x's packs).
  REQUIRE_GPU();
  Rng rng;
  for (int64_t V : {4096, 3001})
    for (bool bf16 : {false, true})
      for (bool oddGrad : {false, true}) {
        SCOPED_TRACE("V " + std::to_string(V) + (bf16 ? " bf16" : " f32") +
                     (oddGrad ? " odd gradient" : ""));
        const int64_t N = 9;
        auto build = [&](bool fused) {
          ProgramBuilder b;
          uint32_t x = b.input(DType::F32, {N, V}), t = b.input(DType::I64, {N});
          uint32_t dl = b.input(DType::F32, {});
          uint32_t logits = x;
          DType gt = bf16 ? DType::BF16 : DType::F32;
          if (bf16) {
            logits = b.temp(DType::BF16, {N, V});
            b.instr(OpCode::Cast, {x}, {logits});
          }
          uint32_t grad = b.temp(gt, {N, V}), loss = b.output(DType::F32, {}, "loss");
          if (fused) {
            b.instr(OpCode::CrossEntropyGrad, {logits, t, dl}, {grad, loss});
          } else {
            b.instr(OpCode::CrossEntropy, {logits, t}, {loss});
            b.instr(OpCode::CrossEntropyGrad, {logits, t, dl}, {grad});
          }
          b.instr(OpCode::Cast, {grad}, {b.output(DType::F32, {N, V}, "dlogits")});
          if (oddGrad) { // last, one element past a 64-byte boundary: rows not 16-byte aligned
            BufferDesc &g = b.p.buffers[grad];
            g.offset = (b.p.arenaBytes + 63) / 64 * 64 + dtypeSize(gt);
            b.p.arenaBytes = g.offset + g.bytes;
          }
          return b.p;
        };
        std::vector<Bytes> in = {toBytes(rng.uniform(N * V, -20, 20)),
                                 toBytes(rng.ints(N, 0, V - 1)), toBytes(F{0.75f})};
        Program fused = build(true), apart = build(false);
        ASSERT_EQ(fused.validate(), "");
        ASSERT_EQ(apart.validate(), "");
        RunResult a = runProgram(fused, in, 0, "cuda"), b = runProgram(apart, in, 0, "cuda");
        ASSERT_TRUE(a.ok && b.ok) << a.err << b.err;
        EXPECT_EQ(a.outputs, b.outputs);
      }
}

TEST(CudaBackend, TransposesOfWholeRowsMovePacks) {
  // The head split and merge keep the last dim (16 here: two packs of 8),
  // in f32, in bf16, and converting either way (MovementKernels.cu).
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  uint32_t x = t.f32(rng, {2, 5, 3, 16}, -3, 3);
  uint32_t xb = t.b.temp(DType::BF16, {2, 5, 3, 16});
  t.b.instr(OpCode::Cast, {x}, {xb});
  t.b.instr(OpCode::Transpose, {x}, {t.b.output(DType::F32, {2, 3, 5, 16})}, {0, 2, 1, 3});
  t.b.instr(OpCode::Transpose, {xb}, {t.b.output(DType::BF16, {2, 3, 5, 16})}, {0, 2, 1, 3});
  t.b.instr(OpCode::Transpose, {x}, {t.b.output(DType::BF16, {3, 2, 5, 16})}, {2, 0, 1, 3});
  t.b.instr(OpCode::Transpose, {xb}, {t.b.output(DType::F32, {5, 3, 2, 16})}, {1, 2, 0, 3});
  ASSERT_EQ(t.b.p.validate(), "");
  expectSameOnGpu(t.b.p, t.inputs, 0, 0);
}

struct AttnCase {
  int64_t B, Hq, Hkv, T, S, D;
  bool causal;
};

TEST(CudaBackend, AttentionForwardAndBackward) {
  REQUIRE_GPU();
  Rng rng;
  const AttnCase cases[] = {{2, 4, 2, 9, 9, 16, true},   // GQA, causal
                            {1, 3, 3, 5, 8, 40, true},   // S > T: offset mask
                            {2, 2, 1, 7, 7, 64, false},  // non-causal, MQA
                            {1, 2, 2, 33, 33, 72, true},  // head dim past one lane slice
                            {2, 8, 2, 70, 70, 64, true},  // several chunks and row blocks
                            {1, 2, 1, 6, 6, 160, true}};  // > 128: the plain kernels
  // Every implementation the backend may pick (AttentionKernels.cu):
  // through cuBLASLt, the chunked kernels, the plain kernels.
  for (const char *path : {"gemm", "chunked", "plain"}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_ATTENTION=") + path);
    setenv("LOOM_CUDA_ATTENTION", path, 1);
    for (const AttnCase &c : cases) {
      SCOPED_TRACE("B" + std::to_string(c.B) + " Hq" + std::to_string(c.Hq) + " T" +
                   std::to_string(c.T) + " D" + std::to_string(c.D));
      OneOp t;
      Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D};
      uint32_t q = t.f32(rng, qs), k = t.f32(rng, ks), v = t.f32(rng, ks), dy = t.f32(rng, qs);
      double scale = 1.0 / std::sqrt(double(c.D));
      // The backward reads the forward's o and lse: each backend its own.
      uint32_t o = t.b.output(DType::F32, qs), lse = t.b.output(DType::F32, {c.B, c.Hq, c.T});
      t.b.instr(OpCode::Attention, {q, k, v}, {o, lse}, {c.causal}, {scale});
      t.b.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dy},
                {t.b.output(DType::F32, qs), t.b.output(DType::F32, ks), t.b.output(DType::F32, ks)},
                {c.causal}, {scale});
      ASSERT_EQ(t.b.p.validate(), "");
      expectSameOnGpu(t.b.p, t.inputs, 1e-4, 1e-5);
    }
  }
  unsetenv("LOOM_CUDA_ATTENTION");
}

TEST(CudaBackend, SlidingWindowAndSoftcapAttention) {
  // Mistral's sliding window, Gemma 2's capped scores and both, forward and
  // backward, on every f32 implementation; and with bf16_operands set on
  // head dim 64, where plain causal attention would take the flash kernels
  // or cuDNN: windowed or capped attention must still come out right (it
  // takes loom's GEMM path).
  REQUIRE_GPU();
  Rng rng;
  struct Case {
    int64_t B, Hq, Hkv, T, D, window;
    double softcap;
    bool bf16;
  };
  const Case cases[] = {{2, 4, 2, 40, 16, 7, 0, false},  {1, 2, 1, 70, 32, 33, 0, false},
                        {2, 4, 2, 40, 16, 0, 1.5, false}, {1, 4, 2, 70, 64, 16, 2.0, false},
                        {1, 4, 2, 70, 64, 16, 30.0, true}, {1, 2, 1, 6, 160, 3, 1.0, false}};
  for (const char *path : {"", "gemm", "chunked", "plain"}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_ATTENTION=") + path);
    if (*path) setenv("LOOM_CUDA_ATTENTION", path, 1);
    for (const Case &c : cases) {
      SCOPED_TRACE("T" + std::to_string(c.T) + " D" + std::to_string(c.D) + " window " +
                   std::to_string(c.window) + " softcap " + std::to_string(c.softcap));
      OneOp t;
      Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.T, c.D};
      uint32_t q = t.f32(rng, qs, -2, 2), k = t.f32(rng, ks, -2, 2), v = t.f32(rng, ks),
               dy = t.f32(rng, qs);
      std::vector<int64_t> ints = {1, c.bf16, c.window};
      std::vector<double> floats = {1.0 / std::sqrt(double(c.D))};
      if (c.softcap) floats.push_back(c.softcap);
      uint32_t o = t.b.output(DType::F32, qs), lse = t.b.output(DType::F32, {c.B, c.Hq, c.T});
      t.b.instr(OpCode::Attention, {q, k, v}, {o, lse}, ints, floats);
      t.b.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dy},
                {t.b.output(DType::F32, qs), t.b.output(DType::F32, ks), t.b.output(DType::F32, ks)},
                ints, floats);
      ASSERT_EQ(t.b.p.validate(), "");
      // bf16_operands lets the GEMMs round P and dS to bf16 operands.
      expectSameOnGpu(t.b.p, t.inputs, c.bf16 ? 3e-2 : 1e-4, c.bf16 ? 3e-2 : 1e-5);
    }
  }
  unsetenv("LOOM_CUDA_ATTENTION");
}

TEST(CudaBackend, AttentionOnBf16TensorCores) {
  // bf16_operands = 1 (autocast): the flash kernels (head dim 64) and the
  // GEMM path run the products on bf16 tensor cores, rounding P and dS as
  // FlashAttention does, so results stay within bf16 precision of the exact
  // reference. The cases cover GQA and MQA, partial tiles (T not a multiple
  // of 64), S > T (the offset mask), and no mask.
  REQUIRE_GPU();
  Rng rng;
  auto bf16Values = [&](int64_t n) { return toBf16Values(rng.uniform(n)); };
  const AttnCase cases[] = {{2, 8, 2, 70, 70, 64, true},
                            {1, 4, 1, 130, 130, 64, true},
                            {1, 2, 2, 40, 100, 64, true},
                            {2, 4, 2, 65, 65, 64, false},
                            {1, 4, 2, 33, 33, 32, true}}; // not flash's head dim: falls back
  for (const char *path : {"flash", "gemm"}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_ATTENTION=") + path);
    setenv("LOOM_CUDA_ATTENTION", path, 1);
    for (const AttnCase &c : cases) {
      SCOPED_TRACE("B" + std::to_string(c.B) + " Hq" + std::to_string(c.Hq) + " T" +
                   std::to_string(c.T) + " S" + std::to_string(c.S) + " D" + std::to_string(c.D));
      Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D};
      ProgramBuilder b;
      std::vector<Bytes> inputs;
      uint32_t ids[4];
      for (int k = 0; k < 4; ++k) {
        const Shape &s = k == 1 || k == 2 ? ks : qs;
        ids[k] = b.input(DType::F32, s);
        inputs.push_back(toBytes(bf16Values(numel(s))));
      }
      double scale = 1.0 / std::sqrt(double(c.D));
      uint32_t o = b.output(DType::F32, qs), lse = b.output(DType::F32, {c.B, c.Hq, c.T});
      b.instr(OpCode::Attention, {ids[0], ids[1], ids[2]}, {o, lse}, {c.causal, 1}, {scale});
      b.instr(OpCode::AttentionGrad, {ids[0], ids[1], ids[2], o, lse, ids[3]},
              {b.output(DType::F32, qs), b.output(DType::F32, ks), b.output(DType::F32, ks)},
              {c.causal, 1}, {scale});
      ASSERT_EQ(b.p.validate(), "");
      expectSameOnGpu(b.p, inputs, 2e-2, 1e-2);
      if (std::string(path) == "flash") { // no atomics: bit for bit run to run
        RunResult r1 = runProgram(b.p, inputs, 0, "cuda"), r2 = runProgram(b.p, inputs, 0, "cuda");
        ASSERT_TRUE(r1.ok && r2.ok) << r1.err << r2.err;
        EXPECT_EQ(r1.outputs, r2.outputs);
      }
    }
  }
  unsetenv("LOOM_CUDA_ATTENTION");
}

/// The GPU's lse equals the CPU's: +inf exactly where the CPU's is (a row
/// that sees no key), elsewhere within atol + rtol |want|. NaN (a row the
/// kernel never wrote: the arena starts 0xff-filled) never passes.
::testing::AssertionResult sameLse(const F &got, const F &want, double rtol, double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " rows, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok = std::isinf(want[i]) ? got[i] == want[i]
                                  : std::fabs(double(got[i]) - want[i]) <= atol + rtol * std::fabs(want[i]);
    if (!ok)
      return ::testing::AssertionFailure() << "row " << i << ": got " << got[i] << ", expected "
                                           << want[i];
  }
  return ::testing::AssertionSuccess();
}

/// Runs the forward `p` (outputs o, lse) on both backends; lse within
/// `tol` of the CPU's, o within `oTol`.
void expectSameLse(const Program &p, const std::vector<Bytes> &inputs, double tol, double oTol) {
  ASSERT_EQ(p.validate(), "");
  RunResult cpu = runProgram(p, inputs, 2, "cpu");
  ASSERT_TRUE(cpu.ok) << "cpu: " << cpu.err;
  RunResult gpu = runProgram(p, inputs, 0, "cuda");
  ASSERT_TRUE(gpu.ok) << "cuda: " << gpu.err;
  EXPECT_TRUE(sameLse(gpu.out<float>(1), cpu.out<float>(1), tol, tol));
  if (p.buffers[p.outputs[0]].dtype == DType::F32)
    EXPECT_TRUE(allClose(gpu.out<float>(0), toDouble(cpu.out<float>(0)), oTol, oTol));
}

TEST(CudaBackend, AttentionLogsumexpMatchesTheCpuOnEveryPath) {
  // The forward's second output, which the backward trusts instead of
  // recomputing: natural-log units on every implementation (the flash
  // kernel keeps log2 units inside), +inf on rows without keys (S == 0).
  REQUIRE_GPU();
  Rng rng;
  // f32 operands: the cuBLASLt, chunked and plain implementations.
  const AttnCase f32Cases[] = {{2, 4, 2, 9, 9, 16, true},  {1, 3, 3, 5, 8, 40, true},
                               {2, 2, 1, 7, 7, 64, false}, {1, 2, 2, 33, 33, 72, true},
                               {2, 8, 2, 70, 70, 64, true}, {1, 2, 1, 6, 6, 160, true},
                               {1, 2, 1, 5, 0, 16, true}};
  for (const char *path : {"gemm", "chunked", "plain"}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_ATTENTION=") + path);
    setenv("LOOM_CUDA_ATTENTION", path, 1);
    for (const AttnCase &c : f32Cases) {
      SCOPED_TRACE("B" + std::to_string(c.B) + " Hq" + std::to_string(c.Hq) + " T" +
                   std::to_string(c.T) + " S" + std::to_string(c.S) + " D" + std::to_string(c.D));
      OneOp t;
      Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D};
      uint32_t q = t.f32(rng, qs, -2, 2), k = t.f32(rng, ks, -2, 2), v = t.f32(rng, ks);
      t.b.instr(OpCode::Attention, {q, k, v},
                {t.b.output(DType::F32, qs), t.b.output(DType::F32, {c.B, c.Hq, c.T})},
                {c.causal}, {1.0 / std::sqrt(double(c.D))});
      expectSameLse(t.b.p, t.inputs, 1e-5, 1e-4);
    }
  }
  // bf16 values (autocast): the flash kernels and the bf16 GEMMs, with the
  // operands as f32 buffers and as bf16 storage read in place, and once
  // with q 8 bytes off a 16-byte boundary (flash refuses it: the chunked
  // kernels, staged). The scores are exact products of bf16 values summed
  // in f32 on every path, so lse stays within f32 rounding of the CPU's.
  const AttnCase bf16Cases[] = {{2, 8, 2, 70, 70, 64, true}, {1, 4, 1, 130, 130, 64, true},
                                {1, 2, 2, 40, 100, 64, true}, {2, 4, 2, 65, 65, 64, false},
                                {1, 4, 2, 33, 33, 32, true},  {1, 2, 1, 70, 0, 64, true}};
  for (const char *path : {"", "flash", "gemm"}) {
    SCOPED_TRACE(std::string("LOOM_CUDA_ATTENTION=") + path);
    if (*path) setenv("LOOM_CUDA_ATTENTION", path, 1);
    else unsetenv("LOOM_CUDA_ATTENTION");
    for (const AttnCase &c : bf16Cases)
      for (int layout = 0; layout < 3; ++layout) { // f32 buffers, bf16 storage, unaligned q
        SCOPED_TRACE("B" + std::to_string(c.B) + " Hq" + std::to_string(c.Hq) + " T" +
                     std::to_string(c.T) + " S" + std::to_string(c.S) + " D" +
                     std::to_string(c.D) + " layout " + std::to_string(layout));
        Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D};
        DType t = layout == 0 ? DType::F32 : DType::BF16;
        ProgramBuilder b;
        std::vector<Bytes> inputs;
        uint32_t ids[3];
        for (int k = 0; k < 3; ++k) {
          const Shape &s = k == 0 ? qs : ks;
          std::vector<float> x = toBf16Values(rng.uniform(numel(s), -2, 2));
          ids[k] = b.input(t, s);
          if (t == DType::F32) {
            inputs.push_back(toBytes(x));
          } else {
            std::vector<uint16_t> bits;
            for (float f : x) {
              uint32_t u;
              std::memcpy(&u, &f, 4);
              bits.push_back(uint16_t(u >> 16)); // exact: x holds bf16 values
            }
            inputs.push_back(toBytes(bits));
          }
        }
        b.instr(OpCode::Attention, {ids[0], ids[1], ids[2]},
                {b.output(t, qs), b.output(DType::F32, {c.B, c.Hq, c.T})}, {c.causal, 1},
                {1.0 / std::sqrt(double(c.D))});
        if (layout == 2) {
          BufferDesc &q = b.p.buffers[ids[0]];
          q.offset = (b.p.arenaBytes + 63) / 64 * 64 + 8;
          b.p.arenaBytes = q.offset + q.bytes;
        }
        expectSameLse(b.p, inputs, 1e-4, 2e-2);
      }
  }
  unsetenv("LOOM_CUDA_ATTENTION");
}

/// x, a [B, X, Y, D] tensor of `width`-byte elements, with dims 1 and 2
/// swapped: [B, Y, X, D].
Bytes swapDims12(const Bytes &x, const Shape &s, size_t width) {
  Bytes y(x.size());
  const int64_t B = s[0], X = s[1], Y = s[2];
  const size_t row = size_t(s[3]) * width;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < X; ++i)
      for (int64_t j = 0; j < Y; ++j)
        std::memcpy(&y[size_t((b * Y + j) * X + i) * row], &x[size_t((b * X + i) * Y + j) * row],
                    row);
  return y;
}

/// `x` (bf16 values) as f32 storage or as bf16 storage.
Bytes storedAs(DType t, const F &x) {
  if (t == DType::F32) return toBytes(x);
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    bits[i] = uint16_t(u >> 16); // exact: x holds bf16 values
  }
  return toBytes(bits);
}

/// Causal attention and its gradient over q, k, v, dy of heads-major dims
/// `qs`, `ks`, `ks`, `qs`, stored in `t` heads-major (ints without a layout,
/// as before AttentionLayout.h) or tokens-major; outputs o, lse, dq, dk, dv.
Program attentionInLayout(const Shape &qs, const Shape &ks, DType t, bool bf16Operands,
                          bool tokensMajor) {
  auto stored = [&](const Shape &s) { return tokensMajor ? Shape{s[0], s[2], s[1], s[3]} : s; };
  ProgramBuilder b;
  uint32_t q = b.input(t, stored(qs)), k = b.input(t, stored(ks)), v = b.input(t, stored(ks)),
           dy = b.input(t, stored(qs));
  uint32_t o = b.output(t, stored(qs)), lse = b.output(DType::F32, {qs[0], qs[1], qs[2]});
  std::vector<int64_t> ints = {1, bf16Operands};
  if (tokensMajor) ints.insert(ints.end(), {0, 1}); // no window; layout 1
  std::vector<double> scale = {1.0 / std::sqrt(double(qs[3]))};
  b.instr(OpCode::Attention, {q, k, v}, {o, lse}, ints, scale);
  b.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dy},
          {b.output(t, stored(qs)), b.output(t, stored(ks)), b.output(t, stored(ks))}, ints,
          scale);
  return b.p;
}

TEST(CudaBackend, TokensMajorAttentionHasTheHeadsMajorBits) {
  // Attention over tokens-major operands (AttentionLayout.h: q [B, T, Hq,
  // D]) gives, on every path, the bits of the heads-major attention of the
  // same operands transposed on the host: o, lse, dq, dk and dv. cuDNN (the
  // default for bf16 values, where the machine has it) reads and writes
  // them in place through strides, in bf16 storage and staged from f32;
  // loom's kernels run on heads-major copies (AttentionKernels.cu).
  REQUIRE_GPU();
  Rng rng;
  struct Case {
    const char *path; // LOOM_CUDA_ATTENTION ("": cuDNN, else the default)
    DType storage;
    bool bf16Operands;
  };
  const Case cases[] = {{"", DType::BF16, true},        {"", DType::F32, true},
                        {"flash", DType::BF16, true},   {"flash", DType::F32, true},
                        {"gemm", DType::BF16, true},    {"gemm", DType::F32, false},
                        {"chunked", DType::F32, false}, {"plain", DType::F32, false}};
  // Grouped query heads; whole tiles of 64, then a partial one.
  const Shape shapes[][2] = {{{2, 4, 64, 64}, {2, 2, 64, 64}}, {{1, 4, 70, 64}, {1, 2, 70, 64}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string("LOOM_CUDA_ATTENTION=") + c.path + " " + dtypeName(c.storage) +
                 " storage, bf16_operands " + std::to_string(c.bf16Operands));
    if (*c.path) setenv("LOOM_CUDA_ATTENTION", c.path, 1);
    else unsetenv("LOOM_CUDA_ATTENTION");
    for (const auto &[qs, ks] : shapes) {
      SCOPED_TRACE("T " + std::to_string(qs[2]));
      Program headsMajor = attentionInLayout(qs, ks, c.storage, c.bf16Operands, false),
              tokensMajor = attentionInLayout(qs, ks, c.storage, c.bf16Operands, true);
      ASSERT_EQ(tokensMajor.validate(), "");
      size_t width = dtypeSize(c.storage);
      std::vector<Bytes> headsIn, tokensIn;
      for (const Shape *s : {&qs, &ks, &ks, &qs}) { // q, k, v, dy
        Bytes x = storedAs(c.storage, toBf16Values(rng.uniform(numel(*s), -2, 2)));
        tokensIn.push_back(swapDims12(x, *s, width));
        headsIn.push_back(std::move(x));
      }
      RunResult want = runProgram(headsMajor, headsIn, 0, "cuda"),
                got = runProgram(tokensMajor, tokensIn, 0, "cuda");
      ASSERT_TRUE(want.ok && got.ok) << want.err << got.err;
      // lse is [B, Hq, T] in both layouts.
      const Shape *outShapes[] = {&qs, nullptr, &qs, &ks, &ks};
      const char *names[] = {"o", "lse", "dq", "dk", "dv"};
      for (size_t k = 0; k < 5; ++k) {
        Bytes expected = outShapes[k] ? swapDims12(want.outputs[k], *outShapes[k], width)
                                      : want.outputs[k];
        EXPECT_TRUE(got.outputs[k] == expected) << names[k] << " differs";
      }
    }
  }
  unsetenv("LOOM_CUDA_ATTENTION");
}

TEST(CudaBackend, LossAndBackwardKernels) {
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  int64_t N = 37, V = 301, D = 45;
  uint32_t logits = t.f32(rng, {N, V}, -4, 4), targets = t.ids(rng, {N}, 0, V - 1);
  t.b.instr(OpCode::CrossEntropy, {logits, targets}, {t.b.output(DType::F32, {})});
  uint32_t dloss = t.scalar(0.7f);
  t.b.instr(OpCode::CrossEntropyGrad, {logits, targets, dloss}, {t.b.output(DType::F32, {N, V})});
  // Wider rows and logits: the one-pass (online) max and sum rescale often.
  uint32_t wide = t.f32(rng, {5, 5000}, -30, 30), wideTargets = t.ids(rng, {5}, 0, 4999);
  t.b.instr(OpCode::CrossEntropy, {wide, wideTargets}, {t.b.output(DType::F32, {})});
  t.b.instr(OpCode::CrossEntropyGrad, {wide, wideTargets, dloss}, {t.b.output(DType::F32, {5, 5000})});
  // Packed rows (V % 8 == 0) with masked (-inf) logits: a whole leading
  // pack of them, scattered ones, and packs whose maximum rises late.
  uint32_t masked = t.f32(rng, {4, 64}, -8, 8), maskedTargets = t.b.input(DType::I64, {4});
  {
    std::vector<float> v = fromBytes<float>(t.inputs.back());
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 64; ++c)
        if ((r == 0 && c < 8) || (c * 7 + r) % 5 == 0) v[size_t(r * 64 + c)] = -INFINITY;
    v[3 * 64 + 60] = 30.0f; // the row's max in its last pack
    t.inputs.back() = toBytes(v);
    t.inputs.push_back(toBytes(std::vector<int64_t>{9, 11, 13, 60}));
    t.in.push_back(maskedTargets);
  }
  t.b.instr(OpCode::CrossEntropy, {masked, maskedTargets}, {t.b.output(DType::F32, {})});
  t.b.instr(OpCode::CrossEntropyGrad, {masked, maskedTargets, dloss}, {t.b.output(DType::F32, {4, 64})});
  // Many packed rows of 8,216 logits (4 x 256 x 8 + 24: a block's last
  // sweep over the row covers only part of it).
  uint32_t tall = t.f32(rng, {300, 8216}, -6, 6), tallTargets = t.ids(rng, {300}, 0, 8215);
  t.b.instr(OpCode::CrossEntropy, {tall, tallTargets}, {t.b.output(DType::F32, {})});
  t.b.instr(OpCode::CrossEntropyGrad, {tall, tallTargets, dloss}, {t.b.output(DType::F32, {300, 8216})});
  // Repeated ids: rows of dtable sum several positions.
  uint32_t dy = t.f32(rng, {N, D}), ids = t.ids(rng, {N}, 0, 9);
  t.b.instr(OpCode::EmbeddingGrad, {dy, ids}, {t.b.output(DType::F32, {12, D})});
  uint32_t x = t.f32(rng, {N, D}), w = t.f32(rng, {D}, 0.5, 1.5), w2 = t.f32(rng, {N, D});
  t.b.instr(OpCode::RmsNormGrad, {x, w, dy}, {t.b.output(DType::F32, {N, D}), t.b.output(DType::F32, {D})}, {}, {1e-6});
  t.b.instr(OpCode::LayerNormGrad, {x, w, dy},
            {t.b.output(DType::F32, {N, D}), t.b.output(DType::F32, {D}), t.b.output(DType::F32, {D})}, {}, {1e-5});
  for (int64_t kind : {0, 1, 2})
    t.b.instr(OpCode::ActivationGrad, {x, dy}, {t.b.output(DType::F32, {N, D})}, {kind});
  t.b.instr(OpCode::SwiGlu, {x, dy}, {t.b.output(DType::F32, {N, D})});
  t.b.instr(OpCode::SwiGluGrad, {x, w2, dy}, {t.b.output(DType::F32, {N, D}), t.b.output(DType::F32, {N, D})});
  t.b.instr(OpCode::SoftmaxGrad, {x, dy}, {t.b.output(DType::F32, {N, D})}, {1});
  uint32_t dq = t.f32(rng, {2, 3, 5, 8}), cs = t.f32(rng, {5, 8}), sn = t.f32(rng, {5, 8});
  t.b.instr(OpCode::RotaryGrad, {dq, cs, sn}, {t.b.output(DType::F32, {2, 3, 5, 8})});
  uint32_t piece = t.f32(rng, {2, 3, 4});
  t.b.instr(OpCode::SliceGrad, {piece}, {t.b.output(DType::F32, {4, 3, 9})}, {3, -1, 0, 1, 8, -2});
  uint32_t p = t.f32(rng, {N, D}), m = t.f32(rng, {N, D}), vv = t.f32(rng, {N, D}, 0, 1e-2);
  uint32_t lr = t.scalar(3e-3f), step = t.scalar(4.f);
  t.b.instr(OpCode::AdamW, {p, dy, m, vv, lr, step},
            {t.b.output(DType::F32, {N, D}), t.b.output(DType::F32, {N, D}), t.b.output(DType::F32, {N, D})},
            {}, {0.9, 0.95, 1e-8, 0.1});
  ASSERT_EQ(t.b.p.validate(), "");
  expectSameOnGpu(t.b.p, t.inputs, 1e-5, 1e-6);
}

TEST(CudaBackend, NormsOnEveryPath) {
  // Each path of the norm kernels: RmsNorm rows of 64, 128 and 256 (the
  // per-head q/k norms) take eight elements a lane, two to eight rows a
  // warp, the gradient's weight partials with dx (70 rows of 64 leave the
  // last warp a part of its four rows); other rows of at most 256 take a
  // warp each (16, 8), longer ones a block with eight-wide
  // accesses, the row held in registers in two packs a thread (264) or
  // four (3000), or read pass by pass (4104, too long for registers), or
  // one element at a time (300); the same for LayerNorm and both
  // gradients (rows held in registers: 264 and 3000);
  // the separate column sums with eight columns a thread
  // (D % 8 == 0) or one (300); and 4100 and 20000 rows, whose column sums
  // finish over 257 and 1250 chunks of 16 rows (more than a finishing block's threads),
  // with bf16 dy and dx as autocast stores them.
  REQUIRE_GPU();
  Rng rng;
  for (auto [N, D] : {std::pair<int64_t, int64_t>{70, 128}, {70, 64}, {45, 256}, {70, 264},
                      {70, 300}, {30, 3000}, {20, 4104}, {4100, 16}, {20000, 8}, {5000, 128}}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(std::to_string(N) + " rows of " + std::to_string(D) + (bf16 ? ", bf16" : ""));
      OneOp t;
      uint32_t x = t.f32(rng, {N, D}), w = t.f32(rng, {D}, 0.5, 1.5), bias = t.f32(rng, {D});
      uint32_t dy = bf16 ? bf16Input(t.b, t.inputs, rng, {N, D}) : t.f32(rng, {N, D});
      // A bf16 result is compared widened (Cast after the instruction):
      // one rounding step apart where the two f32 values straddle one.
      std::vector<std::pair<uint32_t, uint32_t>> widen;
      auto out = [&](const Shape &s) {
        if (!bf16) return t.b.output(DType::F32, s);
        uint32_t y = t.b.temp(DType::BF16, s);
        widen.push_back({y, t.b.output(DType::F32, s)});
        return y;
      };
      t.b.instr(OpCode::RmsNorm, {x, w}, {out({N, D})}, {}, {1e-6});
      t.b.instr(OpCode::RmsNormGrad, {x, w, dy}, {out({N, D}), t.b.output(DType::F32, {D})}, {},
                {1e-6});
      t.b.instr(OpCode::LayerNorm, {x, w, bias}, {out({N, D})}, {}, {1e-5});
      t.b.instr(OpCode::LayerNormGrad, {x, w, dy},
                {out({N, D}), t.b.output(DType::F32, {D}), t.b.output(DType::F32, {D})}, {},
                {1e-5});
      for (auto [from, to] : widen) t.b.instr(OpCode::Cast, {from}, {to});
      ASSERT_EQ(t.b.p.validate(), "");
      expectSameOnGpu(t.b.p, t.inputs, bf16 ? 1e-2 : 1e-5, bf16 ? 1e-2 : 1e-5);
    }
  }
}

TEST(CudaBackend, TinyModelEndToEnd) {
  REQUIRE_GPU();
  Rng rng;
  Program p = tinyLanguageModel(rng, 13, 29, 24);
  expectSameOnGpu(p, {toBytes(rng.ints(13, 0, 28)), toBytes(rng.ints(13, 0, 28))}, 1e-5, 1e-6);
}

TEST(CudaBackend, BadIdIsAnErrorNamingTheInstruction) {
  REQUIRE_GPU();
  Rng rng;
  Program p = tinyLanguageModel(rng, 5, 7, 8);
  RunResult r = runProgram(p, {toBytes(std::vector<int64_t>{1, 2, 9, 0, 3}),
                               toBytes(std::vector<int64_t>{0, 0, 0, 0, 0})},
                           0, "cuda");
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.err, "instr 0 (embedding): id 9 at position 2 out of range [0, 7)");
}

TEST(CudaBackend, RunsAreBitwiseReproducible) {
  REQUIRE_GPU();
  Rng rng;
  OneOp t;
  int64_t N = 300, D = 40;
  uint32_t dy = t.f32(rng, {N, D}), ids = t.ids(rng, {N}, 0, 6);
  t.b.instr(OpCode::EmbeddingGrad, {dy, ids}, {t.b.output(DType::F32, {7, D})});
  Shape qs = {1, 4, 64, 32}, ks = {1, 2, 64, 32};
  uint32_t q = t.f32(rng, qs), k = t.f32(rng, ks), v = t.f32(rng, ks), g = t.f32(rng, qs);
  uint32_t o = t.b.output(DType::F32, qs), lse = t.b.output(DType::F32, {1, 4, 64});
  t.b.instr(OpCode::Attention, {q, k, v}, {o, lse}, {1}, {0.125});
  t.b.instr(OpCode::AttentionGrad, {q, k, v, o, lse, g},
            {t.b.output(DType::F32, qs), t.b.output(DType::F32, ks), t.b.output(DType::F32, ks)},
            {1}, {0.125});
  RunResult a = runProgram(t.b.p, t.inputs, 0, "cuda"), b = runProgram(t.b.p, t.inputs, 0, "cuda");
  ASSERT_TRUE(a.ok && b.ok) << a.err << b.err;
  EXPECT_EQ(a.outputs, b.outputs);
}

TEST(CudaBackend, UnsupportedDtypeIsRefusedUpFront) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  ProgramBuilder b;
  uint32_t x = b.input(DType::F64, {4, 4});
  b.instr(OpCode::Softmax, {x}, {b.output(DType::F64, {4, 4})}, {1});
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(b.p), "cuda", 0, err);
  EXPECT_EQ(exec, nullptr);
  EXPECT_EQ(err, "instr 0 (softmax): the cuda backend supports operands of f32, not f64");
#endif
}

} // namespace
} // namespace loom::rt::test
