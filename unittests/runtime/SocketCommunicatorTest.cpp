//===- SocketCommunicatorTest.cpp - Collectives over TCP ------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Ranks are threads on 127.0.0.1, each with its own rendezvous and socket
// communicator. Every collective, on every group of a 2 x 2 mesh, must give
// bit for bit what the in-process communicator gives; a peer that leaves,
// hangs or runs another collective fails the call with its rank named.
//===----------------------------------------------------------------------===//
#include "MultiProcessTestUtil.h"
#include "RuntimeTestUtil.h"
#include "loom/runtime/InProcessCommunicator.h"
#include "loom/runtime/Rendezvous.h"
#include "loom/runtime/SocketCommunicator.h"

#include <atomic>
#include <chrono>
#include <cstring>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

constexpr int64_t kRepBit = 1 << 1, kShardBit = 1 << 2;

Instr collective(OpCode op, int64_t kind, int64_t dim, int64_t mask) {
  Instr I;
  I.op = op;
  I.ints = {kind, dim, 1, 2, 2, 1, 1, mask}; // mesh (pp, R, S, cp, tp) = (1, 2, 2, 1, 1)
  return I;
}

struct Case {
  Instr instr;
  Shape in, out;
};

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (int64_t mask : {kRepBit, kShardBit, kRepBit | kShardBit}) {
    int64_t n = mask == (kRepBit | kShardBit) ? 4 : 2;
    for (int64_t kind : {0, 1}) {
      cs.push_back({collective(OpCode::AllReduce, kind, -1, mask), {3, 50}, {3, 50}});
      cs.push_back({collective(OpCode::ReduceScatter, kind, 1, mask), {3, 20 * n}, {3, 20}});
    }
    cs.push_back({collective(OpCode::AllGather, 0, 0, mask), {7, 5}, {7 * n, 5}});
  }
  return cs;
}

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// Joins `world` thread-ranks and runs body(rank, comm) on each.
void withSocketWorld(int world, double timeoutS,
                     const std::function<void(int, SocketCommunicator *, std::string &)> &body,
                     std::vector<std::string> &errs) {
  int port = freePort();
  errs.assign(world, "");
  runRanks(world, [&](int r) {
    auto rv = Rendezvous::join(r, world, "127.0.0.1", port, 10, errs[r]);
    if (!rv)
      return;
    auto comm = SocketCommunicator::create(*rv, timeoutS, errs[r]);
    if (!comm)
      return;
    body(r, comm.get(), errs[r]);
  });
}

TEST(SocketCommunicator, BitIdenticalToInProcess) {
  Rng rng;
  std::vector<Case> cs = cases();
  std::vector<std::vector<std::vector<float>>> inputs(cs.size());
  for (size_t c = 0; c < cs.size(); ++c)
    for (int r = 0; r < 4; ++r) inputs[c].push_back(rng.uniform(numel(cs[c].in), -10, 10));

  // In process: four threads, one InProcessCommunicator.
  std::vector<std::vector<std::vector<float>>> want(cs.size(), std::vector<std::vector<float>>(4));
  InProcessCommunicator local(4);
  std::vector<std::string> localErrs(4);
  runRanks(4, [&](int r) {
    for (size_t c = 0; c < cs.size(); ++c) {
      want[c][r].resize(size_t(numel(cs[c].out)));
      if (!local.collective(r, cs[c].instr, cs[c].in, cs[c].out, inputs[c][r].data(),
                            want[c][r].data(), localErrs[r]))
        return;
    }
  });
  for (const std::string &e : localErrs) ASSERT_EQ(e, "");

  std::vector<std::vector<std::vector<float>>> got(cs.size(), std::vector<std::vector<float>>(4));
  std::vector<std::string> errs;
  withSocketWorld(4, 10, [&](int r, SocketCommunicator *comm, std::string &err) {
    for (size_t c = 0; c < cs.size(); ++c) {
      got[c][r].resize(size_t(numel(cs[c].out)));
      if (!comm->collective(r, cs[c].instr, cs[c].in, cs[c].out, inputs[c][r].data(),
                            got[c][r].data(), err))
        return;
    }
  }, errs);
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errs[r], "") << "rank " << r;
  for (size_t c = 0; c < cs.size(); ++c)
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(std::memcmp(got[c][r].data(), want[c][r].data(), got[c][r].size() * 4), 0)
          << "case " << c << " (" << opcodeName(cs[c].instr.op) << ") rank " << r;
}

TEST(SocketCommunicator, LargeBuffersBothWays) {
  // 8 MiB each way at once: progress must not wait for the other side to read.
  Instr I = collective(OpCode::AllReduce, 0, -1, kRepBit | kShardBit);
  Shape shape = {1 << 21};
  std::vector<std::string> errs;
  std::vector<float> result(4);
  withSocketWorld(4, 20, [&](int r, SocketCommunicator *comm, std::string &err) {
    std::vector<float> in(size_t(1) << 21, float(r + 1)), out(in.size());
    if (comm->collective(r, I, shape, shape, in.data(), out.data(), err))
      result[r] = out.back();
  }, errs);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(errs[r], "");
    EXPECT_EQ(result[r], 10.0f);
  }
}

TEST(SocketCommunicator, PeerThatLeavesIsNamed) {
  Instr I = collective(OpCode::AllReduce, 0, -1, kRepBit | kShardBit);
  Shape shape = {4};
  std::vector<std::string> errs;
  int port = freePort();
  errs.assign(4, "");
  std::atomic<int> failed{0};
  runRanks(4, [&](int r) {
    auto rv = Rendezvous::join(r, 4, "127.0.0.1", port, 10, errs[r]);
    auto comm = rv ? SocketCommunicator::create(*rv, 10, errs[r]) : nullptr;
    if (!comm || r == 3)
      return; // rank 3 exits: its sockets close
    std::vector<float> in(4, 1), out(4);
    comm->collective(r, I, shape, shape, in.data(), out.data(), errs[r]);
    // Stay connected until every survivor has failed: otherwise a survivor
    // that fails first and exits is what the later ones see.
    ++failed;
    while (failed < 3) std::this_thread::yield();
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(errs[r], "rank 3 closed its connection (it exited or died)") << "rank " << r;
}

TEST(SocketCommunicator, HungPeerTimesOut) {
  Instr I = collective(OpCode::AllReduce, 0, -1, kShardBit);
  Shape shape = {4};
  std::vector<std::string> errs;
  auto t0 = std::chrono::steady_clock::now();
  withSocketWorld(4, 0.5, [&](int r, SocketCommunicator *comm, std::string &err) {
    if (r == 1) {
      // Hangs (here: sleeps past rank 0's timeout) before its collective.
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    std::vector<float> in(4, 1), out(4);
    comm->collective(r, I, shape, shape, in.data(), out.data(), err);
  }, errs);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
  EXPECT_EQ(errs[0], "rank 1 did not take part within 0.5 s (hung, or stuck elsewhere)");
  EXPECT_EQ(errs[2], "");
  EXPECT_EQ(errs[3], "");
}

TEST(SocketCommunicator, RanksAtDifferentCollectivesFail) {
  Shape shape = {2, 4};
  std::vector<std::string> errs;
  withSocketWorld(2, 5, [&](int r, SocketCommunicator *comm, std::string &err) {
    Instr I = r == 0 ? collective(OpCode::AllReduce, 0, -1, kRepBit)
                     : collective(OpCode::AllReduce, 1, -1, kRepBit);
    I.ints[3] = 2, I.ints[4] = 1; // mesh (1, 2, 1, 1, 1)
    std::vector<float> in(8, 1), out(8);
    comm->collective(r, I, shape, shape, in.data(), out.data(), err);
  }, errs);
  EXPECT_NE(errs[0].find("rank 1 is at a different collective"), std::string::npos) << errs[0];
  EXPECT_NE(errs[1].find("rank 0 is at a different collective"), std::string::npos) << errs[1];
}

} // namespace
