//===- PointToPointTest.cpp - Grouped send/recv in every communicator -----===//
//
// Part of loom, under the Apache License v2.0.
//
// Communicator::sendRecv has NCCL's group semantics: one call posts sends
// and receives together and returns when all are done, and the transfers
// between two ranks match in posting order. The same exchange pattern runs
// on the in-process communicator (threads), the socket communicator
// (threads over TCP), the device-memory communicator (simulated ranks on
// one GPU) and NCCL (a world of one, which may send to itself): a ring
// where every rank sends to its right neighbour and receives from its left
// one in one call (which deadlocks without group semantics), two messages
// to one peer matched in order across calls, and a size disagreement,
// which fails naming both ranks. The CUDA cases skip without a GPU.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "MultiProcessTestUtil.h"
#include "RuntimeTestUtil.h"
#include "loom/runtime/InProcessCommunicator.h"
#include "loom/runtime/NcclCommunicator.h"
#include "loom/runtime/Rendezvous.h"
#include "loom/runtime/SocketCommunicator.h"
#ifdef LOOM_HAVE_CUDA
#include "loom/runtime/DeviceMemoryCommunicator.h"
#include <cuda_runtime.h>
#endif

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

/// Where a rank's bytes live: host vectors, or device buffers behind them.
struct Buffers {
  virtual ~Buffers() = default;
  virtual void *alloc(size_t bytes) = 0;
  virtual void put(void *dst, const std::vector<float> &v) = 0;
  virtual std::vector<float> get(const void *src, size_t n) = 0;
};

struct HostBuffers : Buffers {
  std::vector<std::vector<char>> owned;
  void *alloc(size_t bytes) override {
    owned.emplace_back(bytes);
    return owned.back().data();
  }
  void put(void *dst, const std::vector<float> &v) override {
    std::memcpy(dst, v.data(), v.size() * 4);
  }
  std::vector<float> get(const void *src, size_t n) override {
    std::vector<float> v(n);
    std::memcpy(v.data(), src, n * 4);
    return v;
  }
};

#ifdef LOOM_HAVE_CUDA
struct DeviceBuffers : Buffers {
  std::vector<void *> owned;
  ~DeviceBuffers() override {
    for (void *p : owned) cudaFree(p);
  }
  void *alloc(size_t bytes) override {
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    owned.push_back(p);
    return p;
  }
  void put(void *dst, const std::vector<float> &v) override {
    EXPECT_EQ(cudaMemcpy(dst, v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> get(const void *src, size_t n) override {
    std::vector<float> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), src, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};
#endif

std::vector<float> pattern(int from, int to, int k, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(from * 1000 + to * 100 + k * 10) + float(i) / 8;
  return v;
}

/// Rank `rank` of `world`: a ring exchange in one call, then two sends to
/// the left neighbour in two calls, received by it in one call. Returns
/// "" or what went wrong.
std::string ringThenOrdered(int rank, int world, Communicator &comm, Buffers &mem) {
  const size_t n = 1000; // > one frame's worth of small-buffer paths
  int right = (rank + 1) % world, left = (rank + world - 1) % world;
  std::string err;
  void *out = mem.alloc(n * 4), *in = mem.alloc(n * 4);
  mem.put(out, pattern(rank, right, 0, n));
  // Receive first in the list: the order within a call does not matter.
  if (!comm.sendRecv(rank, {P2POp::recvFrom(left, in, n * 4), P2POp::sendTo(right, out, n * 4)},
                     err))
    return "ring: " + err;
  if (mem.get(in, n) != pattern(left, rank, 0, n))
    return "ring: wrong bytes from rank " + std::to_string(left);
  // Two messages to the left in two calls; the left rank takes both from
  // its right in one call and must see them in posting order.
  void *a = mem.alloc(n * 4), *b = mem.alloc(n * 4);
  mem.put(a, pattern(rank, left, 1, n));
  mem.put(b, pattern(rank, left, 2, n));
  void *ra = mem.alloc(n * 4), *rb = mem.alloc(n * 4);
  std::vector<P2POp> both = {P2POp::recvFrom(right, ra, n * 4), P2POp::recvFrom(right, rb, n * 4)};
  if (world == 1) { // a world of one sends to itself: everything in one call
    both.push_back(P2POp::sendTo(left, a, n * 4));
    both.push_back(P2POp::sendTo(left, b, n * 4));
    if (!comm.sendRecv(rank, both, err))
      return "ordered: " + err;
  } else {
    // Even ranks send first, odd ranks receive first: either way round,
    // the pair's posting order decides what lands where.
    auto sends = [&] {
      return comm.sendRecv(rank, {P2POp::sendTo(left, a, n * 4)}, err) &&
             comm.sendRecv(rank, {P2POp::sendTo(left, b, n * 4)}, err);
    };
    if (rank % 2 == 0 && !sends())
      return "ordered sends: " + err;
    if (!comm.sendRecv(rank, both, err))
      return "ordered receives: " + err;
    if (rank % 2 == 1 && !sends())
      return "ordered sends: " + err;
  }
  if (mem.get(ra, n) != pattern(right, rank, 1, n) || mem.get(rb, n) != pattern(right, rank, 2, n))
    return "ordered: messages from rank " + std::to_string(right) + " out of order";
  return "";
}

TEST(PointToPoint, InProcessRingAndOrder) {
  for (int world : {1, 2, 3}) {
    InProcessCommunicator comm(world);
    std::vector<std::string> errs(static_cast<size_t>(world));
    runRanks(world, [&](int r) {
      HostBuffers mem;
      errs[size_t(r)] = ringThenOrdered(r, world, comm, mem);
    });
    for (int r = 0; r < world; ++r) EXPECT_EQ(errs[size_t(r)], "") << world << " ranks, rank " << r;
  }
}

TEST(PointToPoint, InProcessSizeMismatchNamesBothRanks) {
  InProcessCommunicator comm(2);
  std::vector<std::string> errs(2);
  runRanks(2, [&](int r) {
    std::vector<float> buf(8);
    if (r == 0)
      comm.sendRecv(0, {P2POp::sendTo(1, buf.data(), 32)}, errs[0]);
    else
      comm.sendRecv(1, {P2POp::recvFrom(0, buf.data(), 16)}, errs[1]);
  });
  for (const std::string &e : errs)
    EXPECT_NE(e.find("transfer #0 from rank 0 to rank 1: rank 0 sends 32 bytes, rank 1 receives 16"),
              std::string::npos)
        << e;
}

TEST(PointToPoint, InProcessCollectivesMeetPerGroup) {
  // Ranks 0 and 1 (pp stage 0) and 2 and 3 (stage 1) each all-reduce over
  // their own dp_shard pair a different number of times, as pipeline
  // stages running different programs do; a world-wide barrier would hang.
  InProcessCommunicator comm(4);
  Instr I;
  I.op = OpCode::AllReduce;
  I.ints = {0, -1, 2, 1, 2, 1, 1, 1 << 2}; // mesh (pp 2, dp_shard 2), over dp_shard
  std::vector<std::string> errs(4);
  std::vector<float> last(4);
  runRanks(4, [&](int r) {
    int times = r < 2 ? 3 : 1;
    for (int k = 0; k < times; ++k) {
      float in = float(r + k), out = 0;
      if (!comm.collective(r, I, {1}, {1}, &in, &out, errs[size_t(r)]))
        return;
      last[size_t(r)] = out;
    }
  });
  for (const std::string &e : errs) EXPECT_EQ(e, "");
  EXPECT_EQ(last[0], 0.f + 1.f + 2 * 2); // (0 + 2) + (1 + 2) at k = 2
  EXPECT_EQ(last[1], last[0]);
  EXPECT_EQ(last[2], 2.f + 3.f);
  EXPECT_EQ(last[3], last[2]);
}

TEST(PointToPoint, SocketRingAndOrder) {
  for (int world : {2, 3}) {
    int port = freePort();
    std::vector<std::string> errs(static_cast<size_t>(world));
    runRanks(world, [&](int r) {
      auto rv = Rendezvous::join(r, world, "127.0.0.1", port, 10, errs[size_t(r)]);
      auto comm = rv ? SocketCommunicator::create(*rv, 10, errs[size_t(r)]) : nullptr;
      if (!comm)
        return;
      HostBuffers mem;
      errs[size_t(r)] = ringThenOrdered(r, world, *comm, mem);
    });
    for (int r = 0; r < world; ++r) EXPECT_EQ(errs[size_t(r)], "") << world << " ranks, rank " << r;
  }
}

TEST(PointToPoint, SocketLargeTransfersBothWaysInOneCall) {
  // 8 MiB each way: the call must move both directions at once.
  int port = freePort();
  std::vector<std::string> errs(2);
  std::vector<float> got(2);
  runRanks(2, [&](int r) {
    auto rv = Rendezvous::join(r, 2, "127.0.0.1", port, 10, errs[size_t(r)]);
    auto comm = rv ? SocketCommunicator::create(*rv, 20, errs[size_t(r)]) : nullptr;
    if (!comm)
      return;
    std::vector<float> out(size_t(1) << 21, float(r + 1)), in(out.size());
    if (comm->sendRecv(r, {P2POp::sendTo(1 - r, out.data(), out.size() * 4),
                           P2POp::recvFrom(1 - r, in.data(), in.size() * 4)},
                       errs[size_t(r)]))
      got[size_t(r)] = in.back();
  });
  EXPECT_EQ(errs[0], "");
  EXPECT_EQ(errs[1], "");
  EXPECT_EQ(got[0], 2.0f);
  EXPECT_EQ(got[1], 1.0f);
}

TEST(PointToPoint, SocketSizeMismatchAndLostPeerAreNamed) {
  int port = freePort();
  std::vector<std::string> errs(3);
  runRanks(3, [&](int r) {
    auto rv = Rendezvous::join(r, 3, "127.0.0.1", port, 10, errs[size_t(r)]);
    auto comm = rv ? SocketCommunicator::create(*rv, 10, errs[size_t(r)]) : nullptr;
    if (!comm || r == 2)
      return; // rank 2 leaves: its connections close
    std::vector<float> buf(8);
    if (r == 0) {
      comm->sendRecv(0, {P2POp::sendTo(1, buf.data(), 32)}, errs[0]);
      comm->sendRecv(0, {P2POp::recvFrom(2, buf.data(), 32)}, errs[0]);
    } else {
      comm->sendRecv(1, {P2POp::recvFrom(0, buf.data(), 16)}, errs[1]);
    }
  });
  EXPECT_EQ(errs[0], "rank 2 closed its connection (it exited or died)");
  EXPECT_NE(errs[1].find("rank 0's transfer #0 has 32 bytes; rank 1 expected transfer #0 of 16 "
                         "bytes"),
            std::string::npos)
      << errs[1];
}

TEST(PointToPoint, DeviceMemoryRingAndOrder) {
  REQUIRE_GPU();
#ifdef LOOM_HAVE_CUDA
  for (int world : {1, 2, 3}) {
    std::string err;
    auto comm = createDeviceMemoryCommunicator(world, err);
    ASSERT_TRUE(comm) << err;
    std::vector<std::string> errs(static_cast<size_t>(world));
    runRanks(world, [&](int r) {
      DeviceBuffers mem;
      errs[size_t(r)] = ringThenOrdered(r, world, *comm, mem);
    });
    for (int r = 0; r < world; ++r) EXPECT_EQ(errs[size_t(r)], "") << world << " ranks, rank " << r;
  }
#endif
}

TEST(PointToPoint, NcclWorldOfOneSendsToItself) {
  REQUIRE_GPU();
#ifdef LOOM_HAVE_CUDA
  std::string err;
  auto rv = Rendezvous::join(0, 1, "127.0.0.1", freePort(), 30, err);
  ASSERT_TRUE(rv) << err;
  auto comm = createNcclCommunicator(*rv, 0, 60, err);
  if (!comm && err.find("no NCCL") != std::string::npos)
    GTEST_SKIP() << err;
  ASSERT_TRUE(comm) << err;
  DeviceBuffers mem;
  EXPECT_EQ(ringThenOrdered(0, 1, *comm, mem), "");
#endif
}

} // namespace
