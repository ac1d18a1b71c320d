//===- NcclCommunicatorTest.cpp - NCCL's first light on one GPU -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// NCCL refuses two ranks on one device, so on a one-GPU machine the NCCL
// communicator runs as a world of one: the rendezvous hands rank 0's
// unique id to itself, ncclCommInitRankConfig and ncclCommSplit build the
// (non-blocking) communicators, and every collective opcode runs through
// NCCL with the executor polling NCCL's asynchronous errors while it
// waits. A group of one makes each collective the identity, which the
// test checks bit for bit; then an abort ends the communicator and the
// next run fails with a one-line error instead of touching a destroyed
// communicator. What several GPUs would add (a real ring, peers that die)
// is not covered here. Skipped without a GPU.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "MultiProcessTestUtil.h"
#include "RuntimeTestUtil.h"
#include "loom/runtime/NcclCommunicator.h"
#include "loom/runtime/Rendezvous.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

TEST(NcclCommunicator, WorldOfOneRunsEveryCollective) {
  REQUIRE_GPU();
  std::string err;
  auto rv = Rendezvous::join(0, 1, "127.0.0.1", freePort(), 30, err);
  ASSERT_TRUE(rv) << err;
  auto comm = createNcclCommunicator(*rv, 0, 60, err);
  ASSERT_TRUE(comm) << err;
  EXPECT_STREQ(comm->transport(), "nccl");
  // Every opcode and layout: along dim 0 (NCCL's own layout) and dim 1 of
  // [2, 6] (through the staging buffer and strided copies). Mesh (pp, R,
  // S, cp, tp) all ones; the masks name dp_shard, then tp.
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {2, 6}, "x");
  int k = 0;
  auto add = [&](OpCode op, int64_t kind, int64_t dim, int64_t mask) {
    uint32_t y = b.output(DType::F32, {2, 6}, "y" + std::to_string(k++));
    b.instr(op, {x}, {y}, {kind, dim, 1, 1, 1, 1, 1, mask});
  };
  add(OpCode::AllReduce, 0, -1, 1 << 2);
  add(OpCode::AllReduce, 1, -1, 1 << 4);
  for (int64_t dim : {0, 1}) {
    add(OpCode::AllGather, 0, dim, 1 << 2);
    add(OpCode::ReduceScatter, 0, dim, 1 << 2);
    add(OpCode::ReduceScatter, 1, dim, 1 << 4);
    add(OpCode::AllToAll, 0, dim, 1 << 4);
  }
  add(OpCode::CollectivePermute, 0, 1, 1 << 3); // a ring of one: send to and receive from itself
  ASSERT_EQ(b.p.validate(), "");
  auto p = std::make_shared<Program>(b.p);
  auto exec = createRankExecutor(p, "cuda", 0, comm.get(), 0, err);
  ASSERT_TRUE(exec) << err;
  Rng rng;
  std::vector<float> in = rng.uniform(12);
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE(exec->setInput(0, in.data(), in.size() * 4, err)) << err;
    ASSERT_TRUE(exec->run(err)) << "run " << run << ": " << err;
    for (int o = 0; o < k; ++o) {
      std::vector<float> out(12);
      ASSERT_TRUE(exec->getOutput(size_t(o), out.data(), 48, err)) << err;
      EXPECT_EQ(out, in) << "output " << o << " (" << opcodeName(p->instrs[size_t(o)].op)
                         << "): a group of one is the identity";
    }
  }
  // Abort (what a failing peer or the watchdog does): the next run fails
  // with a one-line error and never calls into the destroyed communicator.
  comm->abort("test abort");
  EXPECT_FALSE(exec->run(err));
  EXPECT_NE(err.find("aborted"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

} // namespace
