//===- NcclCommunicator.h - Collectives between GPUs through NCCL -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// One process per GPU (issue 5): the CUDA backend runs the program's
// collectives through NCCL (runtime/cuda/NcclCommunicator.cpp). Built when
// the CUDA toolkit and NCCL are found (LOOM_HAVE_NCCL); NOT YET RUN ON
// GPUs: it compiles and its error paths are reasoned about, but no
// multi-GPU job has gone through it yet.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_NCCLCOMMUNICATOR_H
#define LOOM_RUNTIME_NCCLCOMMUNICATOR_H

#include "loom/runtime/Communicator.h"

#include <memory>

namespace loom::rt {

class Rendezvous;

/// Selects GPU `localRank`, gets NCCL's unique id from rank 0 through `rv`
/// and joins the world (non-blocking NCCL communicators). A collective
/// that does not finish within `timeoutS` seconds, an asynchronous NCCL
/// error, or a peer process whose rendezvous connection closes aborts the
/// communicator with an error instead of hanging. Null with `err` when
/// loom was built without NCCL or NCCL fails.
std::unique_ptr<Communicator> createNcclCommunicator(Rendezvous &rv, int localRank,
                                                     double timeoutS, std::string &err);

} // namespace loom::rt

#endif
