//===- DeviceMemoryCommunicator.h - All ranks of a job on one GPU -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The communicator of simulated ranks on one GPU (runtime/cuda/
// DeviceMemoryCommunicator.cu): one CUDA executor per rank in one process,
// collectives computed in device memory on a communication stream per
// rank, in group order with the CPU communicators' arithmetic. For
// verification and memory measurement, not for speed. Built with the CUDA
// backend only.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_DEVICEMEMORYCOMMUNICATOR_H
#define LOOM_RUNTIME_DEVICEMEMORYCOMMUNICATOR_H

#include "loom/runtime/Communicator.h"

#include <memory>
#include <string>

namespace loom::rt {

/// A world of `worldSize` ranks on the current GPU; each rank's executor
/// is created with createRankExecutor(..., "cuda", ..., comm, rank).
std::unique_ptr<Communicator> createDeviceMemoryCommunicator(int worldSize, std::string &err);

} // namespace loom::rt

#endif
