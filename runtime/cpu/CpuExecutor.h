//===- CpuExecutor.h - The CPU reference backend ----------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPU_CPUEXECUTOR_H
#define LOOM_RUNTIME_CPU_CPUEXECUTOR_H

#include "loom/runtime/Executor.h"

namespace loom::rt {

/// Validates `p`, checks that the CPU kernels cover every instruction's
/// dtypes and allocates the arena. Returns null with `err` set otherwise.
/// `threads` <= 0 means one per hardware thread.
std::unique_ptr<Executor> createCpuExecutor(std::shared_ptr<const Program> p, int threads,
                                            std::string &err);

class Communicator;

/// The same for rank `rank` of a world (simulated ranks, or one process per
/// rank): collective instructions go through `comm` (which must outlive the
/// executor). Without a communicator, a program with collectives is refused
/// at creation.
std::unique_ptr<Executor> createCpuRankExecutor(std::shared_ptr<const Program> p, int threads,
                                                Communicator *comm, int rank,
                                                std::string &err);

} // namespace loom::rt

#endif
