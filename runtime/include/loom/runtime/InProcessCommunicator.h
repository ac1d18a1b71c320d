//===- InProcessCommunicator.h - Collectives between threads ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The CPU backend simulates an N-rank job inside one process (like JAX's
// host platform device count): one executor per rank, each in its own
// thread, meeting at the program's collective instructions through this
// communicator. A collective is
//   1. every rank of the group publishes its input pointer, barrier;
//   2. every member computes its own output from the published inputs
//      (Communicator::compute);
//   3. barrier (nobody overwrites an input others may still read).
// The barriers are the group's, not the world's: under pipeline
// parallelism the ranks of different stages run different programs, so
// only a group's members reach the same collectives in the same order
// (the n-th collective a rank makes over a group meets the n-th of every
// other member). Point-to-point transfers (sendRecv) meet in per-pair
// queues: each receive takes the oldest unmatched send of its peer.
// A rank that fails aborts the communicator; the others then leave their
// barrier with an error naming that rank instead of waiting forever.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_INPROCESSCOMMUNICATOR_H
#define LOOM_RUNTIME_INPROCESSCOMMUNICATOR_H

#include "loom/runtime/Communicator.h"

#include <condition_variable>
#include <functional>
#include <deque>
#include <map>
#include <mutex>

namespace loom::rt {

class InProcessCommunicator : public Communicator {
public:
  explicit InProcessCommunicator(int worldSize);

  int worldSize() const override { return world_; }
  const char *transport() const override { return "in-process"; }

  /// Blocks until every rank of the instruction's group has made its
  /// matching call (the same count of collectives over that group).
  bool collective(int rank, const Instr &I, const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape, const float *in, float *out,
                  std::string &err) override;

  bool sendRecv(int rank, const std::vector<P2POp> &ops, std::string &err) override;

  void abort(const std::string &why) override;
  bool aborted() const;
  /// The reason given to the first abort() ("" when not aborted). An
  /// aborted communicator stays aborted: its world is finished.
  std::string abortReason() const;

private:
  /// One collective of one group: its members' inputs and instructions.
  struct Meeting {
    std::vector<const float *> inputs;
    std::vector<const Instr *> instrs;
    int arrived = 0, computed = 0, left = 0;
  };
  /// A posted, not yet matched transfer of one direction of a rank pair.
  struct Posted {
    const void *send = nullptr;
    void *recv = nullptr;
    uint64_t bytes = 0;
    char *done = nullptr; // in the posting call's frame; set once copied
  };
  /// Waits (holding `lk`) until `ready` or an abort; false with the reason.
  bool waitFor(std::unique_lock<std::mutex> &lk, const std::function<bool()> &ready,
               std::string &err);
  bool match(int from, int to, std::string &err);
  /// With m_ held: marks the world failed by `rank` (`err`); returns false.
  bool abortLocked(int rank, const std::string &err);

  int world_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool aborted_ = false;
  std::string abortWhy_;
  // Collectives: per group (its ranks) and per-group sequence number.
  std::map<std::pair<std::vector<int>, uint64_t>, Meeting> meetings_;
  std::vector<std::map<std::vector<int>, uint64_t>> made_; // per rank: collectives per group
  // Point-to-point: per (from, to), unmatched sends and receives, in order,
  // and how many have been matched (for messages).
  std::map<std::pair<int, int>, std::deque<Posted>> sends_, recvs_;
  std::map<std::pair<int, int>, uint64_t> matched_;
};

} // namespace loom::rt

#endif
