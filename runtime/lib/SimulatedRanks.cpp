//===- SimulatedRanks.cpp -------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/SimulatedRanks.h"
#include "cpu/CpuExecutor.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/InProcessCommunicator.h"
#ifdef LOOM_HAVE_CUDA
#include "cuda/CudaExecutor.h"
#include "loom/runtime/DeviceMemoryCommunicator.h"
#endif

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <thread>

namespace loom::rt {

namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

} // namespace

SimulatedRanks::~SimulatedRanks() {
  // Executors first: they use the communicator until they are gone.
  ranks_.clear();
  comm_.reset();
}

std::unique_ptr<SimulatedRanks> SimulatedRanks::create(std::shared_ptr<const Program> p,
                                                       int worldSize, const std::string &backend,
                                                       int threadsPerRank, std::string &err) {
  if (!p || worldSize < 1) {
    err = "SimulatedRanks: need a program and at least one rank";
    return nullptr;
  }
  std::unique_ptr<SimulatedRanks> world(new SimulatedRanks());
  world->measured_.assign(size_t(worldSize), 0);
  if (backend == "cpu") {
    if (threadsPerRank <= 0)
      threadsPerRank = std::max(1, int(std::thread::hardware_concurrency()) / worldSize);
    world->comm_ = std::make_unique<InProcessCommunicator>(worldSize);
    for (int r = 0; r < worldSize; ++r) {
      auto exec = createCpuRankExecutor(p, threadsPerRank, world->comm_.get(), r, err);
      if (!exec) {
        err = cat("rank ", r, ": ", err);
        return nullptr;
      }
      world->ranks_.push_back(std::move(exec));
    }
    return world;
  }
#ifdef LOOM_HAVE_CUDA
  if (backend == "cuda") {
    if (!cudaDeviceAvailable(err))
      return nullptr;
    // Every rank allocates the same (one program): refuse the world before
    // the first allocation if its ranks together do not fit.
    uint64_t perRank = cudaRankDeviceBytes(*p), freeBytes = 0, totalBytes = 0;
    if (!cudaMemoryInfo(freeBytes, totalBytes, err))
      return nullptr;
    if (uint64_t(worldSize) * perRank > freeBytes) {
      int fits = int(freeBytes / perRank);
      err = cat("rank ", fits, " of ", worldSize, " does not fit on the GPU: each rank needs ",
                gib(perRank), " (", perRank, " bytes; ranks 0..", fits, " together ",
                gib(uint64_t(fits + 1) * perRank), ") and ", gib(freeBytes), " (", freeBytes,
                " bytes) of ", gib(totalBytes), " are free");
      return nullptr;
    }
    world->comm_ = createDeviceMemoryCommunicator(worldSize, err);
    if (!world->comm_)
      return nullptr;
    for (int r = 0; r < worldSize; ++r) {
      uint64_t before = 0, after = 0, total = 0;
      std::string why;
      bool measured = cudaMemoryInfo(before, total, why);
      auto exec = createRankExecutor(p, "cuda", 0, world->comm_.get(), r, err);
      if (!exec) {
        err = cat("rank ", r, ": ", err);
        return nullptr;
      }
      if (measured && cudaMemoryInfo(after, total, why) && before > after)
        world->measured_[size_t(r)] = before - after;
      world->ranks_.push_back(std::move(exec));
    }
    return world;
  }
#endif
  std::unique_ptr<Executor> probe = createExecutor(p, backend, 1, err); // names the backend
  if (probe)
    err = cat("simulated ranks run on the cpu or cuda backend, not '", backend, "'");
  return nullptr;
}

bool SimulatedRanks::run(std::string &err) {
  int n = size();
  std::vector<std::string> errs(n);
  std::vector<char> ok(n, 1);
  std::vector<std::thread> threads;
  std::mutex firstMutex;
  std::string first;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      if (!ranks_[r]->run(errs[r])) {
        ok[r] = 0;
        // The first failure's reason is what the others report.
        std::string why = cat("rank ", r, " failed: ", errs[r]);
        {
          std::lock_guard<std::mutex> lock(firstMutex);
          if (first.empty() && !comm_->peerFailed())
            first = why;
        }
        comm_->abort(why);
      }
    });
  for (std::thread &t : threads) t.join();
  if (std::all_of(ok.begin(), ok.end(), [](char c) { return c; }))
    return true;
  if (auto *inProcess = dynamic_cast<InProcessCommunicator *>(comm_.get()))
    err = inProcess->abortReason();
  else
    err = first;
  if (err.empty()) { // every failure saw an aborted peer first: name the first rank that failed
    int r = int(std::find(ok.begin(), ok.end(), 0) - ok.begin());
    err = cat("rank ", r, " failed: ", errs[size_t(r)]);
  }
  return false;
}

} // namespace loom::rt
