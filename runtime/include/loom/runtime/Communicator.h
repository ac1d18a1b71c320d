//===- Communicator.h - How ranks run the program's collectives -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Every rank runs the same program (SPMD), so the ranks reach the same
// collective instructions in the same order; a Communicator carries out one
// such instruction for the rank that calls it. Implementations:
//   InProcessCommunicator  simulated ranks: threads of one process;
//   SocketCommunicator     one process per rank, TCP between them (CPU);
//   NcclCommunicator       one process per GPU (cuda/, device pointers).
// The CPU ones share one arithmetic (compute() below): reductions add the
// group's values in group (rank) order in double precision and round once,
// so results are bit-identical across a group and between the in-process
// and the multi-process runs.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_COMMUNICATOR_H
#define LOOM_RUNTIME_COMMUNICATOR_H

#include "loom/runtime/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::rt {

/// One transfer of a grouped point-to-point call (Communicator::sendRecv):
/// `bytes` bytes sent to, or received from, world rank `peer`.
struct P2POp {
  enum class Kind : uint8_t { Send, Recv };
  Kind kind = Kind::Send;
  int peer = 0;
  const void *send = nullptr; // Send: the bytes to send
  void *recv = nullptr;       // Recv: where they land
  uint64_t bytes = 0;
  static P2POp sendTo(int peer, const void *data, uint64_t bytes) {
    return {Kind::Send, peer, data, nullptr, bytes};
  }
  static P2POp recvFrom(int peer, void *data, uint64_t bytes) {
    return {Kind::Recv, peer, nullptr, data, bytes};
  }
};

inline bool isCollectiveOp(OpCode op) {
  return op == OpCode::AllReduce || op == OpCode::AllGather || op == OpCode::ReduceScatter ||
         op == OpCode::AllToAll || op == OpCode::CollectivePermute;
}

/// Instructions whose result depends on the executor's rank: the
/// collectives and ShardSlice (a rank's own slice, no communication). An
/// executor runs them only as a rank of a world of the mesh's size.
inline bool needsMeshRank(OpCode op) { return isCollectiveOp(op) || op == OpCode::ShardSlice; }

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int worldSize() const = 0;
  /// "in-process", "socket" or "nccl": backends check that the transport
  /// reaches their memory (NCCL moves device pointers, the others host).
  virtual const char *transport() const = 0;

  /// Runs collective instruction `I` (AllReduce, AllGather, ReduceScatter,
  /// AllToAll; already validated) for `rank`: `in` and `out` are that rank's f32
  /// buffers with the instruction's shapes. Blocks until the rank's group
  /// has made the same call. False with `err` (naming the rank at fault
  /// where one is known) when the job failed or the ranks disagree about
  /// the instruction.
  virtual bool collective(int rank, const Instr &I, const std::vector<int64_t> &inShape,
                          const std::vector<int64_t> &outShape, const float *in, float *out,
                          std::string &err) = 0;

  /// Point-to-point transfers with NCCL's group semantics (pipeline
  /// parallelism's activations and gradients): the sends to and receives
  /// from world ranks in `ops` are posted together and complete together,
  /// so one call may both send to a peer and receive from it (or from
  /// another) without either side waiting for the other to go first. The
  /// transfers between two ranks are matched in posting order: the k-th
  /// send from a to b lands in the k-th receive posted on b from a, and
  /// both must name the same byte count. Blocks until every transfer of
  /// `ops` is done; `send` may then be reused and `recv` holds the data.
  /// Pointers are host memory for the CPU communicators and device memory
  /// for the CUDA ones. False with `err` naming the peer when the job
  /// failed, a peer left or a matched pair disagrees about its size.
  virtual bool sendRecv(int rank, const std::vector<P2POp> &ops, std::string &err);

  /// Marks the job failed: blocked and later collectives return false with
  /// `why`. The first reason is kept.
  virtual void abort(const std::string &why) = 0;

  /// True when a collective failed because of another rank (it left, hung
  /// or is at another collective) rather than this one.
  virtual bool peerFailed() const { return false; }

  /// The ranks of `rank`'s group for a collective with the mesh sizes and
  /// axis mask of ints[2..7] (Program.h), in rank order.
  static std::vector<int> groupOf(int rank, const std::vector<int64_t> &ints);

  /// The ranks of the mesh named by a collective's ints (their product).
  static int64_t meshSize(const std::vector<int64_t> &ints);

  /// `rank`'s place in its group (the index into groupOf's list).
  static int groupIndex(int rank, const std::vector<int64_t> &ints);

  /// What collective `I` means: rank `me` of the group (its place in
  /// groupOf order) gets `out` from the group's inputs `inputs` (group
  /// order). The reference arithmetic every CPU communicator uses.
  static void compute(const Instr &I, const std::vector<int64_t> &inShape,
                      const std::vector<int64_t> &outShape,
                      const std::vector<const float *> &inputs, int me, float *out);
};

} // namespace loom::rt

#endif
