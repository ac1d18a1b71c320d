//===- NcclCommunicator.h - What the CUDA executor needs from NCCL -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The CUDA executor enqueues collectives on its own stream between its
// kernels and then waits for the stream through the communicator, which
// watches for NCCL's asynchronous errors, dead peers and the timeout
// while it waits (a plain cudaStreamSynchronize would block forever on a
// collective whose peer died). Abstract, so the executor compiles without
// nccl.h; the implementation is NcclCommunicator.cpp. Untested on GPUs.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define LOOM_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "loom/runtime/Communicator.h"

#include <cuda_runtime.h>

namespace loom::rt::cuda {

class NcclCommunicator : public Communicator {
public:
  const char *transport() const override { return "nccl"; }

  /// Creates the sub-communicators for every group the program's
  /// collectives use (a collective call on all ranks, in program order)
  /// and any scratch they need. Before the first enqueue().
  virtual bool prepare(const Program &p, int rank, std::string &err) = 0;

  /// Enqueues collective `I` on `stream` (device pointers); returns
  /// without waiting for it to run.
  virtual bool enqueue(const Instr &I, const std::vector<int64_t> &inShape,
                       const std::vector<int64_t> &outShape, const float *in, float *out,
                       cudaStream_t stream, std::string &err) = 0;

  /// Waits until `stream` is idle. On an NCCL error, a peer process gone,
  /// or the timeout, aborts every NCCL communicator (so no kernel spins
  /// forever) and fails with an error naming the cause.
  virtual bool wait(cudaStream_t stream, std::string &err) = 0;
};

} // namespace loom::rt::cuda

#endif
