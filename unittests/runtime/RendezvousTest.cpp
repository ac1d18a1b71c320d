//===- RendezvousTest.cpp - Joining a job over TCP ------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Ranks are threads on 127.0.0.1. The exchanges deliver every rank's bytes
// in rank order; a rank that never arrives, a rank 0 that is not there,
// and ranks that disagree about the world are one-line errors within the
// timeout, naming the address and the ranks.
//===----------------------------------------------------------------------===//
#include "MultiProcessTestUtil.h"
#include "loom/runtime/Rendezvous.h"

#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <memory>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(Rendezvous, ExchangesBytesInRankOrder) {
  const int world = 4;
  int port = freePort();
  std::vector<std::string> errs(world);
  std::vector<std::vector<std::string>> gathered(world), allGathered(world);
  std::vector<std::string> broadcast(world);
  runRanks(world, [&](int r) {
    auto rv = Rendezvous::join(r, world, "127.0.0.1", port, 10, errs[r]);
    if (!rv)
      return;
    std::string big(100000 + size_t(r), char('a' + r)); // larger than one socket buffer
    broadcast[r] = r == 0 ? "from rank 0" : "";
    if (!rv->gather(big, gathered[r], errs[r]) || !rv->broadcast(broadcast[r], errs[r]) ||
        !rv->allGather("rank" + std::to_string(r), allGathered[r], errs[r]) ||
        !rv->barrier(errs[r]))
      return;
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errs[r], "") << "rank " << r;
    EXPECT_EQ(broadcast[r], "from rank 0");
    ASSERT_EQ(allGathered[r].size(), size_t(world));
    for (int k = 0; k < world; ++k) EXPECT_EQ(allGathered[r][k], "rank" + std::to_string(k));
  }
  ASSERT_EQ(gathered[0].size(), size_t(world));
  for (int k = 0; k < world; ++k)
    EXPECT_EQ(gathered[0][k], std::string(100000 + size_t(k), char('a' + k)));
  EXPECT_TRUE(gathered[1].empty());
}

TEST(Rendezvous, MissingRankTimesOutNamingIt) {
  int port = freePort();
  std::vector<std::string> errs(2);
  auto t0 = Clock::now();
  // World of 3; rank 2 never starts.
  runRanks(2, [&](int r) { Rendezvous::join(r, 3, "127.0.0.1", port, 0.5, errs[r]); });
  EXPECT_LT(secondsSince(t0), 5.0);
  EXPECT_EQ(errs[0], "rendezvous at 127.0.0.1:" + std::to_string(port) +
                         ": rank 2 of 3 did not arrive within 0.5 s");
  EXPECT_EQ(errs[1], errs[0]); // rank 0 tells the ranks that came why
}

TEST(Rendezvous, NoRankZeroIsATimeout) {
  int port = freePort();
  std::string err;
  auto t0 = Clock::now();
  EXPECT_FALSE(Rendezvous::join(1, 2, "127.0.0.1", port, 0.3, err));
  EXPECT_LT(secondsSince(t0), 5.0);
  EXPECT_EQ(err.rfind("rendezvous: rank 1 cannot reach rank 0 at 127.0.0.1:" +
                          std::to_string(port) + " within 0.3 s (",
                      0),
            0u)
      << err;
}

TEST(Rendezvous, RanksMustAgreeOnTheWorld) {
  int port = freePort();
  std::vector<std::string> errs(2);
  runRanks(2, [&](int r) { Rendezvous::join(r, r == 0 ? 2 : 3, "127.0.0.1", port, 5, errs[r]); });
  std::string want = "rank 1 says the world has 3 ranks, rank 0 says 2";
  EXPECT_NE(errs[0].find(want), std::string::npos) << errs[0];
  EXPECT_NE(errs[1].find(want), std::string::npos) << errs[1];
}

TEST(Rendezvous, LostRankIsNamed) {
  int port = freePort();
  std::vector<std::string> errs(3);
  std::vector<int> lost(3, -2);
  std::atomic<int> done{0};
  runRanks(3, [&](int r) {
    auto rv = Rendezvous::join(r, 3, "127.0.0.1", port, 5, errs[r]);
    if (!rv || r == 2)
      return; // rank 2 leaves: its connection closes
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    lost[r] = rv->lostPeer();
    std::vector<std::string> all;
    rv->gather("x", all, errs[r]);
    // Rank 1 stays connected until rank 0 is done, or rank 0 would see it go too.
    ++done;
    while (done < 2) std::this_thread::yield();
  });
  EXPECT_EQ(lost[0], 2);
  EXPECT_EQ(lost[1], -1);
  EXPECT_EQ(errs[0], "rank 2 closed its connection (it exited or died)");
  EXPECT_EQ(errs[1], "");
}

} // namespace
