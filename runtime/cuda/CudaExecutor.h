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

/// True when a CUDA device can be used; otherwise `why` says why not.
bool cudaDeviceAvailable(std::string &why);

} // namespace loom::rt

#endif
