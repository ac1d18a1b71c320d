//===- ArenaPlanner.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "codegen/ArenaPlanner.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace loom {

std::vector<uint64_t> planArena(const std::vector<Lifetime> &lifetimes,
                                uint64_t alignment, uint64_t &arenaBytes) {
  auto align = [&](uint64_t v) { return (v + alignment - 1) / alignment * alignment; };
  std::vector<size_t> order(lifetimes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return lifetimes[a].first < lifetimes[b].first;
  });
  std::vector<uint64_t> offsets(lifetimes.size(), 0);
  std::map<uint64_t, uint64_t> freeBlocks; // offset -> size
  std::multimap<int64_t, size_t> live;     // last use -> buffer
  arenaBytes = 0;
  auto release = [&](uint64_t off, uint64_t size) {
    auto it = freeBlocks.emplace(off, size).first;
    // Merge with neighbours so large buffers can reuse adjacent holes.
    if (auto next = std::next(it); next != freeBlocks.end() && it->first + it->second == next->first) {
      it->second += next->second;
      freeBlocks.erase(next);
    }
    if (it != freeBlocks.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        freeBlocks.erase(it);
      }
    }
  };
  for (size_t idx : order) {
    const Lifetime &l = lifetimes[idx];
    // Free everything whose last read comes before this definition.
    while (!live.empty() && live.begin()->first < l.first) {
      size_t dead = live.begin()->second;
      release(offsets[dead], align(lifetimes[dead].bytes));
      live.erase(live.begin());
    }
    uint64_t size = align(std::max<uint64_t>(l.bytes, 1));
    auto best = freeBlocks.end();
    for (auto it = freeBlocks.begin(); it != freeBlocks.end(); ++it)
      if (it->second >= size && (best == freeBlocks.end() || it->second < best->second))
        best = it;
    if (best != freeBlocks.end()) {
      offsets[idx] = best->first;
      uint64_t rest = best->second - size, at = best->first + size;
      freeBlocks.erase(best);
      if (rest)
        freeBlocks.emplace(at, rest);
    } else if (!freeBlocks.empty() &&
               std::prev(freeBlocks.end())->first + std::prev(freeBlocks.end())->second == arenaBytes) {
      // Grow the arena from the trailing hole rather than past it.
      auto tail = std::prev(freeBlocks.end());
      offsets[idx] = tail->first;
      arenaBytes = tail->first + size;
      freeBlocks.erase(tail);
    } else {
      offsets[idx] = arenaBytes;
      arenaBytes += size;
    }
    live.emplace(l.last, idx);
  }
  return offsets;
}

} // namespace loom
