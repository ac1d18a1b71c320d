//===- ThreadPool.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Protocol: parallelFor publishes a loop under mu_ and bumps generation_;
// each worker that sees a new generation registers as busy, takes chunks
// from nextChunk_ until none are left, and deregisters. parallelFor returns
// only when no worker is busy, so the loop state (and the caller's body) is
// never touched after it returns; the next loop waits for the same
// condition before overwriting the state.
//===----------------------------------------------------------------------===//
#include "cpu/ThreadPool.h"
#include "loom/runtime/CpuAffinity.h"

#include <algorithm>

namespace loom::rt {

ThreadPool::ThreadPool(int threads) : ThreadPool(threads, pinnedRankCpus()) {}

ThreadPool::ThreadPool(int threads, const std::vector<int> &cpus) {
  int n = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  // A pinned rank (CpuAffinity.h) keeps each worker on a CPU of its own
  // within the rank's set; the caller, which the set's remaining CPU
  // leaves room for, is left to the kernel. A pool larger than the set is
  // not pinned.
  bool pin = int(cpus.size()) >= n;
  for (int i = 1; i < n; ++i) {
    int cpu = pin ? cpus[size_t(i)] : -1;
    workers_.emplace_back([this, cpu] {
      std::string err;
      if (cpu >= 0)
        pinCurrentThread({cpu}, err); // on failure the worker runs unpinned, as before
      workerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void ThreadPool::runChunks() {
  for (int64_t c; (c = nextChunk_.fetch_add(1)) < numChunks_;) {
    int64_t begin = c * chunk_;
    (*body_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_)
      return;
    seen = generation_;
    ++busy_;
    lock.unlock();
    runChunks();
    lock.lock();
    if (--busy_ == 0)
      idle_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain, const Body &body) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || n < 2 * grain) {
    body(0, n);
    return;
  }
  // About four chunks per thread: enough to balance uneven rows, few enough
  // that the atomic counter is not contended.
  int64_t chunk = std::max(grain, (n + 4 * size() - 1) / (4 * size()));
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return busy_ == 0; });
    body_ = &body;
    n_ = n;
    chunk_ = chunk;
    numChunks_ = (n + chunk - 1) / chunk;
    nextChunk_.store(0);
    ++generation_;
  }
  wake_.notify_all();
  runChunks();
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return busy_ == 0; });
}

} // namespace loom::rt
