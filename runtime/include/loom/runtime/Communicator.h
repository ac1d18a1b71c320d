//===- Communicator.h - In-process collectives for simulated ranks -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The CPU backend simulates an N-rank job inside one process (like JAX's
// host platform device count): one executor per rank, each in its own
// thread, meeting at the program's collective instructions through this
// communicator. Every rank runs the same program (SPMD), so the ranks reach
// the same collective in the same order; a collective is then
//   1. every rank publishes its input pointer, barrier;
//   2. every rank computes its own output from the published inputs;
//   3. barrier (nobody overwrites an input others may still read).
// Reductions add in group order in double precision and round once, so
// the result does not depend on thread timing and is bit-identical on all
// ranks of a group. A rank that fails aborts the communicator; the others
// then leave their barrier with an error naming that rank instead of
// waiting forever.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_COMMUNICATOR_H
#define LOOM_RUNTIME_COMMUNICATOR_H

#include "loom/runtime/Program.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace loom::rt {

class InProcessCommunicator {
public:
  explicit InProcessCommunicator(int worldSize);

  int worldSize() const { return world_; }

  /// Runs collective instruction `I` (AllReduce, AllGather, ReduceScatter;
  /// already validated) for `rank`: `in` and `out` are that rank's f32
  /// buffers with the instruction's shapes. Blocks until every rank has
  /// made the same call. False with `err` when the communicator is aborted
  /// or the ranks disagree about the instruction.
  bool collective(int rank, const Instr &I, const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape, const float *in, float *out,
                  std::string &err);

  /// Marks the job failed: blocked and later collectives return false with
  /// `why`. The first reason is kept.
  void abort(const std::string &why);
  bool aborted() const;
  /// The reason given to the first abort() ("" when not aborted). An
  /// aborted communicator stays aborted: its world is finished.
  std::string abortReason() const;

  /// The ranks of `rank`'s group for a collective with the mesh sizes and
  /// axis mask of ints[2..7] (Program.h), in rank order.
  static std::vector<int> groupOf(int rank, const std::vector<int64_t> &ints);

private:
  bool barrier(std::string &err);

  int world_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abortWhy_;
  std::vector<const float *> inputs_;
  std::vector<const Instr *> instrs_;
};

} // namespace loom::rt

#endif
