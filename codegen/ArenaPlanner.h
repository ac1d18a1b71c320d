//===- ArenaPlanner.h - Liveness-based buffer placement ---------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Places buffers with known lifetimes [first, last] (instruction indices)
// into one arena: a buffer may reuse bytes of any buffer that died before
// it is defined. Greedy best-fit over a free list, in definition order.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_ARENAPLANNER_H
#define LOOM_CODEGEN_ARENAPLANNER_H

#include <cstdint>
#include <vector>

namespace loom {

struct Lifetime {
  uint64_t bytes = 0;
  int64_t first = 0; // instruction that defines it (-1: before the first)
  int64_t last = 0;  // last instruction that reads it
};

/// Returns one offset per lifetime (aligned to `alignment`) and sets
/// `arenaBytes`. Buffers whose lifetimes overlap never overlap in memory.
std::vector<uint64_t> planArena(const std::vector<Lifetime> &lifetimes,
                                uint64_t alignment, uint64_t &arenaBytes);

} // namespace loom

#endif
