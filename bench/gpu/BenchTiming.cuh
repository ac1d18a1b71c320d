//===- BenchTiming.cuh - What the standalone kernel benches share ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// CHECK (a CUDA call that fails ends the bench with its message) and
// timeMs (two warm-up launches, then the mean of `reps` launches between
// two events) for bench/gpu/*_bench.cu.
//===----------------------------------------------------------------------===//
#ifndef LOOM_BENCH_GPU_BENCHTIMING_CUH
#define LOOM_BENCH_GPU_BENCHTIMING_CUH

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                   \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

/// Milliseconds per launch() over `reps` launches, after two warm-ups.
template <typename F> float timeMs(F &&launch, int reps = 20) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();
  launch();
  CHECK(cudaEventRecord(a));
  for (int r = 0; r < reps; ++r) launch();
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  CHECK(cudaGetLastError());
  return ms / reps;
}

#endif
