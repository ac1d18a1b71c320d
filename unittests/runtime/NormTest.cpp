//===- NormTest.cpp - RmsNorm, LayerNorm, Softmax, Reduce, SumSquares ----===//
//
// Part of loom, under the Apache License v2.0.
//
// These kernels accumulate in double, so they match the fp64 reference to
// about one f32 rounding.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

#include <cmath>
#include <limits>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

constexpr double kTight = 4e-7; // a couple of f32 roundings

TEST(Norm, RmsNorm) {
  Rng rng;
  Shape s = {3, 5, 96};
  int64_t D = 96, rows = 15;
  double eps = 1e-5;
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, s), w = b.input(DType::F32, {D}), o = b.output(DType::F32, s);
  b.instr(OpCode::RmsNorm, {x, w}, {o}, {}, {eps});
  auto xv = rng.uniform(numel(s), -3, 3), wv = rng.uniform(D);
  RunResult r = runProgram(b.p, {toBytes(xv), toBytes(wv)});
  ASSERT_TRUE(r.ok) << r.err;
  std::vector<double> want;
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(xv[i * D + d]) * xv[i * D + d];
    double inv = 1 / std::sqrt(ss / D + eps);
    for (int64_t d = 0; d < D; ++d) want.push_back(xv[i * D + d] * inv * wv[d]);
  }
  EXPECT_TRUE(allClose(r.out<float>(), want, kTight, 1e-30));
}

TEST(Norm, LayerNormWithAndWithoutBias) {
  Rng rng;
  Shape s = {4, 7, 80};
  int64_t D = 80, rows = 28;
  double eps = 1e-5;
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "without bias");
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, s), w = b.input(DType::F32, {D});
    std::vector<uint32_t> in = {x, w};
    if (bias)
      in.push_back(b.input(DType::F32, {D}));
    uint32_t o = b.output(DType::F32, s);
    b.instr(OpCode::LayerNorm, in, {o}, {}, {eps});
    // An offset mean makes the naive mean(x^2) - mean^2 variance inaccurate.
    auto xv = rng.uniform(numel(s), 9, 11), wv = rng.uniform(D), bv = rng.uniform(D);
    std::vector<Bytes> inputs = {toBytes(xv), toBytes(wv)};
    if (bias)
      inputs.push_back(toBytes(bv));
    RunResult r = runProgram(b.p, inputs);
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<double> want;
    for (int64_t i = 0; i < rows; ++i) {
      double mean = 0, var = 0;
      for (int64_t d = 0; d < D; ++d) mean += xv[i * D + d];
      mean /= D;
      for (int64_t d = 0; d < D; ++d) var += (xv[i * D + d] - mean) * (xv[i * D + d] - mean);
      double inv = 1 / std::sqrt(var / D + eps);
      for (int64_t d = 0; d < D; ++d)
        want.push_back((xv[i * D + d] - mean) * inv * wv[d] + (bias ? bv[d] : 0.0));
    }
    // Outputs are O(1) with cancellation in w*y + b: compare absolutely.
    EXPECT_TRUE(allClose(r.out<float>(), want, kTight, 1e-6));
  }
}

TEST(Norm, SoftmaxAlongEveryAxis) {
  Rng rng;
  Shape s = {3, 4, 50};
  for (int64_t axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, s), o = b.output(DType::F32, s);
    b.instr(OpCode::Softmax, {x}, {o}, {axis});
    // Large logits: exp without the max shift would overflow.
    auto xv = rng.uniform(numel(s), -100, 100);
    xv[0] = 500;
    RunResult r = runProgram(b.p, {toBytes(xv)});
    ASSERT_TRUE(r.ok) << r.err;
    int64_t len = s[axis], inner = 1;
    for (int64_t d = axis + 1; d < 3; ++d) inner *= s[d];
    std::vector<double> want(xv.size());
    for (int64_t i = 0; i < numel(s); ++i) {
      int64_t base = (i / (len * inner)) * len * inner + i % inner;
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < len; ++k) mx = std::max(mx, double(xv[base + k * inner]));
      for (int64_t k = 0; k < len; ++k) sum += std::exp(xv[base + k * inner] - mx);
      want[i] = std::exp(xv[i] - mx) / sum;
    }
    EXPECT_TRUE(allClose(r.out<float>(), want, kTight, 1e-40));
  }
}

struct ReduceCase {
  Shape in;
  std::vector<int64_t> axes;
  bool keepdims;
};

TEST(Norm, ReduceSumMeanMaxOverAxes) {
  Rng rng;
  std::vector<ReduceCase> cases = {
      {{4, 6, 8}, {2}, true},       {{4, 6, 8}, {0}, true},  {{4, 6, 8}, {1}, false},
      {{4, 6, 8}, {0, 2}, true},    {{4, 6, 8}, {1, 2}, false}, {{4, 6, 8}, {0, 1, 2}, false},
      {{2, 3, 4, 5}, {0, 1, 3}, true}, {{300, 70}, {0}, false}, {{5}, {}, true},
  };
  for (int kind = 0; kind < 3; ++kind)
    for (const ReduceCase &c : cases) {
      SCOPED_TRACE("kind " + std::to_string(kind) + " rank " + std::to_string(c.in.size()) +
                   " axes " + std::to_string(c.axes.size()) + " first " +
                   (c.axes.empty() ? "-" : std::to_string(c.axes[0])));
      std::vector<bool> reduced(c.in.size(), false);
      for (int64_t a : c.axes) reduced[a] = true;
      Shape out;
      for (size_t d = 0; d < c.in.size(); ++d)
        if (!reduced[d] || c.keepdims)
          out.push_back(reduced[d] ? 1 : c.in[d]);
      ProgramBuilder b;
      uint32_t x = b.input(DType::F32, c.in), o = b.output(DType::F32, out);
      std::vector<int64_t> ints = {kind};
      ints.insert(ints.end(), c.axes.begin(), c.axes.end());
      b.instr(OpCode::Reduce, {x}, {o}, ints);
      auto xv = rng.uniform(numel(c.in), 0.5, 1.5); // positive: sums do not cancel
      RunResult r = runProgram(b.p, {toBytes(xv)});
      ASSERT_TRUE(r.ok) << r.err;

      // Reference: scatter every input element into its kept-dims slot.
      int64_t n = numel(c.in);
      std::vector<double> sum(size_t(numel(out)), 0.0), mx(size_t(numel(out)), -INFINITY);
      std::vector<int64_t> count(size_t(numel(out)), 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t rest = i, slot = 0, stride = 1;
        for (size_t d = c.in.size(); d-- > 0;) {
          int64_t coord = rest % c.in[d];
          rest /= c.in[d];
          if (!reduced[d]) {
            slot += coord * stride;
            stride *= c.in[d];
          }
        }
        sum[slot] += xv[i];
        mx[slot] = std::max(mx[slot], double(xv[i]));
        ++count[slot];
      }
      std::vector<double> want;
      for (size_t k = 0; k < sum.size(); ++k)
        want.push_back(kind == 0 ? sum[k] : kind == 1 ? sum[k] / count[k] : mx[k]);
      EXPECT_TRUE(allClose(r.out<float>(), want, kTight));
    }
}

// SumSquares against the two things it must be: the sum of the squares
// (each square rounded to f32, as the kernel's contract says), and
// bit-for-bit the Mul + Reduce program it replaces in a training step.
TEST(Norm, SumSquaresIsTheSumOfRoundedSquares) {
  Rng rng;
  for (const Shape &s : std::vector<Shape>{{3, 37, 5}, {1}, {}, {0, 4}, {70001}}) {
    SCOPED_TRACE("shape " + std::to_string(s.size()) + "d, " + std::to_string(numel(s)) +
                 " elements");
    std::vector<float> xv = rng.uniform(numel(s), -3, 3);
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, s);
    b.instr(OpCode::SumSquares, {x}, {b.output(DType::F32, {})});
    ASSERT_EQ(b.p.validate(), "");
    RunResult r = runProgram(b.p, {toBytes(xv)});
    ASSERT_TRUE(r.ok) << r.err;
    double want = 0;
    for (float v : xv) want += double(v * v);
    EXPECT_TRUE(allClose(r.out<float>(), {want}, kTight));

    Program unfused = sumSquaresUnfused(s);
    ASSERT_EQ(unfused.validate(), "");
    RunResult ur = runProgram(unfused, {toBytes(xv)});
    ASSERT_TRUE(ur.ok) << ur.err;
    EXPECT_EQ(r.outputs, ur.outputs);
  }
  // Each square is rounded to f32 before it is added, as the Mul it
  // replaces stored it (RuntimeTestUtil.h says why these inputs tell).
  std::vector<float> xv;
  float rounded;
  ASSERT_TRUE(squaresThatRoundDifferently(rng, xv, rounded));
  {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, {16});
    b.instr(OpCode::SumSquares, {x}, {b.output(DType::F32, {})});
    RunResult r = runProgram(b.p, {toBytes(xv)});
    ASSERT_TRUE(r.ok) << r.err;
    EXPECT_EQ(r.out<float>(), std::vector<float>{rounded});
  }
  // f64 squares and sum (the gradient checks' precision).
  std::vector<double> xd = {1.5, -2.25, 0.125, 3.0}; // exact squares and sum
  ProgramBuilder b;
  uint32_t x = b.input(DType::F64, {2, 2});
  b.instr(OpCode::SumSquares, {x}, {b.output(DType::F64, {})});
  RunResult r = runProgram(b.p, {toBytes(xd)});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out<double>(), std::vector<double>{16.328125});
}

// GlobalSumSquares is the SumSquares of each input and the chain of Adds
// after them (loom-fuse-global-sum-squares), bit for bit: f32, bf16
// storage and f64 inputs; one input; scalars and empty tensors among them;
// sums far apart in magnitude, so the chain's f32 roundings tell.
TEST(Norm, GlobalSumSquaresIsTheChainOfSums) {
  Rng rng;
  const std::vector<Shape> shapes = {{3, 37, 5}, {1}, {}, {0, 4}, {70001}, {8, 8}, {2, 3}};
  for (DType dtype : {DType::F32, DType::BF16, DType::F64})
    for (size_t n : {size_t(1), shapes.size()}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + ", " + std::to_string(n) + " inputs");
      std::vector<Shape> used(shapes.begin(), shapes.begin() + long(n));
      std::vector<Bytes> inputs;
      for (size_t k = 0; k < used.size(); ++k) {
        // magnitudes 1e-3 .. 1e3: the running sum rounds the small terms
        double scale = std::pow(10.0, double(k % 7) - 3.0);
        std::vector<float> v = rng.uniform(numel(used[k]), float(-scale), float(scale));
        if (dtype == DType::F64) {
          std::vector<double> d(v.begin(), v.end());
          for (double &x : d) x *= 1.0 + 1e-9; // bits f32 would not hold
          inputs.push_back(toBytes(d));
        } else {
          inputs.push_back(dtype == DType::BF16 ? bf16StorageBytes(v) : toBytes(v));
        }
      }
      Program fused = globalSumSquaresProgram(used, dtype, false);
      Program chained = globalSumSquaresProgram(used, dtype, true);
      ASSERT_EQ(fused.validate(), "");
      ASSERT_EQ(chained.validate(), "");
      RunResult f = runProgram(fused, inputs), c = runProgram(chained, inputs);
      ASSERT_TRUE(f.ok && c.ok) << f.err << c.err;
      EXPECT_EQ(f.outputs, c.outputs);
    }
}

/// Inputs for the fused-against-apart tests: n uniform values in [lo, hi)
/// as bf16 storage (`low`), f32, or f64 with bits an f32 would not hold.
Bytes exactnessValues(Rng &rng, DType dtype, int64_t n, float lo, float hi, bool low) {
  std::vector<float> v = rng.uniform(n, lo, hi);
  if (low) return bf16StorageBytes(v);
  if (dtype == DType::F64) {
    std::vector<double> d(v.begin(), v.end());
    for (double &x : d) x *= 1.0 + 1e-9;
    return toBytes(d);
  }
  return toBytes(v);
}

// loom-fuse-norm-grad-accumulate's exactness: the norm's gradient with the
// addend summed into dx gives the bits of the gradient, then an Add.
TEST(Norm, NormGradAddendIsTheAddAfter) {
  Rng rng;
  for (bool layerNorm : {false, true})
    for (DType dtype : {DType::F32, DType::F64})
      for (bool bf16 : {false, true}) {
        if (bf16 && dtype == DType::F64) continue;
        SCOPED_TRACE(std::string(layerNorm ? "layer_norm_grad " : "rms_norm_grad ") +
                     dtypeName(dtype) + (bf16 ? ", bf16 dy and dx" : ""));
        int64_t rows = 9, D = 40;
        auto values = [&](int64_t n, float lo, float hi, bool low) {
          return exactnessValues(rng, dtype, n, lo, hi, low);
        };
        std::vector<Bytes> inputs = {values(rows * D, -2, 2, false), values(D, 0.5, 1.5, false),
                                     values(rows * D, -1, 1, bf16),
                                     values(rows * D, -1e3, 1e3, false)};
        Program fused = normGradAddendProgram(layerNorm, rows, D, dtype, true, bf16);
        Program apart = normGradAddendProgram(layerNorm, rows, D, dtype, false, bf16);
        ASSERT_EQ(fused.validate(), "");
        ASSERT_EQ(apart.validate(), "");
        RunResult f = runProgram(fused, inputs), a = runProgram(apart, inputs);
        ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
        EXPECT_EQ(f.outputs, a.outputs);
      }
}

TEST(Norm, AddRmsNormIsTheAddThenTheNorm) {
  // AddRmsNorm's sum and norm are Add's and RmsNorm's bits: f32, f64, and a
  // bf16 sublayer output and norm (bf16 storage).
  Rng rng;
  for (DType dtype : {DType::F32, DType::F64})
    for (bool bf16 : {false, true}) {
      if (bf16 && dtype == DType::F64) continue;
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (bf16 ? ", bf16 b and y" : ""));
      int64_t rows = 7, D = 48;
      auto values = [&](int64_t n, float lo, float hi, bool low) {
        return exactnessValues(rng, dtype, n, lo, hi, low);
      };
      std::vector<Bytes> inputs = {values(rows * D, -3, 3, false), values(rows * D, -1, 1, bf16),
                                   values(D, 0.5, 1.5, false)};
      Program fused = addRmsNormProgram(rows, D, dtype, true, bf16);
      Program apart = addRmsNormProgram(rows, D, dtype, false, bf16);
      ASSERT_EQ(fused.validate(), "");
      ASSERT_EQ(apart.validate(), "");
      RunResult f = runProgram(fused, inputs), a = runProgram(apart, inputs);
      ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
      EXPECT_EQ(f.outputs, a.outputs);
    }
}

// A norm gradient that stores dx's rounded copy (storesRoundedDx) and
// reads x as bf16 storage gives the bits of the Casts it replaces: the copy
// is Cast(dx), dx and the weight gradients are those of the f32 x.
TEST(Norm, NormGradCopyIsTheCast) {
  Rng rng;
  for (bool layerNorm : {false, true})
    for (bool bf16X : {false, true}) {
      SCOPED_TRACE(std::string(layerNorm ? "layer_norm_grad" : "rms_norm_grad") +
                   (bf16X ? ", bf16 x" : ""));
      int64_t rows = 9, D = 40;
      std::vector<Bytes> inputs = normGradCopyInputs(rng, rows, D, bf16X, 1e3);
      Program fused = normGradCopyProgram(rows, D, layerNorm, true, bf16X);
      Program apart = normGradCopyProgram(rows, D, layerNorm, false, bf16X);
      ASSERT_EQ(fused.validate(), "");
      ASSERT_EQ(apart.validate(), "");
      RunResult f = runProgram(fused, inputs), a = runProgram(apart, inputs);
      ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
      EXPECT_EQ(f.outputs, a.outputs);
    }
}

TEST(Norm, NormGradCopyValidation) {
  auto verdict = [](std::vector<int64_t> ints, DType copyType, const Shape &copyShape) {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, {4, 8}), w = b.input(DType::F32, {8}),
             dy = b.input(DType::F32, {4, 8});
    b.instr(OpCode::RmsNormGrad, {x, w, dy},
            {b.output(DType::F32, {4, 8}), b.output(DType::F32, {8}),
             b.output(copyType, copyShape)},
            ints, {1e-6});
    return b.p.validate();
  };
  EXPECT_EQ(verdict({1}, DType::BF16, {4, 8}), "");
  std::string e = verdict({1}, DType::F32, {4, 8});
  EXPECT_NE(e.find("rounded copy must be bf16, got f32"), std::string::npos) << e;
  e = verdict({1}, DType::BF16, {8});
  EXPECT_NE(e.find("rounded copy has shape [8], expected [4,8]"), std::string::npos) << e;
  e = verdict({2}, DType::BF16, {4, 8});
  EXPECT_NE(e.find("int attribute must be 1"), std::string::npos) << e;
  // Without the flag a third output is an fp8 amax: one f32 element.
  e = verdict({}, DType::BF16, {4, 8});
  EXPECT_NE(e.find("amax output 0"), std::string::npos) << e;
}

TEST(Norm, AddRmsNormValidation) {
  auto verdict = [](DType sumType, const Shape &b, const Shape &w) {
    ProgramBuilder p;
    uint32_t a = p.input(DType::F32, {4, 8}), x = p.input(DType::F32, b),
             wt = p.input(DType::F32, w);
    p.instr(OpCode::AddRmsNorm, {a, x, wt},
            {p.output(sumType, {4, 8}), p.output(DType::F32, {4, 8})}, {}, {1e-6});
    return p.p.validate();
  };
  EXPECT_EQ(verdict(DType::F32, {4, 8}, {8}), "");
  std::string e = verdict(DType::F32, {1, 8}, {8}); // no broadcast: one shape
  EXPECT_NE(e.find("input 1 has shape [1,8], expected [4,8]"), std::string::npos) << e;
  e = verdict(DType::F32, {4, 8}, {4});
  EXPECT_NE(e.find("input 2 has shape [4], expected [8]"), std::string::npos) << e;
  e = verdict(DType::BF16, {4, 8}, {8}); // the sum the norm reads stays f32
  EXPECT_NE(e.find("dtypes differ"), std::string::npos) << e;
}

TEST(Norm, NormGradAddendValidation) {
  auto verdict = [](DType addend, const Shape &shape) {
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, {4, 8}), w = b.input(DType::F32, {8}),
             dy = b.input(DType::F32, {4, 8}), a = b.input(addend, shape);
    b.instr(OpCode::RmsNormGrad, {x, w, dy, a},
            {b.output(DType::F32, {4, 8}), b.output(DType::F32, {8})}, {}, {1e-6});
    return b.p.validate();
  };
  EXPECT_EQ(verdict(DType::F32, {4, 8}), "");
  std::string e = verdict(DType::F32, {8});
  EXPECT_NE(e.find("addend"), std::string::npos) << e;
  e = verdict(DType::BF16, {4, 8});
  EXPECT_NE(e.find("bf16"), std::string::npos) << e;
}

TEST(Norm, GlobalSumSquaresValidation) {
  auto verdict = [](std::vector<DType> ins, DType out, const Shape &outShape) {
    ProgramBuilder b;
    std::vector<uint32_t> xs;
    for (DType t : ins) xs.push_back(b.input(t, {4, 8}));
    b.instr(OpCode::GlobalSumSquares, xs, {b.output(out, outShape)});
    return b.p.validate();
  };
  EXPECT_EQ(verdict({DType::F32, DType::BF16, DType::F32}, DType::F32, {}), "");
  EXPECT_EQ(verdict({DType::F64}, DType::F64, {}), "");
  EXPECT_NE(verdict({}, DType::F32, {}).find("takes 1 or more inputs, got 0"), std::string::npos)
      << verdict({}, DType::F32, {});
  EXPECT_NE(verdict({DType::F32, DType::F64}, DType::F32, {}).find("input 1 is f64, the sum f32"),
            std::string::npos);
  EXPECT_NE(verdict({DType::F32}, DType::F32, {1}).find("output 0 has shape [1], expected []"),
            std::string::npos);
  EXPECT_NE(verdict({DType::I64}, DType::I64, {}).find("output must be f32 or f64"),
            std::string::npos);
  EXPECT_NE(verdict({DType::BF16}, DType::BF16, {}).find("output must be f32 or f64"),
            std::string::npos);
}

TEST(Norm, SumSquaresValidation) {
  auto verdict = [](DType in, const Shape &inShape, DType out, const Shape &outShape,
                    std::vector<int64_t> ints = {}) {
    ProgramBuilder b;
    uint32_t x = b.input(in, inShape);
    b.instr(OpCode::SumSquares, {x}, {b.output(out, outShape)}, std::move(ints));
    return b.p.validate();
  };
  EXPECT_EQ(verdict(DType::F32, {4, 8}, DType::F32, {}), "");
  EXPECT_EQ(verdict(DType::BF16, {4, 8}, DType::F32, {}), ""); // bf16 storage of x
  EXPECT_NE(verdict(DType::F32, {4, 8}, DType::F32, {1}).find("output 0 has shape [1], expected []"),
            std::string::npos);
  EXPECT_NE(verdict(DType::F32, {4, 8}, DType::F64, {}).find("dtypes differ"), std::string::npos);
  EXPECT_NE(verdict(DType::I64, {4, 8}, DType::I64, {}).find("operand must be f32 or f64"),
            std::string::npos);
  EXPECT_NE(verdict(DType::BF16, {4, 8}, DType::BF16, {}).find("dtypes differ"), std::string::npos);
  EXPECT_NE(verdict(DType::F32, {4, 8}, DType::F32, {}, {0}).find("takes 0 int attributes"),
            std::string::npos);
}

} // namespace
