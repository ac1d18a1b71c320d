//===- MatMulTest.cpp - Batched matmul against an fp64 reference ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// The error bound per element is relative to sum_k |a_ik b_kj| (the size of
// the terms, not of the possibly cancelling result): float accumulation of
// K terms stays within about sqrt(K) * 2^-24 of that in practice.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

struct MatMulCase {
  Shape a, b, out;
  bool ta, tb;
};

/// Runs the case on random data and checks every element.
void checkMatMul(const MatMulCase &c, Rng &rng) {
  SCOPED_TRACE("a " + std::to_string(c.a.size()) + "d " + std::to_string(numel(c.a)) + " b " +
               std::to_string(numel(c.b)) + " ta " + std::to_string(c.ta) + " tb " +
               std::to_string(c.tb));
  ProgramBuilder pb;
  uint32_t a = pb.input(DType::F32, c.a), b = pb.input(DType::F32, c.b);
  uint32_t o = pb.output(DType::F32, c.out);
  pb.instr(OpCode::MatMul, {a, b}, {o}, {c.ta, c.tb});
  auto av = rng.uniform(numel(c.a)), bv = rng.uniform(numel(c.b));
  RunResult r = runProgram(pb.p, {toBytes(av), toBytes(bv)});
  ASSERT_TRUE(r.ok) << r.err;
  auto got = r.out<float>();

  size_t ra = c.a.size(), rb = c.b.size(), ro = c.out.size();
  int64_t M = c.out[ro - 2], N = c.out[ro - 1];
  int64_t K = c.ta ? c.a[ra - 2] : c.a[ra - 1];
  Shape batch(c.out.begin(), c.out.end() - 2);
  Shape aBatch(c.a.begin(), c.a.end() - 2), bBatch(c.b.begin(), c.b.end() - 2);
  int64_t batches = numel(batch);
  double tol = 2e-7 * std::sqrt(double(std::max<int64_t>(K, 1))) + 1e-7;
  int64_t bad = 0;
  for (int64_t bi = 0; bi < batches && bad < 5; ++bi) {
    const float *A = av.data() + broadcastIndex(bi, batch, aBatch) * M * K;
    const float *B = bv.data() + broadcastIndex(bi, batch, bBatch) * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          double x = c.ta ? A[k * M + i] : A[i * K + k];
          double y = c.tb ? B[j * K + k] : B[k * N + j];
          sum += x * y;
          mag += std::fabs(x * y);
        }
        float g = got[(bi * M + i) * N + j];
        if (!(std::fabs(g - sum) <= tol * mag)) {
          ADD_FAILURE() << "batch " << bi << " [" << i << "," << j << "]: got " << g
                        << ", want " << sum << " (terms " << mag << ")";
          ++bad;
        }
      }
  }
}

TEST(MatMul, AllTransposeCombinations) {
  Rng rng;
  // 67 x 45 over K = 300 crosses the blocked kernel's tile edges (64, 128,
  // 256) and the register tile (4 x 16) with remainders.
  int64_t M = 67, K = 300, N = 45;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Shape a = ta ? Shape{K, M} : Shape{M, K}, b = tb ? Shape{N, K} : Shape{K, N};
      checkMatMul({a, b, {M, N}, ta, tb}, rng);
    }
}

TEST(MatMul, LargerThanOneTileInEveryDim) {
  Rng rng;
  checkMatMul({{130, 520}, {520, 260}, {130, 260}, false, false}, rng);
}

TEST(MatMul, BatchDimsBroadcast) {
  Rng rng;
  checkMatMul({{2, 1, 5, 7}, {3, 7, 4}, {2, 3, 5, 4}, false, false}, rng);
  checkMatMul({{4, 7, 5}, {1, 4, 7}, {4, 5, 4}, true, true}, rng);
  checkMatMul({{3, 1, 6, 8}, {1, 2, 8, 5}, {3, 2, 6, 5}, false, false}, rng);
}

TEST(MatMul, SharedWeightAcrossBatch) {
  Rng rng;
  // [B, T, K] x [K, N]: the linear-layer shape, run as one [B*T, K] product.
  checkMatMul({{3, 17, 33}, {33, 40}, {3, 17, 40}, false, false}, rng);
  checkMatMul({{3, 17, 33}, {40, 33}, {3, 17, 40}, false, true}, rng);
  // A transposed cannot fold the batch into rows.
  checkMatMul({{3, 33, 17}, {33, 40}, {3, 17, 40}, true, false}, rng);
}

TEST(MatMul, WeightGradientShapes) {
  Rng rng;
  // dW = x^T dy after codegen flattened the batch: [K, N] = [M, K]^T [M, N],
  // and dx = dy W^T in both weight layouts.
  checkMatMul({{51, 33}, {51, 40}, {33, 40}, true, false}, rng);
  checkMatMul({{3, 17, 40}, {33, 40}, {3, 17, 33}, false, true}, rng);
  checkMatMul({{3, 17, 40}, {40, 33}, {3, 17, 33}, false, false}, rng);
  // Rank 2 against rank 3, either side, with transposes: the result takes
  // the batch dims of the rank-3 operand.
  checkMatMul({{5, 7}, {3, 7, 4}, {3, 5, 4}, false, false}, rng);
  checkMatMul({{7, 5}, {3, 4, 7}, {3, 5, 4}, true, true}, rng);
  checkMatMul({{3, 7, 5}, {7, 4}, {3, 5, 4}, true, false}, rng);
  checkMatMul({{3, 7, 5}, {4, 7}, {3, 5, 4}, true, true}, rng);
}

TEST(MatMul, ManySmallBatches) {
  Rng rng;
  // Unfused attention scores: [B, H, T, D] x [B, H, S, D]^T.
  checkMatMul({{2, 6, 9, 8}, {2, 6, 11, 8}, {2, 6, 9, 11}, false, true}, rng);
}

TEST(MatMul, EmptyInnerDimGivesZeros) {
  ProgramBuilder pb;
  uint32_t a = pb.input(DType::F32, {3, 0}), b = pb.input(DType::F32, {0, 2});
  uint32_t o = pb.output(DType::F32, {3, 2});
  pb.instr(OpCode::MatMul, {a, b}, {o}, {0, 0});
  RunResult r = runProgram(pb.p, {Bytes(), Bytes()});
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out<float>(), std::vector<float>(6, 0.0f));
}

TEST(MatMul, SingleThreadMatchesPool) {
  Rng rng;
  ProgramBuilder pb;
  uint32_t a = pb.input(DType::F32, {70, 90}), b = pb.input(DType::F32, {90, 150});
  uint32_t o = pb.output(DType::F32, {70, 150});
  pb.instr(OpCode::MatMul, {a, b}, {o}, {0, 0});
  std::vector<Bytes> in = {toBytes(rng.uniform(70 * 90)), toBytes(rng.uniform(90 * 150))};
  RunResult one = runProgram(pb.p, in, 1), four = runProgram(pb.p, in, 4);
  ASSERT_TRUE(one.ok && four.ok) << one.err << four.err;
  EXPECT_EQ(one.outputs[0], four.outputs[0]); // tiles do not depend on the thread count
}

} // namespace

namespace {

/// bf16 bits of `v` rounded to nearest even (what the kernels store).
std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    h[i] = uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  return h;
}

} // namespace

TEST(MatMul, BiasIsTheUnfusedAddmmBitForBit) {
  // addmm under autocast: bf16 operands and bias, the bias added to the f32
  // accumulator and the sum rounded once. The fused MatMul must store the
  // very bits of MatMul (f32 result), Cast(bias), Add, Cast(bf16) in turn;
  // f32 GEMMs likewise equal MatMul then Add.
  Rng rng;
  const MatMulCase cases[] = {{{4, 9, 48}, {40, 48}, {4, 9, 40}, false, true},
                              {{2, 3, 16, 32}, {2, 3, 32, 24}, {2, 3, 16, 24}, false, false},
                              {{3, 0}, {0, 5}, {3, 5}, false, false}}; // K = 0: just the bias
  for (const MatMulCase &c : cases)
    for (DType dt : {DType::BF16, DType::F32}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " a " + std::to_string(numel(c.a)));
      int64_t n = c.out.back();
      auto av = rng.uniform(numel(c.a)), bv = rng.uniform(numel(c.b)), biasv = rng.uniform(n);
      auto bytes = [&](const std::vector<float> &v) {
        return dt == DType::BF16 ? toBytes(toBf16(v)) : toBytes(v);
      };
      std::vector<Bytes> inputs = {bytes(av), bytes(bv), bytes(biasv)};

      ProgramBuilder fused;
      uint32_t a = fused.input(dt, c.a), b = fused.input(dt, c.b), bias = fused.input(dt, {n});
      fused.instr(OpCode::MatMul, {a, b, bias}, {fused.output(dt, c.out)}, {c.ta, c.tb});
      ASSERT_EQ(fused.p.validate(), "");

      ProgramBuilder split;
      a = split.input(dt, c.a), b = split.input(dt, c.b), bias = split.input(dt, {n});
      uint32_t acc = split.temp(DType::F32, c.out), wideBias = bias;
      split.instr(OpCode::MatMul, {a, b}, {acc}, {c.ta, c.tb});
      if (dt == DType::BF16) {
        wideBias = split.temp(DType::F32, {n});
        split.instr(OpCode::Cast, {bias}, {wideBias});
      }
      uint32_t sum = dt == DType::BF16 ? split.temp(DType::F32, c.out) : split.output(dt, c.out);
      split.instr(OpCode::Add, {acc, wideBias}, {sum});
      if (dt == DType::BF16)
        split.instr(OpCode::Cast, {sum}, {split.output(dt, c.out)});
      ASSERT_EQ(split.p.validate(), "");

      RunResult rf = runProgram(fused.p, inputs), rs = runProgram(split.p, inputs);
      ASSERT_TRUE(rf.ok) << rf.err;
      ASSERT_TRUE(rs.ok) << rs.err;
      EXPECT_EQ(rf.outputs[0], rs.outputs[0]);
    }
}

TEST(MatMul, AddendIsMatMulThenAddBitForBit) {
  // A gradient sum fused into its GEMM (loom-fuse-matmul-accumulate): a
  // third input of the result's shape is added to the f32 (or f64)
  // accumulator and the sum rounded once, the bits of MatMul then Add.
  // bf16 operands with an f32 result (autocast's input gradients), f32 and
  // f64 products; a linear layer, a strided batch, one call per batch and
  // K = 0 (the addend itself).
  Rng rng;
  const MatMulCase cases[] = {{{4, 9, 48}, {40, 48}, {4, 9, 40}, false, true},
                              {{2, 3, 16, 32}, {2, 3, 32, 24}, {2, 3, 16, 24}, false, false},
                              {{2, 1, 5, 8}, {1, 3, 8, 16}, {2, 3, 5, 16}, false, false},
                              {{3, 0}, {0, 5}, {3, 5}, false, false}};
  for (const MatMulCase &c : cases)
    for (DType in : {DType::BF16, DType::F32, DType::F64}) {
      DType out = in == DType::BF16 ? DType::F32 : in;
      SCOPED_TRACE(std::string(dtypeName(in)) + " a " + std::to_string(numel(c.a)));
      auto bytes = [&](const std::vector<float> &v, DType dt) {
        if (dt == DType::BF16)
          return toBytes(toBf16(v));
        if (dt == DType::F64)
          return toBytes(std::vector<double>(v.begin(), v.end()));
        return toBytes(v);
      };
      std::vector<Bytes> inputs = {bytes(rng.uniform(numel(c.a)), in),
                                   bytes(rng.uniform(numel(c.b)), in),
                                   bytes(rng.uniform(numel(c.out)), out)};
      ProgramBuilder fused;
      uint32_t a = fused.input(in, c.a), b = fused.input(in, c.b), x = fused.input(out, c.out);
      fused.instr(OpCode::MatMul, {a, b, x}, {fused.output(out, c.out)}, {c.ta, c.tb});
      ASSERT_EQ(fused.p.validate(), "");
      ASSERT_TRUE(matMulAccumulates(fused.p, fused.p.instrs.back()));

      ProgramBuilder split;
      a = split.input(in, c.a), b = split.input(in, c.b), x = split.input(out, c.out);
      uint32_t product = split.temp(out, c.out);
      split.instr(OpCode::MatMul, {a, b}, {product}, {c.ta, c.tb});
      split.instr(OpCode::Add, {x, product}, {split.output(out, c.out)});
      ASSERT_EQ(split.p.validate(), "");

      RunResult rf = runProgram(fused.p, inputs), rs = runProgram(split.p, inputs);
      ASSERT_TRUE(rf.ok) << rf.err;
      ASSERT_TRUE(rs.ok) << rs.err;
      EXPECT_EQ(rf.outputs[0], rs.outputs[0]);
    }
}

TEST(MatMul, AddendMustHaveTheResultsShapeAndAWideDtype) {
  ProgramBuilder b;
  uint32_t a = b.input(DType::BF16, {3, 8}), w = b.input(DType::BF16, {8, 5});
  uint32_t x = b.input(DType::F32, {5, 3}), o = b.output(DType::F32, {3, 5});
  b.instr(OpCode::MatMul, {a, w, x}, {o}, {0, 0});
  EXPECT_NE(b.p.validate().find("addend [5,3] f32 must have the result's shape and dtype [3,5] f32"),
            std::string::npos)
      << b.p.validate();
  b.p.buffers[x].shape = {3, 5};
  EXPECT_EQ(b.p.validate(), "");
  b.p.buffers[x].dtype = b.p.buffers[o].dtype = DType::BF16;
  b.p.buffers[x].bytes = b.p.buffers[o].bytes = 30;
  EXPECT_NE(b.p.validate().find("an addend needs an f32 or f64 result, not bf16"),
            std::string::npos)
      << b.p.validate();
}

TEST(MatMul, ColumnSumsOfBAreTheReduceAndCastTheyReplace) {
  // A second output with ints [transA, transB, 1]: B's column sums,
  // rounded to bf16, the bits of Reduce (sum over rows, f32) then Cast.
  Rng rng;
  const int64_t K = 37, M = 5, N = 11;
  std::vector<Bytes> inputs = {bf16StorageBytes(rng.uniform(K * M)),
                               bf16StorageBytes(rng.uniform(K * N))};
  ProgramBuilder fused;
  uint32_t x = fused.input(DType::BF16, {K, M}), dy = fused.input(DType::BF16, {K, N});
  fused.instr(OpCode::MatMul, {x, dy},
              {fused.output(DType::BF16, {M, N}), fused.output(DType::BF16, {1, N})}, {1, 0, 1});
  ASSERT_EQ(fused.p.validate(), "");
  ProgramBuilder apart;
  x = apart.input(DType::BF16, {K, M}), dy = apart.input(DType::BF16, {K, N});
  uint32_t sums = apart.temp(DType::F32, {1, N});
  apart.instr(OpCode::MatMul, {x, dy}, {apart.output(DType::BF16, {M, N})}, {1, 0});
  apart.instr(OpCode::Reduce, {dy}, {sums}, {0, 0});
  apart.instr(OpCode::Cast, {sums}, {apart.output(DType::BF16, {1, N})});
  ASSERT_EQ(apart.p.validate(), "");
  RunResult a = runProgram(fused.p, inputs), b = runProgram(apart.p, inputs);
  ASSERT_TRUE(a.ok && b.ok) << a.err << b.err;
  EXPECT_EQ(a.outputs, b.outputs);
}

TEST(MatMul, ColumnSumsNeedTheirFlagAndABf16WeightGradient) {
  ProgramBuilder b;
  uint32_t x = b.input(DType::BF16, {8, 3}), dy = b.input(DType::BF16, {8, 5});
  uint32_t dw = b.output(DType::BF16, {3, 5}), db = b.output(DType::BF16, {5});
  b.instr(OpCode::MatMul, {x, dy}, {dw, db}, {1, 0});
  EXPECT_NE(b.p.validate().find("a second output (B's column sums) comes with ints [transA, transB, 1]"),
            std::string::npos)
      << b.p.validate();
  b.p.instrs[0].ints = {1, 0, 1};
  EXPECT_EQ(b.p.validate(), "");
  b.p.buffers[db].shape = {4};
  b.p.buffers[db].bytes = 8;
  EXPECT_NE(b.p.validate().find("B's column sums must be 5 bf16 values, got [4] bf16"),
            std::string::npos)
      << b.p.validate();
  b.p.buffers[db].shape = {5};
  b.p.buffers[db].bytes = 10;
  b.p.instrs[0].in = {dy, dy};
  b.p.instrs[0].ints = {1, 1, 1};
  EXPECT_NE(b.p.validate().find("need bf16 rank-2 operands, an untransposed B"), std::string::npos)
      << b.p.validate();
}

TEST(MatMul, BiasMustBeAVectorOfTheResultDtype) {
  ProgramBuilder b;
  uint32_t a = b.input(DType::BF16, {3, 8}), w = b.input(DType::BF16, {8, 5});
  uint32_t bias = b.input(DType::BF16, {3}), o = b.output(DType::BF16, {3, 5});
  b.instr(OpCode::MatMul, {a, w, bias}, {o}, {0, 0});
  EXPECT_NE(b.p.validate().find("bias [3] must be a vector over the result's last dim [3,5]"),
            std::string::npos)
      << b.p.validate();
  b.p.buffers[bias].shape = {5};
  b.p.buffers[bias].bytes = 10;
  EXPECT_EQ(b.p.validate(), "");
  b.p.buffers[bias].dtype = DType::F32;
  b.p.buffers[bias].bytes = 20;
  EXPECT_NE(b.p.validate().find("bias must have the result's dtype bf16, got f32"),
            std::string::npos)
      << b.p.validate();
}
