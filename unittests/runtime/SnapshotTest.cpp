//===- SnapshotTest.cpp - Outputs set aside while runs go on --------------===//
//
// Part of loom, under the Apache License v2.0.
//
// --async-checkpoint sets the training state aside (Executor::
// snapshotOutputs) and copies it to the host on the writer's thread while
// the next steps overwrite the originals. The snapshot must keep the values
// of the moment it was taken, on the CPU (a host copy) and on the GPU (a
// device copy read over a stream of its own, from another thread, while
// run() goes on).
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include <thread>

namespace loom::rt::test {
namespace {

constexpr int64_t kN = 1 << 16;

/// out0 = a + b, out1 = a * b.
struct SumAndProduct {
  SumAndProduct() {
    a = b.input(DType::F32, {kN}, "a");
    c = b.input(DType::F32, {kN}, "b");
    b.instr(OpCode::Add, {a, c}, {b.output(DType::F32, {kN}, "sum")});
    b.instr(OpCode::Mul, {a, c}, {b.output(DType::F32, {kN}, "product")});
  }
  ProgramBuilder b;
  uint32_t a, c;
};

std::vector<float> get(Executor &e, size_t out) {
  std::vector<float> v(kN);
  std::string err;
  EXPECT_TRUE(e.getOutput(out, v.data(), v.size() * 4, err)) << err;
  return v;
}

void checkSnapshotKeepsItsMoment(const std::string &backend) {
  Rng rng;
  SumAndProduct prog;
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(prog.b.p), backend, 2, err);
  ASSERT_TRUE(exec) << err;
  std::vector<float> x = rng.uniform(kN), y = rng.uniform(kN), z = rng.uniform(kN);
  ASSERT_TRUE(exec->setInput(0, x.data(), kN * 4, err) && exec->setInput(1, y.data(), kN * 4, err) &&
              exec->run(err))
      << err;
  std::vector<float> sum = get(*exec, 0), product = get(*exec, 1);
  ASSERT_TRUE(exec->snapshotOutputs({1, 0}, err)) << err; // out of order on purpose
  EXPECT_GE(exec->snapshotBytes(), uint64_t(2 * kN * 4));

  // Runs overwrite the outputs while another thread reads the snapshot.
  std::vector<float> readProduct(kN), readSum(kN);
  std::string readErr;
  bool readOk = false;
  std::thread reader([&] {
    readOk = exec->readSnapshot(0, readProduct.data(), kN * 4, readErr) &&
             exec->readSnapshot(1, readSum.data(), kN * 4, readErr);
  });
  bool runsOk = exec->setInput(0, z.data(), kN * 4, err);
  for (int i = 0; i < 20 && runsOk; ++i) runsOk = exec->run(err);
  reader.join();
  ASSERT_TRUE(runsOk) << err;
  ASSERT_TRUE(readOk) << readErr;
  EXPECT_EQ(readProduct, product);
  EXPECT_EQ(readSum, sum);
  EXPECT_NE(get(*exec, 0), sum) << "the runs after the snapshot saw new inputs";

  // Misuse is refused with a message.
  std::vector<float> small(8);
  EXPECT_FALSE(exec->readSnapshot(0, small.data(), small.size() * 4, err));
  EXPECT_NE(err.find("snapshot entry 0"), std::string::npos) << err;
  EXPECT_FALSE(exec->readSnapshot(2, readSum.data(), kN * 4, err));
  EXPECT_FALSE(exec->snapshotOutputs({5}, err));
  EXPECT_NE(err.find("output 5"), std::string::npos) << err;
}

TEST(Snapshot, CpuKeepsTheValuesOfItsMoment) { checkSnapshotKeepsItsMoment("cpu"); }

TEST(Snapshot, CudaKeepsTheValuesOfItsMoment) {
  REQUIRE_GPU();
  checkSnapshotKeepsItsMoment("cuda");
}

} // namespace
} // namespace loom::rt::test
