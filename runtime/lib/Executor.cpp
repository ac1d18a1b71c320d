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
#include <cstring>

namespace loom::rt {

bool Executor::snapshotOutputs(const std::vector<size_t> &indices, std::string &err) {
  hostSnapshot_.resize(indices.size());
  snapshotBytes_ = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] >= program_->outputs.size()) {
      err = "snapshot of output " + std::to_string(indices[k]) + ", but the program has " +
            std::to_string(program_->outputs.size());
      return false;
    }
    hostSnapshot_[k].resize(program_->buffers[program_->outputs[indices[k]]].bytes);
    if (!getOutput(indices[k], hostSnapshot_[k].data(), hostSnapshot_[k].size(), err))
      return false;
    snapshotBytes_ += hostSnapshot_[k].size();
  }
  return true;
}

bool Executor::readSnapshot(size_t k, void *data, size_t bytes, std::string &err) {
  if (k >= hostSnapshot_.size() || hostSnapshot_[k].size() != bytes) {
    err = "snapshot entry " + std::to_string(k) + " does not hold " + std::to_string(bytes) +
          " bytes";
    return false;
  }
  std::memcpy(data, hostSnapshot_[k].data(), bytes);
  return true;
}

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
