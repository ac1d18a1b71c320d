//===- CpuAffinityTest.cpp - CPU sets for local ranks, pinned threads -----===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "cpu/ThreadPool.h"
#include "loom/runtime/CpuAffinity.h"

#include <gtest/gtest.h>

#include <mutex>
#include <sched.h>
#include <set>
#include <thread>

using namespace loom::rt;

namespace {

/// `cores` physical cores with `smt` threads each, numbered as Linux does
/// (core c's siblings are c, c + cores, ...), the first half of the cores
/// on node 0 and the rest on node 1 when `nodes` is 2.
std::vector<LogicalCpu> host(int cores, int smt, int nodes) {
  std::vector<LogicalCpu> cpus;
  for (int t = 0; t < smt; ++t)
    for (int c = 0; c < cores; ++c) {
      LogicalCpu cpu;
      cpu.id = t * cores + c;
      cpu.core = c;
      cpu.node = nodes == 2 && c >= cores / 2 ? 1 : 0;
      cpus.push_back(cpu);
    }
  return cpus;
}

std::vector<std::vector<int>> partition(const std::vector<LogicalCpu> &cpus, int ranks,
                                        int perRank, RankCpuSets *sets = nullptr) {
  RankCpuSets out;
  std::string err;
  EXPECT_TRUE(partitionCpus(cpus, ranks, perRank, out, err)) << err;
  if (sets)
    *sets = out;
  return out.ranks;
}

using Sets = std::vector<std::vector<int>>;

TEST(CpuAffinity, OneCpuPerRankTakesWholeCoresOnOneNode) {
  // The GPU host of bench/pp: 16 CPUs; as 8 cores x 2 threads on 2 nodes.
  RankCpuSets s;
  EXPECT_EQ(partition(host(8, 2, 2), 2, 1, &s), (Sets{{0}, {1}}));
  EXPECT_TRUE(s.wholeCores);
  EXPECT_EQ(s.nodes, 1);
  // Without SMT, 16 cores: still the first two.
  EXPECT_EQ(partition(host(16, 1, 1), 2, 1), (Sets{{0}, {1}}));
}

TEST(CpuAffinity, RanksKeepToOneNodeWhenOneHasEnough) {
  RankCpuSets s;
  EXPECT_EQ(partition(host(8, 2, 2), 2, 4, &s), (Sets{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_TRUE(s.wholeCores);
  EXPECT_EQ(s.nodes, 2);
  // Node 0 has one core left after rank 0: rank 1 starts on node 1.
  EXPECT_EQ(partition(host(8, 2, 2), 2, 3), (Sets{{0, 1, 2}, {4, 5, 6}}));
  // Four ranks of two.
  EXPECT_EQ(partition(host(8, 2, 2), 4, 2), (Sets{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  // Five ranks of three on 16 cores, 8 per node: the fifth spans the nodes.
  EXPECT_EQ(partition(host(16, 1, 2), 5, 3),
            (Sets{{0, 1, 2}, {3, 4, 5}, {8, 9, 10}, {11, 12, 13}, {6, 7, 14}}));
}

TEST(CpuAffinity, SmtSiblingsOnlyWhenCoresRunOut) {
  RankCpuSets s;
  // 2 x 8 threads on 8 cores x 2: every CPU, a core's two siblings in one rank.
  EXPECT_EQ(partition(host(8, 2, 2), 2, 8, &s),
            (Sets{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}}));
  EXPECT_FALSE(s.wholeCores);
  // 3 ranks of 1 on 1 core x 4 threads.
  EXPECT_EQ(partition(host(1, 4, 1), 3, 1, &s), (Sets{{0}, {1}, {2}}));
  EXPECT_FALSE(s.wholeCores);
}

TEST(CpuAffinity, TooFewCpusIsAnError) {
  RankCpuSets s;
  std::string err;
  EXPECT_FALSE(partitionCpus(host(8, 2, 2), 3, 6, s, err));
  EXPECT_EQ(err, "pinning 3 ranks x 6 threads needs 18 CPUs; this process may run on 16 (0-15)");
  // taskset -c 0 with two ranks.
  std::vector<LogicalCpu> one = {LogicalCpu{}};
  EXPECT_FALSE(partitionCpus(one, 2, 1, s, err));
  EXPECT_EQ(err, "pinning 2 ranks x 1 thread needs 2 CPUs; this process may run on 1 (0)");
  EXPECT_FALSE(partitionCpus(one, 0, 1, s, err));
}

TEST(CpuAffinity, CpuListsRoundTrip) {
  EXPECT_EQ(formatCpuList({3, 0, 1, 2, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({}), "");
  std::vector<int> cpus;
  std::string err;
  ASSERT_TRUE(parseCpuList("0-3,8,10-11", cpus, err)) << err;
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  ASSERT_TRUE(parseCpuList("5,1", cpus, err)) << err;
  EXPECT_EQ(cpus, (std::vector<int>{1, 5}));
  for (const char *bad : {"", "a", "3-1", "1,", "1-", "-1", "2x", "1,,2"}) {
    EXPECT_FALSE(parseCpuList(bad, cpus, err)) << bad;
    EXPECT_EQ(err, std::string("'") + bad + "' is not a CPU list such as 0-3,8");
  }
}

TEST(CpuAffinity, ThisHostPartitionsItsOwnMask) {
  std::vector<LogicalCpu> cpus;
  std::string err;
  ASSERT_TRUE(readAllowedCpus(cpus, err)) << err;
  ASSERT_FALSE(cpus.empty());
  EXPECT_EQ(int(cpus.size()), int(currentThreadCpus().size()));
  RankCpuSets s;
  ASSERT_TRUE(partitionCpus(cpus, int(cpus.size()), 1, s, err)) << err;
  std::set<int> seen;
  for (const auto &set : s.ranks) seen.insert(set.begin(), set.end());
  EXPECT_EQ(seen.size(), cpus.size()); // disjoint, and every CPU used
}

TEST(CpuAffinity, PinnedThreadRunsWhereItWasPut) {
  std::vector<int> mine = currentThreadCpus();
  ASSERT_FALSE(mine.empty());
  int last = mine.back();
  std::vector<int> seen;
  int ran = -1;
  std::thread t([&] {
    std::string err;
    ASSERT_TRUE(pinCurrentThread({last}, err)) << err;
    seen = currentThreadCpus();
    ran = sched_getcpu();
  });
  t.join();
  EXPECT_EQ(seen, std::vector<int>{last});
  EXPECT_EQ(ran, last);
  EXPECT_EQ(currentThreadCpus(), mine); // the caller kept its mask
}

TEST(CpuAffinity, PoolWorkersRunOnTheirCpus) {
  std::vector<int> mine = currentThreadCpus();
  if (mine.size() < 2)
    GTEST_SKIP() << "needs 2 CPUs";
  std::vector<int> cpus = {mine[0], mine[1]};
  ThreadPool pool(2, cpus);
  std::mutex mu;
  std::set<int> workerCpus;
  std::thread::id caller = std::this_thread::get_id();
  for (int round = 0; round < 50; ++round)
    pool.parallelFor(64, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (std::this_thread::get_id() != caller) {
        std::lock_guard<std::mutex> lock(mu);
        for (int c : currentThreadCpus()) workerCpus.insert(c);
      }
    });
  // The one worker is pinned to the set's second CPU.
  EXPECT_EQ(workerCpus, std::set<int>{mine[1]});
}

} // namespace
