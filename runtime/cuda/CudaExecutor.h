//===- CudaExecutor.h - The CUDA backend ------------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_CUDAEXECUTOR_H
#define LOOM_RUNTIME_CUDA_CUDAEXECUTOR_H

#include "loom/runtime/Executor.h"

namespace loom::rt {

/// Validates `p`, checks that the CUDA kernels cover every instruction,
/// allocates all device memory and plans every GEMM. Returns null with
/// `err` set otherwise (also when no CUDA device is usable).
std::unique_ptr<Executor> createCudaExecutor(std::shared_ptr<const Program> p, std::string &err);

class Communicator;

/// The same for rank `rank` of a job with one process per GPU: the
/// program's collectives go through `comm`, which must be an NCCL
/// communicator (createNcclCommunicator) and outlive the executor.
/// Multi-rank programs direct CUDA graphs off (kernels launch one by one).
std::unique_ptr<Executor> createCudaRankExecutor(std::shared_ptr<const Program> p,
                                                 Communicator *comm, int rank, std::string &err);

/// Device bytes the CUDA executor of `p` allocates in all (arena,
/// constants, workspace, and collective staging when `p` has collectives):
/// known before it allocates anything.
uint64_t cudaRankDeviceBytes(const Program &p);

/// The current GPU's free and total memory (cudaMemGetInfo).
bool cudaMemoryInfo(uint64_t &freeBytes, uint64_t &totalBytes, std::string &why);

/// True when a CUDA device can be used; otherwise `why` says why not.
bool cudaDeviceAvailable(std::string &why);

/// Device bytes the CUDA executor allocates besides the arena and the
/// constants: the kernels' scratch block and the GEMM workspace.
uint64_t cudaWorkspaceBytes(const Program &p);

} // namespace loom::rt

#endif
