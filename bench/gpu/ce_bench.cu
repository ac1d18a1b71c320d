//===- ce_bench.cu - The cross-entropy gradient's block size and stores ---===//
//
// Part of loom, under the Apache License v2.0.
//
// Times the runtime's crossEntropyGradKernel (LossKernels.cu is included:
// its kernel, not a copy) on a bf16 lm head's logits [N, V] with the fused
// loss, out of place and in place, with plain or evict-first stores and 1 or
// 4 packs in flight per thread, each right after the kernel before this
// change (ce_old.cu, built from git). Checks that the new kernel's
// gradient and row losses are the old one's bits where the old one read
// packs (V % 8 == 0), and prints the largest difference elsewhere.
//
//   git show <rev>:runtime/cuda/LossKernels.cu > /tmp/old_lk.cu
//   nvcc -O3 -arch=sm_90 --expt-relaxed-constexpr -std=c++17 -I runtime/include -I runtime \
//     -DCE_OLD_SOURCE='"/tmp/old_lk.cu"' bench/gpu/ce_bench.cu bench/gpu/ce_old.cu -o ceb
//   ./ceb [N]
//===----------------------------------------------------------------------===//
#include "cuda/LossKernels.cu"
#include "BenchTiming.cuh"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

void oldCrossEntropyGrad(const void *x, const void *targets, const float *dloss, void *dx,
                         double *rowLoss, int64_t N, int64_t V, bool packed, void *err);

namespace loom::rt::cuda {
size_t embeddingGradScratchBytes(const Program &, const Instr &) { return 0; }
} // namespace loom::rt::cuda

using namespace loom::rt::cuda;


__global__ void fillLogits(uint16_t *b, int64_t n, uint32_t seed) {
  LOOM_GRID_STRIDE(i, n) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    b[i] = floatToBf16(float(int(h & 0xffff) - 32768) / 4096.0f);
  }
}


int main(int argc, char **argv) {
  const int64_t N = argc > 1 ? atoll(argv[1]) : 8192;
  void *err = nullptr;
  CHECK(cudaMalloc(&err, sizeof(loom::rt::cuda::DeviceError)));
  CHECK(cudaMemset(err, 0xff, sizeof(loom::rt::cuda::DeviceError)));
  float *dloss;
  CHECK(cudaMalloc(&dloss, 4));
  float one = 1.f;
  CHECK(cudaMemcpy(dloss, &one, 4, cudaMemcpyHostToDevice));
  double *rowLoss, *rowLossOld;
  CHECK(cudaMalloc(&rowLoss, N * 8));
  CHECK(cudaMalloc(&rowLossOld, N * 8));
  std::vector<int64_t> th(N);
  for (int64_t n = 0; n < N; ++n) th[n] = (n * 7919) % 50000;
  int64_t *tgt;
  CHECK(cudaMalloc(&tgt, N * 8));
  CHECK(cudaMemcpy(tgt, th.data(), N * 8, cudaMemcpyHostToDevice));
  for (int64_t V : {int64_t(128256), int64_t(151936), int64_t(50257)}) {
    const int64_t n = N * V;
    uint16_t *x, *x0, *dx, *dxOld;
    CHECK(cudaMalloc(&x, n * 2));
    CHECK(cudaMalloc(&x0, n * 2));
    CHECK(cudaMalloc(&dx, n * 2));
    CHECK(cudaMalloc(&dxOld, n * 2));
    fillLogits<<<1024, 256>>>(x0, n, uint32_t(V));
    CHECK(cudaMemcpy(x, x0, n * 2, cudaMemcpyDeviceToDevice));
    const double gb = double(n) * 4 / 1e9; // the logits read once, the gradient written once
    printf("== N %lld V %lld (%.2f GB a pass)\n", (long long)N, (long long)V, double(n) * 2 / 1e9);
    const bool oldPacked = V % 8 == 0;
    float oldMs = timeMs([&] { oldCrossEntropyGrad(x, tgt, dloss, dxOld, rowLossOld, N, V, oldPacked, err); });
    printf("old kernel, 256 threads, out of place: %.3f ms (%.0f GB/s)\n", oldMs, gb / oldMs * 1e3);
    // The new kernel: evict-first or plain stores, 1, 2 or 4 packs in flight per thread.
    auto run = [&](auto kernel, int threads, bool inPlace) {
      uint16_t *out = inPlace ? x : dx;
      auto launch = [&] {
        kernel<<<unsigned(N), threads>>>(FloatIn{x, true}, tgt, true, dloss, FloatOut{out, true},
                                         rowLoss, N, V, true, true,
                                         static_cast<loom::rt::cuda::DeviceError *>(err), 0);
      };
      if (inPlace) { // each run must start from the logits: time copy + kernel, less the copy
        float both = timeMs([&] { CHECK(cudaMemcpyAsync(x, x0, n * 2, cudaMemcpyDeviceToDevice)); launch(); }, 10);
        float copy = timeMs([&] { CHECK(cudaMemcpyAsync(x, x0, n * 2, cudaMemcpyDeviceToDevice)); }, 10);
        CHECK(cudaMemcpy(x, x0, n * 2, cudaMemcpyDeviceToDevice));
        return both - copy;
      }
      return timeMs(launch);
    };
    struct Form {
      const char *name;
      void (*kernel)(FloatIn, const void *, bool, const float *, FloatOut, double *, int64_t,
                     int64_t, bool, bool, loom::rt::cuda::DeviceError *, int);
    };
    const Form forms[] = {{"plain, unroll 1", crossEntropyGradKernel<false, 1>},
                          {"evict-first, unroll 1", crossEntropyGradKernel<true, 1>},
                          {"evict-first, unroll 4", crossEntropyGradKernel<true, 4>}};
    // Each form timed right after the old kernel, three times over: the card's
    // clocks drift with its power draw, and a ratio of neighbours does not.
    for (int round = 0; round < 3; ++round)
      for (bool inPlace : {false, true})
        for (const Form &f : forms) {
          float o = timeMs([&] { oldCrossEntropyGrad(x, tgt, dloss, dxOld, rowLossOld, N, V, oldPacked, err); });
          float ms = run(f.kernel, 256, inPlace);
          printf("round %d new %-22s %s: %.3f ms (%.0f GB/s), old %.3f ms: %.3fx old\n", round,
                 f.name, inPlace ? "in place" : "out of place", ms, gb / ms * 1e3, o, o / ms);
        }
    // Bits: the new kernel (256 threads, out of place) against the old one.
    CHECK(cudaMemcpy(x, x0, n * 2, cudaMemcpyDeviceToDevice));
    oldCrossEntropyGrad(x, tgt, dloss, dxOld, rowLossOld, N, V, oldPacked, err);
    crossEntropyGradKernel<true, 1><<<unsigned(N), 256>>>(FloatIn{x, true}, tgt, true, dloss,
        FloatOut{dx, true}, rowLoss, N, V, true, true, static_cast<loom::rt::cuda::DeviceError *>(err), 0);
    CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> a(n), b(n);
    std::vector<double> la(N), lb(N);
    CHECK(cudaMemcpy(a.data(), dx, n * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b.data(), dxOld, n * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(la.data(), rowLoss, N * 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(lb.data(), rowLossOld, N * 8, cudaMemcpyDeviceToHost));
    int64_t diff = 0;
    for (int64_t i = 0; i < n; ++i) diff += a[i] != b[i];
    double worst = 0;
    for (int64_t i = 0; i < N; ++i) worst = std::max(worst, std::fabs(la[i] - lb[i]) / std::fabs(lb[i]));
    printf("bits vs old: %lld of %lld gradient elements differ, row losses' worst relative difference %.3e\n",
           (long long)diff, (long long)n, worst);
    CHECK(cudaFree(x));
    CHECK(cudaFree(x0));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dxOld));
  }
  return 0;
}
