//===- Executor.cpp - Choosing a backend ----------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/Executor.h"
#include "cpu/CpuExecutor.h"
#ifdef LOOM_HAVE_CUDA
#include "cuda/CudaExecutor.h"
#include "cuda/StreamCommunicator.h"
#endif
#include "loom/runtime/Communicator.h"

#include <algorithm>

namespace loom::rt {

uint64_t backendWorkspaceBytes(const Program &p, const std::string &backend) {
#ifdef LOOM_HAVE_CUDA
  if (backend == "cuda")
    return cudaWorkspaceBytes(p);
#else
  (void)p;
  (void)backend;
#endif
  return 0;
}

uint64_t backendCommunicationBytes(const Program &p, const std::string &backend) {
#ifdef LOOM_HAVE_CUDA
  bool collectives = std::any_of(p.instrs.begin(), p.instrs.end(),
                                 [](const Instr &I) { return isCollectiveOp(I.op); });
  if (backend == "cuda" && collectives)
    return cuda::collectiveStagingBytes(p);
#else
  (void)p;
  (void)backend;
#endif
  return 0;
}

std::unique_ptr<Executor> createExecutor(std::shared_ptr<const Program> p,
                                         const std::string &backend, int threads,
                                         std::string &err) {
  if (!p) {
    err = "createExecutor: no program";
    return nullptr;
  }
  if (backend == "cpu")
    return createCpuExecutor(std::move(p), threads, err);
#ifdef LOOM_HAVE_CUDA
  if (backend == "cuda")
    return createCudaExecutor(std::move(p), err);
  err = "unknown backend '" + backend + "' (available: cpu, cuda)";
#else
  if (backend == "cuda") {
    err = "this build of loom has no CUDA backend (configure with a CUDA toolkit)";
    return nullptr;
  }
  err = "unknown backend '" + backend + "' (available: cpu)";
#endif
  return nullptr;
}

std::unique_ptr<Executor> createRankExecutor(std::shared_ptr<const Program> p,
                                             const std::string &backend, int threads,
                                             Communicator *comm, int rank, std::string &err) {
  if (!p) {
    err = "createRankExecutor: no program";
    return nullptr;
  }
  if (backend == "cpu")
    return createCpuRankExecutor(std::move(p), threads, comm, rank, err);
#ifdef LOOM_HAVE_CUDA
  if (backend == "cuda")
    return createCudaRankExecutor(std::move(p), comm, rank, err);
#endif
  return createExecutor(std::move(p), backend, threads, err); // the same error
}

} // namespace loom::rt
