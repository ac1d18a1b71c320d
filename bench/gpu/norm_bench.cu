//===- norm_bench.cu - Where rms_norm_grad loses its time -----------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Times the runtime's own RmsNorm-gradient kernels (NormKernels.cu is
// included, so these are its kernels, not copies) on the Llama-3.2-1B
// step's operands, f32 x [8192, 2048], bf16 dy, f32 dx: the fused kernel at
// several chunk heights (rows a block walks in turn), and the two-pass form's
// pieces one by one. In the H200 step the fused form ran at 1,021 GB/s.
//
//   nvcc -O3 -arch=sm_90 --expt-relaxed-constexpr -std=c++17 -I runtime/include \
//     -I runtime bench/gpu/norm_bench.cu -o nb && ./nb
//===----------------------------------------------------------------------===//
#include "cuda/NormKernels.cu"

#include <cstdio>

namespace loom::rt::cuda {
uint32_t *fusedAmaxBits(const CudaCall &, size_t) { return nullptr; }
} // namespace loom::rt::cuda

using namespace loom::rt::cuda;

#define CHECK(x)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                   \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

__global__ void fill(float *p, uint16_t *b, int64_t n, uint32_t seed) {
  LOOM_GRID_STRIDE(i, n) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    float v = float(int(h & 0xffff) - 32768) / 16384.0f;
    if (p) p[i] = v;
    if (b) b[i] = floatToBf16(v * 1e-3f);
  }
}

template <typename F> float timeMs(F &&launch, int reps = 50) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();
  launch();
  CHECK(cudaEventRecord(a));
  for (int r = 0; r < reps; ++r) launch();
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaGetLastError());
  return ms / reps;
}

int main(int argc, char **argv) {
  int64_t rows = argc > 1 ? atoll(argv[1]) : 8192, D = argc > 2 ? atoll(argv[2]) : 2048;
  int64_t n = rows * D;
  float *x, *w, *dx, *dw;
  uint16_t *dy;
  double *scratch;
  CHECK(cudaMalloc(&x, n * 4));
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&dy, n * 2));
  CHECK(cudaMalloc(&w, D * 4));
  CHECK(cudaMalloc(&dw, D * 4));
  CHECK(cudaMalloc(&scratch, (2 * rows + rows * D) * 8)); // room for 1-row chunks
  fill<<<2048, 256>>>(x, nullptr, n, 1);
  fill<<<2048, 256>>>(nullptr, dy, n, 2);
  fill<<<64, 256>>>(w, nullptr, D, 3);
  double *stats = scratch, *partial = scratch + 2 * rows;
  double bytes = double(n) * (4 + 2 + 4);
  auto report = [&](const char *name, float ms) {
    printf("%-40s %8.4f ms  %6.0f GB/s (x, dy read, dx written once)\n", name, ms, bytes / ms / 1e6);
  };
  ColumnChunks ch = columnChunks(rows, D);
  printf("rows %lld, D %lld: columnChunks %lld rows x %lld chunks\n", (long long)rows,
         (long long)D, (long long)ch.rows, (long long)ch.count);
  for (int64_t chunk : {64, 32, 16, 8, 4}) {
    int64_t count = (rows + chunk - 1) / chunk;
    char name[64];
    snprintf(name, sizeof name, "fused, %lld-row chunks (%lld blocks)", (long long)chunk,
             (long long)count);
    report(name, timeMs([&] {
             normGradFusedKernel<false><<<unsigned(count), kRowThreads>>>(
                 FloatIn{x, false}, w, FloatIn{dy, true}, FloatOut{dx, false}, nullptr, partial, nullptr, rows, D, 1e-5,
                 chunk, nullptr);
           }));
    snprintf(name, sizeof name, "  + columnFinish (%lld chunks)", (long long)count);
    report(name, timeMs([&] {
             columnFinishKernel<<<finishBlocks(D), kRowThreads>>>(partial, dw, count, D);
           }));
  }
  report("two-pass: row kernel (cached, 2 packs)", timeMs([&] {
           normGradCachedKernel<false, 2><<<unsigned(rows), kRowThreads>>>(
               FloatIn{x, false}, w, FloatIn{dy, true}, FloatOut{dx, false}, nullptr, stats, D, 1e-5, nullptr, FloatOut{});
         }));
  report("two-pass: column partials", timeMs([&] {
           launchColumnPartialPacked(0, FloatIn{x, false}, FloatIn{dy, true}, stats, partial, nullptr, rows, D, ch,
                                     0);
         }));
  report("two-pass: column finish", timeMs([&] {
           columnFinishKernel<<<finishBlocks(D), kRowThreads>>>(partial, dw, ch.count, D);
         }));
  double *partialB = partial + (rows + 15) / 16 * D;
  for (int64_t chunk : {16, 8}) {
    int64_t count = (rows + chunk - 1) / chunk;
    char name[64];
    snprintf(name, sizeof name, "layer_norm fused, %lld-row chunks", (long long)chunk);
    report(name, timeMs([&] {
             normGradFusedKernel<true><<<unsigned(count), kRowThreads>>>(
                 FloatIn{x, false}, w, FloatIn{dy, true}, FloatOut{dx, false}, nullptr, partial, partialB, rows, D, 1e-5,
                 chunk, nullptr);
           }));
  }
  report("layer_norm two-pass: row kernel", timeMs([&] {
           normGradCachedKernel<true, 2><<<unsigned(rows), kRowThreads>>>(
               FloatIn{x, false}, w, FloatIn{dy, true}, FloatOut{dx, false}, nullptr, stats, D, 1e-5, nullptr, FloatOut{});
         }));
  report("layer_norm two-pass: column partials (w, b)", timeMs([&] {
           launchColumnPartialPacked(1, FloatIn{x, false}, FloatIn{dy, true}, stats, partial, partialB, rows, D,
                                     ch, 0);
         }));
  report("rms_norm forward (cached, f32 -> bf16)", timeMs([&] {
           rmsNormCachedKernel<2><<<unsigned(rows), kRowThreads>>>(
               FloatIn{x, false}, w, FloatOut{dy, true}, D, 1e-5, nullptr);
         }));
  return 0;
}
