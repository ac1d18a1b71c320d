//===- Rendezvous.h - How the processes of a job find each other -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// One process per rank (loom train --nproc, torchrun, Slurm): rank 0
// listens on MASTER_ADDR:MASTER_PORT, every other rank connects to it
// (retrying while rank 0 is not up yet) and says hello with its rank and
// the world size. The connections stay open as a star through rank 0 for
// small host-side exchanges: addresses of the socket communicator's
// listeners, NCCL's unique id, gathering parameter shards for checkpoints,
// barriers. Every operation has a deadline; a rank that never arrives, or
// whose connection closes (it exited or died), becomes a one-line error
// naming the address and the ranks.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_RENDEZVOUS_H
#define LOOM_RUNTIME_RENDEZVOUS_H

#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

namespace net {
class Fd;
}

class Rendezvous {
public:
  /// Joins the job as `rank` of `world`: rank 0 listens on `port` and waits
  /// for the others; they connect to `host:port`. Everything must happen
  /// within `timeoutS` seconds (the later operations get the same bound).
  static std::unique_ptr<Rendezvous> join(int rank, int world, const std::string &host, int port,
                                          double timeoutS, std::string &err);
  ~Rendezvous();

  int rank() const { return rank_; }
  int worldSize() const { return world_; }
  /// "host:port" of rank 0, for messages.
  const std::string &address() const { return address_; }
  /// This process's IPv4 address on the network it reaches rank 0 over
  /// (MASTER_ADDR itself on rank 0).
  const std::string &localAddress() const { return local_; }
  /// Seconds every later operation may take.
  double timeoutS() const { return timeoutS_; }

  /// Rank 0 gets every rank's bytes in rank order; the others get nothing.
  bool gather(const std::string &mine, std::vector<std::string> &all, std::string &err);
  /// Every rank gets rank 0's `bytes`.
  bool broadcast(std::string &bytes, std::string &err);
  /// Every rank gets every rank's bytes, in rank order.
  bool allGather(const std::string &mine, std::vector<std::string> &all, std::string &err);
  /// Returns when every rank has called it.
  bool barrier(std::string &err);

  /// Without waiting: a rank whose connection closed (rank 0 watches every
  /// rank, the others rank 0), or -1. For watchdogs that must notice a
  /// dead process while the data path (NCCL) cannot.
  int lostPeer() const;

private:
  Rendezvous() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_ = 1;
  double timeoutS_ = 60;
  std::string address_, local_;
  uint64_t round_ = 0; // operations so far; every frame carries it
};

} // namespace loom::rt

#endif
