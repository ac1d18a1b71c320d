//===- StreamCommunicator.h - Collectives ordered with a CUDA stream -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// What the CUDA executor needs from a communicator: collectives enqueued
// between its kernels, ordered by its stream, never by the host. Two
// implementations:
//   NcclCommunicator.cpp          one process per GPU (NCCL runs the
//                                 collective on the executor's stream);
//   DeviceMemoryCommunicator.cu   every rank of a job on one GPU, one
//                                 executor per rank (verification and
//                                 memory measurement, not speed).
// The executor enqueues collective k (its index among the program's
// collectives) and promises not to touch its input or output again until
// it has called join(k): a communicator that runs collectives on a stream
// of its own (as PyTorch runs NCCL on a side stream) then overlaps them
// with the kernels in between. Abstract, so the executor compiles without
// nccl.h.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_STREAMCOMMUNICATOR_H
#define LOOM_RUNTIME_CUDA_STREAMCOMMUNICATOR_H

#include "loom/runtime/Communicator.h"

#include <cuda_runtime.h>

namespace loom::rt::cuda {

class StreamCommunicator : public Communicator {
public:
  /// Sets up what rank `rank`'s collectives need (sub-communicators, events,
  /// staging buffers), `arena` being where the rank's non-constant buffers
  /// live. Before the first enqueue().
  virtual bool prepare(const Program &p, int rank, void *arena, std::string &err) = 0;

  /// Enqueues collective `k` (the k-th collective instruction of the
  /// program, `I`) of `rank` after the work already on `stream`; returns
  /// without waiting for it. `in` and `out` are device pointers.
  virtual bool enqueue(int rank, int k, const Instr &I, const std::vector<int64_t> &inShape,
                       const std::vector<int64_t> &outShape, const float *in, float *out,
                       cudaStream_t stream, std::string &err) = 0;

  /// Makes `stream` wait until collectives 0..k of `rank` have finished on
  /// every rank of their groups: their outputs are written and no peer
  /// reads their inputs any more. A no-op where collectives run on the
  /// executor's stream itself (NCCL).
  virtual bool join(int rank, int k, cudaStream_t stream, std::string &err) = 0;

  /// Enqueues the grouped point-to-point transfers `ops` (device pointers;
  /// Communicator::sendRecv's semantics) of `rank` after the work already
  /// on `stream`, and makes `stream` wait for them: later work on `stream`
  /// sees the received bytes and may overwrite the sent ones. Returns once
  /// every transfer is posted and matched (group semantics: blocks on the
  /// host until the peers have posted theirs), not when the bytes moved.
  virtual bool enqueueSendRecv(int rank, const std::vector<P2POp> &ops, cudaStream_t stream,
                               std::string &err) = 0;

  /// Blocks until `stream` is idle. On a failure (an NCCL error, a peer
  /// gone, the timeout, another rank's abort) fails with an error naming
  /// the cause instead of blocking forever.
  virtual bool wait(int rank, cudaStream_t stream, std::string &err) = 0;

  /// Device bytes this communicator allocated for `rank` (staging for
  /// gathers and scatters along an inner dim): part of the rank's memory.
  virtual uint64_t deviceBytes(int rank) const = 0;
};

/// Bytes of staging a rank needs for program `p`'s collectives: NCCL moves
/// whole per-rank blocks ([group][...]), so a collective along a dim with
/// non-unit dims before it goes through a buffer of its larger side.
uint64_t collectiveStagingBytes(const Program &p);
/// True when collective `I` of `p` goes through the staging buffer.
bool collectiveNeedsStaging(const Program &p, const Instr &I);

} // namespace loom::rt::cuda

#endif
