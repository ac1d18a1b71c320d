//===- ThreadPoolTest.cpp - parallelFor covers each index exactly once ----===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

using loom::rt::ThreadPool;

namespace {

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 7, 100, 1000, 4097})
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(size_t(std::max<int64_t>(n, 1)));
        pool.parallelFor(n, grain, [&](int64_t begin, int64_t end) {
          EXPECT_LE(0, begin);
          EXPECT_LT(begin, end);
          EXPECT_LE(end, n);
          for (int64_t i = begin; i < end; ++i) hits[size_t(i)]++;
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " n " << n << " grain " << grain << " i " << i;
      }
  }
}

TEST(ThreadPool, SpreadsWorkOverThreads) {
  ThreadPool pool(4);
  std::mutex mu;
  std::set<std::thread::id> seen;
  // Each task sleeps, so the caller alone cannot take every chunk.
  pool.parallelFor(64, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_GT(seen.size(), 1u);
}

TEST(ThreadPool, ManyBackToBackLoops) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 2000; ++rep)
    pool.parallelFor(16, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 2000 * 16);
}

} // namespace
