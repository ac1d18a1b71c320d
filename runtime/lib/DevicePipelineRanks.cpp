//===- DevicePipelineRanks.cpp - A pipeline plan's ranks on one GPU -------===//
//
// Part of loom, under the Apache License v2.0.
//
// loom train|verify --backend cuda --plan pp=... without --nproc: every
// rank's stage programs on the one GPU (one executor per program, each
// with its arena), the device-memory communicator carrying collectives
// inside a stage and the activations and gradients between stages. As
// for the other plans' simulated ranks (SimulatedRanks.cpp), for
// verification and memory measurement, not speed.
//===----------------------------------------------------------------------===//
#include "lib/Diagnostics.h"
#include "loom/runtime/PipelineExecutor.h"
#ifdef LOOM_HAVE_CUDA
#include "cuda/CudaExecutor.h"
#include "loom/runtime/DeviceMemoryCommunicator.h"
#endif

namespace loom::rt {

bool createDevicePipelineRanks(std::shared_ptr<const PipelineProgram> p, DevicePipelineRanks &out,
                               std::string &err) {
#ifdef LOOM_HAVE_CUDA
  if (!cudaDeviceAvailable(err))
    return false;
  int N = p->worldSize();
  // Each rank allocates every program of its pipeline rank: add them up
  // before the first allocation.
  std::vector<uint64_t> need(static_cast<size_t>(N), 0);
  uint64_t total = 0, freeBytes = 0, deviceBytes = 0;
  for (int r = 0; r < N; ++r) {
    for (const PipelineFunction *f : p->functionsOf(r / p->ranksPerStage))
      need[size_t(r)] += cudaRankDeviceBytes(*f->program);
    total += need[size_t(r)];
  }
  if (!cudaMemoryInfo(freeBytes, deviceBytes, err))
    return false;
  if (total > freeBytes) {
    err = cat("the ", N, " pipeline ranks do not fit on the GPU: their stage programs need ",
              total, " bytes (rank 0: ", need[0], ") and ", freeBytes, " of ", deviceBytes,
              " bytes are free");
    return false;
  }
  out.comm = createDeviceMemoryCommunicator(N, err);
  if (!out.comm)
    return false;
  out.ranks.clear();
  out.measured.assign(size_t(N), 0);
  for (int r = 0; r < N; ++r) {
    uint64_t before = 0, after = 0, all = 0;
    std::string why;
    bool measure = cudaMemoryInfo(before, all, why);
    auto rank = PipelineRank::create(p, r, out.comm.get(), "cuda", 0, err);
    if (!rank) {
      err = cat("rank ", r, ": ", err);
      out.ranks.clear();
      return false;
    }
    if (measure && cudaMemoryInfo(after, all, why) && before > after)
      out.measured[size_t(r)] = before - after;
    out.ranks.push_back(std::move(rank));
  }
  return true;
#else
  (void)p;
  (void)out;
  err = "loom was built without the cuda backend";
  return false;
#endif
}

} // namespace loom::rt
