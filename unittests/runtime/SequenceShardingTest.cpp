//===- SequenceShardingTest.cpp - Ring shifts, rank slices, vocabulary shards -===//
//
// Part of loom, under the Apache License v2.0.
//
// The runtime side of context, sequence and loss parallelism (issue 18) on
// the CPU backend: CollectivePermute and ShardSlice on a simulated world of
// a (cp = 3) x (tp = 2) mesh, checked element by element against the
// definition in Program.h; the vocabulary-shard kernels against the
// whole-vocabulary ones (the shards' embeddings add up to the lookup, and
// their cross-entropy parts to CrossEntropy and its gradient); and the
// validation of each opcode's operands.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"
#include "loom/runtime/Communicator.h"
#include "loom/runtime/SimulatedRanks.h"

#include <cmath>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

constexpr int64_t kCpBit = 1 << 3, kTpBit = 1 << 4;

/// ints for the mesh (pp, R, S, cp, tp) = (1, 1, 1, 3, 2): rank = c * 2 + t.
std::vector<int64_t> meshInts(int64_t dim, int64_t mask) { return {0, dim, 1, 1, 1, 3, 2, mask}; }

Program oneOp(OpCode op, DType t, const Shape &in, const Shape &out, std::vector<int64_t> ints) {
  ProgramBuilder b;
  uint32_t x = b.input(t, in, "x");
  uint32_t y = b.output(t, out, "y");
  b.instr(op, {x}, {y}, std::move(ints));
  return b.p;
}

/// Runs `p` on a world of 6 ranks of `backend` with per-rank raw inputs.
std::vector<Bytes> runWorld(const Program &p, const std::vector<Bytes> &inputs,
                            const std::string &backend = "cpu") {
  std::string err;
  auto ranks = SimulatedRanks::create(std::make_shared<Program>(p), 6, backend, 1, err);
  EXPECT_TRUE(ranks) << err;
  if (!ranks)
    return {};
  for (int r = 0; r < 6; ++r)
    EXPECT_TRUE(ranks->rank(r).setInput(0, inputs[r].data(), inputs[r].size(), err)) << err;
  EXPECT_TRUE(ranks->run(err)) << err;
  std::vector<Bytes> outs(6);
  const BufferDesc &y = p.buffers[p.outputs[0]];
  for (int r = 0; r < 6; ++r) {
    outs[r].resize(y.bytes);
    EXPECT_TRUE(ranks->rank(r).getOutput(0, outs[r].data(), y.bytes, err)) << err;
  }
  return outs;
}

TEST(SequenceSharding, CollectivePermuteShiftsAroundTheGroupRing) {
  Rng rng;
  std::vector<std::vector<float>> x;
  std::vector<Bytes> in;
  for (int r = 0; r < 6; ++r) {
    x.push_back(rng.uniform(10));
    in.push_back(toBytes(x.back()));
  }
  // Over cp (3 ranks that share t): rank (c, t) receives (c - shift, t).
  for (int64_t shift : {1, -1, 2, 4}) {
    auto outs = runWorld(oneOp(OpCode::CollectivePermute, DType::F32, {2, 5}, {2, 5},
                               meshInts(shift, kCpBit)),
                         in);
    ASSERT_EQ(outs.size(), 6u);
    for (int r = 0; r < 6; ++r) {
      int c = r / 2, t = r % 2, from = ((c - int(shift)) % 3 + 3) % 3 * 2 + t;
      EXPECT_EQ(fromBytes<float>(outs[r]), x[from]) << "rank " << r << " shift " << shift;
    }
  }
  // Over cp and tp together: one ring of 6 in rank order.
  auto outs = runWorld(oneOp(OpCode::CollectivePermute, DType::F32, {2, 5}, {2, 5},
                             meshInts(1, kCpBit | kTpBit)),
                       in);
  ASSERT_EQ(outs.size(), 6u);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(fromBytes<float>(outs[r]), x[(r + 5) % 6]);
}

TEST(SequenceSharding, ShardSliceKeepsTheRanksOwnRowsOfAnyDtype) {
  // A replicated table [6, 2]: over cp each rank keeps rows 2c, 2c + 1; the
  // bytes of an i64 and a bool table move alike.
  std::vector<int64_t> ids = {10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61};
  std::vector<Bytes> in(6, toBytes(ids));
  auto outs = runWorld(oneOp(OpCode::ShardSlice, DType::I64, {6, 2}, {2, 2}, meshInts(0, kCpBit)),
                       in);
  ASSERT_EQ(outs.size(), 6u);
  for (int r = 0; r < 6; ++r) {
    int c = r / 2;
    std::vector<int64_t> want(ids.begin() + 4 * c, ids.begin() + 4 * c + 4);
    EXPECT_EQ(fromBytes<int64_t>(outs[r]), want) << "rank " << r;
  }
  // Along dim 1 of [3, 4] bools over tp: column pair t.
  Bytes bits = {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0};
  outs = runWorld(oneOp(OpCode::ShardSlice, DType::Bool, {3, 4}, {3, 2}, meshInts(1, kTpBit)),
                  std::vector<Bytes>(6, bits));
  ASSERT_EQ(outs.size(), 6u);
  for (int r = 0; r < 6; ++r) {
    int t = r % 2;
    Bytes want;
    for (int row = 0; row < 3; ++row)
      for (int k = 0; k < 2; ++k) want.push_back(bits[size_t(row * 4 + t * 2 + k)]);
    EXPECT_EQ(outs[r], want) << "rank " << r;
  }
}

TEST(SequenceSharding, ShardSliceNeedsARank) {
  // One executor without a world cannot know which slice is its own.
  std::string err;
  auto exec = createExecutor(
      std::make_shared<Program>(oneOp(OpCode::ShardSlice, DType::F32, {6}, {2}, meshInts(0, kCpBit))),
      "cpu", 1, err);
  EXPECT_FALSE(exec);
  EXPECT_NE(err.find("6-rank mesh"), std::string::npos) << err;
}

/// Columns [first, first + cols) of a row-major [N, V] matrix.
std::vector<float> columns(const std::vector<float> &m, int64_t N, int64_t V, int64_t first,
                           int64_t cols) {
  std::vector<float> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = first; v < first + cols; ++v) out.push_back(m[size_t(n * V + v)]);
  return out;
}

TEST(SequenceSharding, VocabularyShardsOfTheEmbeddingAddUpToTheLookup) {
  Rng rng;
  const int64_t V = 8, D = 3, Vl = 4;
  std::vector<float> table = rng.uniform(V * D);
  std::vector<int64_t> ids = {0, 5, 3, 7, 4, 4};
  std::vector<float> dy = rng.uniform(6 * D);
  std::vector<float> sum(6 * D, 0.0f), dtable(V * D, 0.0f);
  for (int64_t shard = 0; shard < 2; ++shard) {
    ProgramBuilder b;
    uint32_t t = b.input(DType::F32, {Vl, D}, "table"), i = b.input(DType::I64, {6}, "ids");
    uint32_t f = b.input(DType::I64, {1}, "first"), g = b.input(DType::F32, {6, D}, "dy");
    uint32_t y = b.output(DType::F32, {6, D}, "rows"), dt = b.output(DType::F32, {Vl, D}, "dtable");
    b.instr(OpCode::VocabShardEmbedding, {t, i, f}, {y}, {V});
    b.instr(OpCode::VocabShardEmbeddingGrad, {g, i, f}, {dt});
    std::vector<float> mine(table.begin() + shard * Vl * D, table.begin() + (shard + 1) * Vl * D);
    RunResult r = runProgram(b.p, {toBytes(mine), toBytes(ids), toBytes(std::vector<int64_t>{shard * Vl}),
                                   toBytes(dy)});
    ASSERT_TRUE(r.ok) << r.err;
    std::vector<float> rows = r.out<float>(0), grad = r.out<float>(1);
    for (size_t k = 0; k < sum.size(); ++k) sum[k] += rows[k];
    std::copy(grad.begin(), grad.end(), dtable.begin() + shard * Vl * D);
  }
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(sum[n * D + d], table[ids[n] * D + d]);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t d = 0; d < D; ++d) {
      double want = 0;
      for (int64_t n = 0; n < 6; ++n)
        if (ids[n] == v) want += dy[n * D + d];
      EXPECT_NEAR(dtable[v * D + d], want, 1e-6) << "row " << v;
    }
}

TEST(SequenceSharding, IdsOutsideTheWholeVocabularyAreBadData) {
  // Shard rows [4, 8) of a 12-word vocabulary: ids 0..11 are fine (rows of
  // zeros where another rank holds them), 12 is an error, as for Embedding.
  ProgramBuilder b;
  uint32_t t = b.input(DType::F32, {4, 2}), i = b.input(DType::I64, {3}), f = b.input(DType::I64, {1});
  uint32_t y = b.output(DType::F32, {3, 2});
  b.instr(OpCode::VocabShardEmbedding, {t, i, f}, {y}, {12});
  std::vector<float> table = {1, 2, 3, 4, 5, 6, 7, 8};
  RunResult ok = runProgram(b.p, {toBytes(table), toBytes(std::vector<int64_t>{11, 5, 0}),
                                  toBytes(std::vector<int64_t>{4})});
  ASSERT_TRUE(ok.ok) << ok.err;
  EXPECT_EQ(ok.out<float>(), (std::vector<float>{0, 0, 3, 4, 0, 0}));
  RunResult bad = runProgram(b.p, {toBytes(table), toBytes(std::vector<int64_t>{5, 12, 0}),
                                   toBytes(std::vector<int64_t>{4})});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.err.find("id 12 at position 1 out of range [0, 12)"), std::string::npos) << bad.err;
  // A target outside the vocabulary, likewise.
  ProgramBuilder c;
  uint32_t l = c.input(DType::F32, {2, 4}), tt = c.input(DType::I64, {2});
  uint32_t cf = c.input(DType::I64, {1}), m = c.input(DType::F32, {2});
  uint32_t s = c.output(DType::F32, {2}), p = c.output(DType::F32, {2});
  c.instr(OpCode::VocabShardCrossEntropy, {l, tt, cf, m}, {s, p}, {12});
  bad = runProgram(c.p, {toBytes(table), toBytes(std::vector<int64_t>{3, -1}),
                         toBytes(std::vector<int64_t>{4}), toBytes(std::vector<float>{0, 0})});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.err.find("target -1 at row 1 out of range [0, 12)"), std::string::npos) << bad.err;
}

TEST(SequenceSharding, VocabularyShardsOfCrossEntropyAddUpToIt) {
  Rng rng;
  const int64_t N = 5, V = 9, Vl = 3;
  std::vector<float> logits = rng.uniform(N * V, -3, 3);
  std::vector<int64_t> targets = {0, 8, 4, 3, 5};
  // The whole-vocabulary loss and gradient (dloss = 1).
  ProgramBuilder whole;
  uint32_t x = whole.input(DType::F32, {N, V}), t = whole.input(DType::I64, {N});
  uint32_t one = whole.input(DType::F32, {});
  uint32_t loss = whole.output(DType::F32, {}), dx = whole.output(DType::F32, {N, V});
  whole.instr(OpCode::CrossEntropy, {x, t}, {loss});
  whole.instr(OpCode::CrossEntropyGrad, {x, t, one}, {dx});
  RunResult ref = runProgram(whole.p, {toBytes(logits), toBytes(targets), toBytes(std::vector<float>{1})});
  ASSERT_TRUE(ref.ok) << ref.err;
  // Every row's maximum over the whole vocabulary is the shift.
  std::vector<float> shift(N);
  for (int64_t n = 0; n < N; ++n)
    shift[n] = *std::max_element(logits.begin() + n * V, logits.begin() + (n + 1) * V);
  std::vector<double> sumexp(N, 0), target(N, 0);
  std::vector<std::vector<float>> parts;
  for (int64_t shard = 0; shard < V / Vl; ++shard) {
    ProgramBuilder b;
    uint32_t l = b.input(DType::F32, {N, Vl}), tt = b.input(DType::I64, {N});
    uint32_t f = b.input(DType::I64, {1}), m = b.input(DType::F32, {N});
    uint32_t s = b.output(DType::F32, {N}), p = b.output(DType::F32, {N});
    b.instr(OpCode::VocabShardCrossEntropy, {l, tt, f, m}, {s, p}, {V});
    parts.push_back(columns(logits, N, V, shard * Vl, Vl));
    RunResult r = runProgram(b.p, {toBytes(parts.back()), toBytes(targets),
                                   toBytes(std::vector<int64_t>{shard * Vl}), toBytes(shift)});
    ASSERT_TRUE(r.ok) << r.err;
    for (int64_t n = 0; n < N; ++n) {
      sumexp[n] += r.out<float>(0)[n];
      target[n] += r.out<float>(1)[n];
    }
  }
  double mean = 0;
  for (int64_t n = 0; n < N; ++n) mean += (std::log(sumexp[n]) - target[n]) / N;
  EXPECT_NEAR(mean, ref.out<float>(0)[0], 1e-6);
  // The gradient of the mean through log and the sums: dsumexp = 1 / (N S),
  // dtarget = -1 / N; each shard's part is its columns of CrossEntropyGrad.
  std::vector<float> dSum(N), dTarget(N, -1.0f / N);
  for (int64_t n = 0; n < N; ++n) dSum[n] = float(1.0 / (N * sumexp[n]));
  std::vector<float> refGrad = ref.out<float>(1);
  for (int64_t shard = 0; shard < V / Vl; ++shard) {
    ProgramBuilder b;
    uint32_t l = b.input(DType::F32, {N, Vl}), tt = b.input(DType::I64, {N});
    uint32_t f = b.input(DType::I64, {1}), m = b.input(DType::F32, {N});
    uint32_t ds = b.input(DType::F32, {N}), dp = b.input(DType::F32, {N});
    uint32_t g = b.output(DType::F32, {N, Vl});
    b.instr(OpCode::VocabShardCrossEntropyGrad, {l, tt, f, m, ds, dp}, {g});
    RunResult r = runProgram(b.p, {toBytes(parts[shard]), toBytes(targets),
                                   toBytes(std::vector<int64_t>{shard * Vl}), toBytes(shift),
                                   toBytes(dSum), toBytes(dTarget)});
    ASSERT_TRUE(r.ok) << r.err;
    EXPECT_TRUE(allClose(r.out<float>(), toDouble(columns(refGrad, N, V, shard * Vl, Vl)), 1e-6, 1e-5))
        << "shard " << shard;
  }
}

TEST(SequenceSharding, OperandsAreValidated) {
  // A permute moves f32, like every collective.
  EXPECT_NE(oneOp(OpCode::CollectivePermute, DType::BF16, {4}, {4}, meshInts(1, kCpBit))
                .validate()
                .find("collectives move f32"),
            std::string::npos);
  // A slice must divide by the group.
  std::string why = oneOp(OpCode::ShardSlice, DType::F32, {5, 2}, {1, 2}, meshInts(0, kCpBit)).validate();
  EXPECT_NE(why.find("shard_slice dim 0 of size 5 does not divide by the group size 3"),
            std::string::npos) << why;
  // Its output keeps every other dim.
  why = oneOp(OpCode::ShardSlice, DType::F32, {6, 2}, {2, 1}, meshInts(0, kCpBit)).validate();
  EXPECT_NE(why.find("has shape [2,1], expected [2,2]"), std::string::npos) << why;
  // The vocabulary ops take a one-element offset and [N] rows.
  ProgramBuilder b;
  uint32_t l = b.input(DType::F32, {4, 3}), t = b.input(DType::I64, {4});
  uint32_t f = b.input(DType::I64, {2}), m = b.input(DType::F32, {4});
  uint32_t s = b.output(DType::F32, {4}), p = b.output(DType::F32, {4});
  b.instr(OpCode::VocabShardCrossEntropy, {l, t, f, m}, {s, p}, {12});
  why = b.p.validate();
  EXPECT_NE(why.find("first must be one i64 or i32 element"), std::string::npos) << why;
}

// The CUDA backend: the same bytes for the rank-dependent ops (simulated
// ranks on one GPU, the device-memory communicator for the permute), and
// the vocabulary shards' kernels against the CPU's. Skipped without a GPU.
TEST(SequenceSharding, CudaShardSliceAndPermuteEqualTheCpu) {
  REQUIRE_GPU();
  Rng rng;
  std::vector<Bytes> table(6, toBytes(rng.uniform(6 * 5))), own;
  for (int r = 0; r < 6; ++r) own.push_back(toBytes(rng.uniform(12)));
  struct Case {
    Program p;
    std::vector<Bytes> in;
  };
  std::vector<Case> cases = {
      {oneOp(OpCode::ShardSlice, DType::F32, {6, 5}, {2, 5}, meshInts(0, kCpBit)), table},
      {oneOp(OpCode::ShardSlice, DType::F32, {6, 5}, {3, 5}, meshInts(0, kTpBit)), table},
      {oneOp(OpCode::ShardSlice, DType::Bool, {3, 4}, {3, 2}, meshInts(1, kTpBit)),
       std::vector<Bytes>(6, Bytes{1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0})},
      {oneOp(OpCode::CollectivePermute, DType::F32, {3, 4}, {3, 4}, meshInts(1, kCpBit)), own},
      {oneOp(OpCode::CollectivePermute, DType::F32, {3, 4}, {3, 4}, meshInts(-2, kCpBit | kTpBit)),
       own},
  };
  for (const Case &c : cases) {
    auto cpu = runWorld(c.p, c.in, "cpu"), gpu = runWorld(c.p, c.in, "cuda");
    ASSERT_EQ(cpu.size(), 6u);
    EXPECT_EQ(cpu, gpu) << opcodeName(c.p.instrs[0].op);
  }
}

TEST(SequenceSharding, CudaVocabularyShardsMatchTheCpu) {
  REQUIRE_GPU();
  Rng rng;
  const int64_t N = 37, Vl = 300, D = 8;
  std::vector<int64_t> ids, targets, first = {250};
  for (int64_t n = 0; n < N; ++n) {
    ids.push_back(int64_t(rng.uniform(1, 0, 800)[0]));
    targets.push_back(n % 3 ? 250 + n * 7 % Vl : 900); // some rows' target is elsewhere
  }
  std::vector<float> shift = rng.uniform(N, 0.5, 1.5);
  ProgramBuilder b;
  uint32_t t = b.input(DType::F32, {Vl, D}), i = b.input(DType::I64, {N}), f = b.input(DType::I64, {1});
  uint32_t dy = b.input(DType::F32, {N, D}), x = b.input(DType::F32, {N, Vl}), tt = b.input(DType::I64, {N});
  uint32_t m = b.input(DType::F32, {N}), ds = b.input(DType::F32, {N}), dp = b.input(DType::F32, {N});
  uint32_t rows = b.output(DType::F32, {N, D}), dt = b.output(DType::F32, {Vl, D});
  uint32_t s = b.output(DType::F32, {N}), p = b.output(DType::F32, {N}), dx = b.output(DType::F32, {N, Vl});
  b.instr(OpCode::VocabShardEmbedding, {t, i, f}, {rows}, {800});
  b.instr(OpCode::VocabShardEmbeddingGrad, {dy, i, f}, {dt});
  b.instr(OpCode::VocabShardCrossEntropy, {x, tt, f, m}, {s, p}, {1000});
  b.instr(OpCode::VocabShardCrossEntropyGrad, {x, tt, f, m, ds, dp}, {dx});
  std::vector<Bytes> in = {toBytes(rng.uniform(Vl * D)), toBytes(ids), toBytes(first),
                           toBytes(rng.uniform(N * D)), toBytes(rng.uniform(N * Vl, -3, 3)),
                           toBytes(targets), toBytes(shift), toBytes(rng.uniform(N)),
                           toBytes(rng.uniform(N))};
  RunResult cpu = runProgram(b.p, in, 2, "cpu"), gpu = runProgram(b.p, in, 2, "cuda");
  ASSERT_TRUE(cpu.ok) << cpu.err;
  ASSERT_TRUE(gpu.ok) << gpu.err;
  EXPECT_EQ(cpu.out<float>(0), gpu.out<float>(0)); // rows move as they are
  EXPECT_EQ(cpu.out<float>(1), gpu.out<float>(1)); // position order, double, one rounding
  for (size_t k = 2; k < 5; ++k) // sums of exponentials in another (fixed) order
    EXPECT_TRUE(allClose(gpu.out<float>(k), toDouble(cpu.out<float>(k)), 1e-6, 1e-7)) << "output " << k;
}

} // namespace
