//===- SimulatedRanks.cpp -------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/SimulatedRanks.h"
#include "cpu/CpuExecutor.h"
#include "lib/Diagnostics.h"

#include <algorithm>
#include <thread>

namespace loom::rt {

std::unique_ptr<SimulatedRanks> SimulatedRanks::create(std::shared_ptr<const Program> p,
                                                       int worldSize, int threadsPerRank,
                                                       std::string &err) {
  if (!p || worldSize < 1) {
    err = "SimulatedRanks: need a program and at least one rank";
    return nullptr;
  }
  if (threadsPerRank <= 0)
    threadsPerRank = std::max(1, int(std::thread::hardware_concurrency()) / worldSize);
  std::unique_ptr<SimulatedRanks> world(new SimulatedRanks(worldSize));
  for (int r = 0; r < worldSize; ++r) {
    auto exec = createCpuRankExecutor(p, threadsPerRank, &world->comm_, r, err);
    if (!exec) {
      err = cat("rank ", r, ": ", err);
      return nullptr;
    }
    world->ranks_.push_back(std::move(exec));
  }
  return world;
}

bool SimulatedRanks::run(std::string &err) {
  int n = size();
  std::vector<std::string> errs(n);
  std::vector<char> ok(n, 1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      if (!ranks_[r]->run(errs[r])) {
        ok[r] = 0;
        // The first failure's reason is what the others report.
        comm_.abort(cat("rank ", r, " failed: ", errs[r]));
      }
    });
  for (std::thread &t : threads) t.join();
  if (std::all_of(ok.begin(), ok.end(), [](char c) { return c; }))
    return true;
  err = comm_.abortReason();
  return false;
}

} // namespace loom::rt
