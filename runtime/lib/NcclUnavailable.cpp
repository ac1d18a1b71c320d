//===- NcclUnavailable.cpp - createNcclCommunicator without NCCL -----------===//
//
// Part of loom, under the Apache License v2.0.
//
// Compiled instead of cuda/NcclCommunicator.cpp when NCCL is not found, so
// the driver links the same everywhere and says why it cannot.
//===----------------------------------------------------------------------===//
#include "loom/runtime/NcclCommunicator.h"

namespace loom::rt {

std::unique_ptr<Communicator> createNcclCommunicator(Rendezvous &, int, double,
                                                     std::string &err) {
  err = "this build of loom has no NCCL (multi-GPU jobs need a CUDA toolkit with NCCL)";
  return nullptr;
}

} // namespace loom::rt
