//===- SocketCommunicator.h - Collectives between processes over TCP -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// One process per rank on the CPU backend (loom train --nproc N --backend
// cpu). Every pair of ranks has one TCP connection (rank j connects to
// every rank i < j at the address i published through the rendezvous).
// A collective sends this rank's input to every other member of its group
// and receives theirs, then computes its output with
// Communicator::compute, the arithmetic the in-process communicator uses:
// results are bit-identical to a simulated run. That is O(group) bytes per
// rank per collective: a reference transport for correctness and tests,
// not for speed (GPUs use NCCL).
//
// Every frame carries the collective's sequence number and a hash of the
// instruction, so ranks at different collectives fail with an error
// instead of reading each other's data. Point-to-point transfers
// (sendRecv) use the same connections: a call's transfers to and from
// each peer go in rounds (the k-th send and the k-th receive of every
// peer at once), each frame numbered by its place among the transfers of
// that direction, so the pair's posting order is the matching order. Every wait is bounded by the
// timeout; a peer that closes its connection (exited, killed) or does not
// answer in time fails the collective with an error naming that rank.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_SOCKETCOMMUNICATOR_H
#define LOOM_RUNTIME_SOCKETCOMMUNICATOR_H

#include "loom/runtime/Communicator.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace loom::rt {

class Rendezvous;
namespace net {
struct Transfer;
}

class SocketCommunicator : public Communicator {
public:
  /// Connects this process (rendezvous rank) to every other rank. Setup
  /// and each later collective must finish within `timeoutS` seconds.
  static std::unique_ptr<SocketCommunicator> create(Rendezvous &rv, double timeoutS,
                                                    std::string &err);
  ~SocketCommunicator() override;

  int worldSize() const override { return world_; }
  const char *transport() const override { return "socket"; }
  int rank() const { return rank_; }

  /// `rank` must be this process's rank.
  bool collective(int rank, const Instr &I, const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape, const float *in, float *out,
                  std::string &err) override;

  bool sendRecv(int rank, const std::vector<P2POp> &ops, std::string &err) override;

  /// Records `why` and shuts every connection down, so peers blocked on
  /// this rank fail at once instead of at their timeout.
  void abort(const std::string &why) override;

  bool peerFailed() const override { return peerFailed_; }

private:
  SocketCommunicator() = default;
  /// Drives `ts` by the timeout; false with `err` naming the peer at fault
  /// ("did not <what> within ... (hung, or <elsewhere>)" on a timeout).
  bool run(std::vector<net::Transfer> &ts, const char *what, const char *elsewhere,
           std::string &err);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_ = 1;
  double timeoutS_ = 300;
  uint64_t seq_ = 0; // collectives run so far: every rank counts the same
  // Collectives run so far per group: under pipeline parallelism the
  // stages' ranks run different programs, so only a group's members count
  // the same.
  std::map<std::vector<int>, uint64_t> groupSeq_;
  std::vector<uint64_t> sentTo_, receivedFrom_; // point-to-point frames, per peer
  std::mutex m_;
  std::string abortWhy_;
  std::atomic<bool> aborted_{false};
  bool peerFailed_ = false;
};

} // namespace loom::rt

#endif
