//===- ThreadPool.h - A fixed pool of threads for parallel loops -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Kernels split their outer loop (rows, batch entries, output tiles) with
// parallelFor. The calling thread works too, so a pool of N threads starts
// N - 1 workers. Chunks are handed out dynamically from an atomic counter,
// so uneven work (causal attention rows, ragged tiles) still balances.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPU_THREADPOOL_H
#define LOOM_RUNTIME_CPU_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::rt {

class ThreadPool {
public:
  using Body = std::function<void(int64_t begin, int64_t end)>;

  /// `threads` <= 0 means one per hardware thread. In a rank the launcher
  /// pinned (rt::pinnedRankCpus), worker i runs on the rank's i-th CPU.
  explicit ThreadPool(int threads);
  /// Worker i (1..threads-1) on cpus[i] when `cpus` has a CPU per thread;
  /// unpinned otherwise.
  ThreadPool(int threads, const std::vector<int> &cpus);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Number of threads that run a parallelFor, the caller included.
  int size() const { return int(workers_.size()) + 1; }

  /// Calls body(begin, end) on disjoint ranges that cover [0, n), spread over
  /// the pool, and returns when all are done. `grain` is the smallest range
  /// worth a task: below 2 * grain items everything runs on the caller.
  /// Must not be called from inside a body (the pool does not nest).
  void parallelFor(int64_t n, int64_t grain, const Body &body);

private:
  void workerLoop();
  void runChunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  bool stop_ = false;
  uint64_t generation_ = 0; // bumped per parallelFor, wakes the workers
  int busy_ = 0;            // workers inside runChunks()

  // The current loop; written under mu_ while no worker is busy.
  const Body *body_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, numChunks_ = 0;
  std::atomic<int64_t> nextChunk_{0};
};

} // namespace loom::rt

#endif
