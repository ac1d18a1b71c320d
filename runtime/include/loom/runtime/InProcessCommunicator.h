//===- InProcessCommunicator.h - Collectives between threads ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The CPU backend simulates an N-rank job inside one process (like JAX's
// host platform device count): one executor per rank, each in its own
// thread, meeting at the program's collective instructions through this
// communicator. A collective is
//   1. every rank publishes its input pointer, barrier;
//   2. every rank computes its own output from the published inputs
//      (Communicator::compute);
//   3. barrier (nobody overwrites an input others may still read).
// A rank that fails aborts the communicator; the others then leave their
// barrier with an error naming that rank instead of waiting forever.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_INPROCESSCOMMUNICATOR_H
#define LOOM_RUNTIME_INPROCESSCOMMUNICATOR_H

#include "loom/runtime/Communicator.h"

#include <condition_variable>
#include <mutex>

namespace loom::rt {

class InProcessCommunicator : public Communicator {
public:
  explicit InProcessCommunicator(int worldSize);

  int worldSize() const override { return world_; }
  const char *transport() const override { return "in-process"; }

  /// Blocks until every rank of the world (not only the group) has made
  /// the same call: simulated ranks are cheap to synchronize.
  bool collective(int rank, const Instr &I, const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape, const float *in, float *out,
                  std::string &err) override;

  void abort(const std::string &why) override;
  bool aborted() const;
  /// The reason given to the first abort() ("" when not aborted). An
  /// aborted communicator stays aborted: its world is finished.
  std::string abortReason() const;

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
