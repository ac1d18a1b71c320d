//===- SimulatedRanks.h - An N-rank SPMD job in one process -----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// One executor per rank, all running the same program, joined by an
// in-process communicator: on the CPU backend an InProcessCommunicator
// (one executor per rank, each with its own threads); on the CUDA backend
// a device-memory communicator, every rank's executor (its own stream,
// arena, scratch) on the one GPU. run() starts every rank's run() on its
// own thread and waits for all; inputs and outputs are per rank (each rank
// gets its own data slice and parameter shards from the caller).
// On the GPU this mode is for verification and memory measurement: each
// rank allocates exactly what it would on a GPU of its own, but the ranks
// share one GPU's compute.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_SIMULATEDRANKS_H
#define LOOM_RUNTIME_SIMULATEDRANKS_H

#include "loom/runtime/Communicator.h"
#include "loom/runtime/Executor.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

class SimulatedRanks {
public:
  /// `backend` is "cpu" or "cuda". `threadsPerRank` (cpu) <= 0 splits the
  /// hardware threads evenly (at least 1). On cuda every rank's memory is
  /// counted before any is allocated: a world that does not fit in the
  /// GPU's free memory is refused with an error naming the first rank that
  /// does not fit, what it needs and what is free.
  static std::unique_ptr<SimulatedRanks> create(std::shared_ptr<const Program> p, int worldSize,
                                                const std::string &backend, int threadsPerRank,
                                                std::string &err);
  /// The CPU backend (the original signature).
  static std::unique_ptr<SimulatedRanks> create(std::shared_ptr<const Program> p, int worldSize,
                                                int threadsPerRank, std::string &err) {
    return create(std::move(p), worldSize, "cpu", threadsPerRank, err);
  }
  ~SimulatedRanks();

  int size() const { return int(ranks_.size()); }
  Executor &rank(int r) { return *ranks_[r]; }
  const Executor &rank(int r) const { return *ranks_[r]; }
  /// Device bytes the GPU lost while rank r's executor was created
  /// (cudaMemGetInfo before and after: its allocations plus what CUDA and
  /// its libraries took for it; rank 0 also pays for cuBLASLt's and cuDNN's
  /// handles). 0 on the CPU.
  uint64_t measuredDeviceBytes(int r) const { return measured_[size_t(r)]; }

  /// Runs the program once on every rank concurrently. On failure `err`
  /// names the first rank that failed and why; the other ranks stop at
  /// their next collective instead of waiting forever.
  bool run(std::string &err);

private:
  SimulatedRanks() = default;
  std::unique_ptr<Communicator> comm_;
  std::vector<std::unique_ptr<Executor>> ranks_;
  std::vector<uint64_t> measured_;
};

} // namespace loom::rt

#endif
