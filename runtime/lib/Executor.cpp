//===- Executor.cpp - Choosing a backend ----------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/Executor.h"
#include "cpu/CpuExecutor.h"

namespace loom::rt {

std::unique_ptr<Executor> createExecutor(std::shared_ptr<const Program> p,
                                         const std::string &backend, int threads,
                                         std::string &err) {
  if (!p) {
    err = "createExecutor: no program";
    return nullptr;
  }
  if (backend == "cpu")
    return createCpuExecutor(std::move(p), threads, err);
  err = "unknown backend '" + backend + "' (available: cpu)";
  return nullptr;
}

} // namespace loom::rt
