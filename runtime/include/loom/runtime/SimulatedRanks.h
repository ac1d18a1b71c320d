//===- SimulatedRanks.h - An N-rank SPMD job in one process -----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// One CPU executor per rank, all running the same program, joined by an
// InProcessCommunicator. run() starts every rank's run() on its own thread
// and waits for all; inputs and outputs are per rank (each rank gets its
// own data slice and parameter shards from the caller).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_SIMULATEDRANKS_H
#define LOOM_RUNTIME_SIMULATEDRANKS_H

#include "loom/runtime/InProcessCommunicator.h"
#include "loom/runtime/Executor.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

class SimulatedRanks {
public:
  /// `threadsPerRank` <= 0 splits the hardware threads evenly (at least 1).
  static std::unique_ptr<SimulatedRanks> create(std::shared_ptr<const Program> p, int worldSize,
                                                int threadsPerRank, std::string &err);

  int size() const { return int(ranks_.size()); }
  Executor &rank(int r) { return *ranks_[r]; }

  /// Runs the program once on every rank concurrently. On failure `err`
  /// names the first rank that failed and why; the other ranks stop at
  /// their next collective instead of waiting forever.
  bool run(std::string &err);

private:
  explicit SimulatedRanks(int worldSize) : comm_(worldSize) {}
  InProcessCommunicator comm_;
  std::vector<std::unique_ptr<Executor>> ranks_;
};

} // namespace loom::rt

#endif
