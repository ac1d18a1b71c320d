//===- ExecutorTest.cpp - Creating and running executors ------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

TEST(Executor, UnknownBackendIsNamed) {
  Rng rng;
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(tinyLanguageModel(rng)), "tpu", 1, err);
  EXPECT_EQ(exec, nullptr);
#ifdef LOOM_HAVE_CUDA
  EXPECT_EQ(err, "unknown backend 'tpu' (available: cpu, cuda)");
#else
  EXPECT_EQ(err, "unknown backend 'tpu' (available: cpu)");
#endif
}

TEST(Executor, InvalidProgramIsRefusedAtCreation) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.instrs[2].ints = {1, 1};
  std::string err;
  EXPECT_EQ(createExecutor(std::make_shared<Program>(p), "cpu", 1, err), nullptr);
  EXPECT_EQ(err.rfind("invalid program: instr 2 (matmul): inner dims differ", 0), 0u) << err;
}

TEST(Executor, UnsupportedDTypeIsRefusedAtCreation) {
  ProgramBuilder b;
  uint32_t x = b.input(DType::BF16, {2, 3});
  b.instr(OpCode::Softmax, {x}, {b.output(DType::BF16, {2, 3})}, {1});
  std::string err;
  EXPECT_EQ(createExecutor(std::make_shared<Program>(b.p), "cpu", 1, err), nullptr);
  EXPECT_EQ(err, "instr 0 (softmax): the cpu backend supports operands of f32/f64, not bf16");
}

TEST(Executor, InputAndOutputSizesAreChecked) {
  Rng rng;
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(tinyLanguageModel(rng)), "cpu", 2, err);
  ASSERT_NE(exec, nullptr) << err;
  std::vector<int64_t> ids(5, 0);
  EXPECT_FALSE(exec->setInput(0, ids.data(), 40, err));
  EXPECT_EQ(err, "input 0 'input_ids' [6] i64 has 48 bytes, not 40");
  EXPECT_FALSE(exec->setInput(2, ids.data(), 40, err));
  EXPECT_EQ(err, "input index 2 out of range (the program has 2 inputs)");
  float loss;
  EXPECT_FALSE(exec->getOutput(1, &loss, 8, err));
  EXPECT_EQ(err, "output 1 'loss' [] f32 has 4 bytes, not 8");
}

/// The tiny model recomputed in double from the program's own constants.
std::vector<double> referenceLogits(const Program &p, const std::vector<int64_t> &ids,
                                    double &loss, const std::vector<int64_t> &targets) {
  auto weights = [&](uint32_t id) {
    const BufferDesc &b = p.buffers[id];
    std::vector<float> v(size_t(b.numElements()));
    std::memcpy(v.data(), p.constants.data() + b.offset, b.bytes);
    return v;
  };
  std::vector<float> wte = weights(2), norm = weights(3), head = weights(4);
  int64_t N = int64_t(ids.size()), V = p.buffers[2].shape[0], D = p.buffers[2].shape[1];
  const double kPi = 3.14159265358979323846;
  std::vector<double> logits;
  loss = 0;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> h(static_cast<size_t>(D));
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(wte[ids[n] * D + d]) * wte[ids[n] * D + d];
    for (int64_t d = 0; d < D; ++d) h[d] = wte[ids[n] * D + d] / std::sqrt(ss / D + 1e-6) * norm[d];
    std::vector<double> row;
    for (int64_t v = 0; v < V; ++v) {
      double z = 0;
      for (int64_t d = 0; d < D; ++d) z += h[d] * head[v * D + d];
      row.push_back(0.5 * z * (1 + std::tanh(std::sqrt(2 / kPi) * (z + 0.044715 * z * z * z))));
    }
    double mx = *std::max_element(row.begin(), row.end()), sum = 0;
    for (double z : row) sum += std::exp(z - mx);
    loss += (mx + std::log(sum) - row[targets[n]]) / double(N);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

TEST(Executor, TinyModelEndToEnd) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  auto ids = rng.ints(6, 0, 10), targets = rng.ints(6, 0, 10);
  RunResult r = runProgram(p, {toBytes(ids), toBytes(targets)});
  ASSERT_TRUE(r.ok) << r.err;
  double loss;
  std::vector<double> logits = referenceLogits(p, ids, loss, targets);
  EXPECT_TRUE(allClose(r.out<float>(0), logits, 1e-6, 1e-6));
  EXPECT_TRUE(allClose(r.out<float>(1), {loss}, 1e-6));
}

TEST(Executor, ResultsDoNotDependOnThreadCountOrRepeats) {
  Rng rng;
  Program p = tinyLanguageModel(rng, 64, 300, 48);
  std::vector<Bytes> in = {toBytes(rng.ints(64, 0, 299)), toBytes(rng.ints(64, 0, 299))};
  RunResult one = runProgram(p, in, 1), four = runProgram(p, in, 4);
  ASSERT_TRUE(one.ok && four.ok) << one.err << four.err;
  EXPECT_EQ(one.outputs, four.outputs);

  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(p), "cpu", 2, err);
  ASSERT_NE(exec, nullptr) << err;
  for (size_t i = 0; i < in.size(); ++i) ASSERT_TRUE(exec->setInput(i, in[i].data(), in[i].size(), err));
  for (int rep = 0; rep < 2; ++rep) {
    ASSERT_TRUE(exec->run(err)) << err;
    float loss;
    ASSERT_TRUE(exec->getOutput(1, &loss, 4, err)) << err;
    EXPECT_EQ(toBytes(std::vector<float>{loss}), one.outputs[1]);
  }
}

} // namespace
