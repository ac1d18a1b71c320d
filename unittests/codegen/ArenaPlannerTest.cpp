//===- ArenaPlannerTest.cpp - Liveness-based placement --------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "codegen/ArenaPlanner.h"

#include <gtest/gtest.h>

#include <random>

using loom::Lifetime;
using loom::planArena;

namespace {

bool overlapsInTime(const Lifetime &a, const Lifetime &b) {
  return a.first <= b.last && b.first <= a.last;
}

TEST(ArenaPlanner, DisjointLifetimesShareMemory) {
  // a dies at 1, c is defined at 2: c may take a's bytes; b overlaps both.
  std::vector<Lifetime> l = {{1000, 0, 1}, {500, 1, 2}, {1000, 2, 3}};
  uint64_t arena = 0;
  auto off = planArena(l, 64, arena);
  EXPECT_EQ(off[0], off[2]);
  EXPECT_NE(off[0], off[1]);
  EXPECT_LT(arena, 2500u);
}

TEST(ArenaPlanner, InputsOfAnInstructionAreNotReusedByItsOutput) {
  // The reader at instruction 1 is also where the new buffer is defined:
  // kernels assume outputs do not alias inputs.
  std::vector<Lifetime> l = {{256, 0, 1}, {256, 1, 2}};
  uint64_t arena = 0;
  auto off = planArena(l, 64, arena);
  EXPECT_NE(off[0], off[1]);
}

TEST(ArenaPlanner, RandomLifetimesNeverCollide) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<Lifetime> l;
    int n = 5 + int(rng() % 60);
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) {
      int64_t first = int64_t(rng() % 40) - 1;
      Lifetime t{1 + rng() % 5000, first, first + int64_t(rng() % 10)};
      total += (t.bytes + 63) / 64 * 64;
      l.push_back(t);
    }
    uint64_t arena = 0;
    auto off = planArena(l, 64, arena);
    EXPECT_LE(arena, total);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(off[i] % 64, 0u);
      EXPECT_LE(off[i] + l[i].bytes, arena);
      for (int j = i + 1; j < n; ++j) {
        if (!overlapsInTime(l[i], l[j]))
          continue;
        bool apart = off[i] + l[i].bytes <= off[j] || off[j] + l[j].bytes <= off[i];
        EXPECT_TRUE(apart) << "buffers " << i << " and " << j << " collide";
      }
    }
  }
}

} // namespace
