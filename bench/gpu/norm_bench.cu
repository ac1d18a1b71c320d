//===- norm_bench.cu - Where rms_norm_grad loses its time -----------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Times the runtime's own norm-gradient kernels (NormKernels.cu is
// included, so these are its kernels, not copies) on the operands the
// suite's steps give them: f32 x [rows, D], bf16 dy, f32 dx, and for the
// residual stream's norms an f32 addend and dx's bf16 rounded copy. For
// each form, the streaming kernel (dx and the weight gradients' partials in
// one pass, then the finish) against the two-pass form (the row kernel, the
// column partials, the finish), the pieces timed one by one.
//
//   nvcc -O3 -arch=sm_90 --expt-relaxed-constexpr -std=c++17 -I runtime/include \
//     -I runtime bench/gpu/norm_bench.cu -o nb && ./nb [rows D]
//===----------------------------------------------------------------------===//
#include "cuda/NormKernels.cu"
#include "BenchTiming.cuh"

#include <cstdio>

// What the launchers in NormKernels.cu call elsewhere in the runtime; the
// bench launches kernels directly, so these never run.
namespace loom::rt {
bool storesRoundedDx(const Instr &) { return false; }
} // namespace loom::rt
namespace loom::rt::cuda {
uint32_t *fusedAmaxBits(const CudaCall &, size_t) { return nullptr; }
void launchBinary(const CudaCall &, CudaContext &) {}
void castTensor(const DevTensor &, const DevTensor &, CudaContext &) {}
} // namespace loom::rt::cuda

using namespace loom::rt::cuda;


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


/// The kernels here are short: 50 launches a figure, not BenchTiming's 20.
template <typename F> float timeFifty(F &&launch) { return timeMs(launch, 50); }

int main(int argc, char **argv) {
  int64_t rows = argc > 1 ? atoll(argv[1]) : 8192, D = argc > 2 ? atoll(argv[2]) : 2048;
  int64_t n = rows * D;
  float *x, *w, *dx, *dw, *db, *addend;
  uint16_t *dy, *copy;
  CHECK(cudaMalloc(&x, n * 4));
  CHECK(cudaMalloc(&dx, n * 4));
  CHECK(cudaMalloc(&addend, n * 4));
  CHECK(cudaMalloc(&dy, n * 2));
  CHECK(cudaMalloc(&copy, n * 2));
  CHECK(cudaMalloc(&w, D * 4));
  CHECK(cudaMalloc(&dw, D * 4));
  CHECK(cudaMalloc(&db, D * 4));
  fill<<<2048, 256>>>(x, nullptr, n, 1);
  fill<<<2048, 256>>>(nullptr, dy, n, 2);
  fill<<<2048, 256>>>(addend, nullptr, n, 4);
  fill<<<64, 256>>>(w, nullptr, D, 3);
  ColumnChunks ch = columnChunks(rows, D);
  printf("rows %lld, D %lld: columnChunks %lld rows x %lld chunks\n", (long long)rows,
         (long long)D, (long long)ch.rows, (long long)ch.count);
  int64_t most = std::max<int64_t>(ch.count, rows); // room for any chunking
  double *stats, *partial, *partialB;
  CHECK(cudaMalloc(&stats, 2 * rows * 8));
  CHECK(cudaMalloc(&partial, most * D * 8));
  CHECK(cudaMalloc(&partialB, most * D * 8));
  for (int form = 0; form < 4; ++form) {
    // 0 RmsNorm, 1 RmsNorm with addend and copy (the residual stream's),
    // 2 LayerNorm, 3 LayerNorm with addend and copy
    const bool ln = form >= 2, add = form % 2 == 1;
    const float *a = add ? addend : nullptr;
    const FloatOut cp = add ? FloatOut{copy, true} : FloatOut{};
    const double bytes = double(n) * (4 + 2 + 4 + (add ? 4 + 2 : 0));
    const char *name = form == 0 ? "rms_norm_grad" : form == 1 ? "rms_norm_grad +addend +copy"
                     : form == 2 ? "layer_norm_grad" : "layer_norm_grad +addend +copy";
    auto report = [&](const char *what, float ms) {
      printf("%-30s %-34s %8.4f ms  %6.0f GB/s\n", name, what, ms, bytes / ms / 1e6);
    };
    int threads = streamThreads(D);
    if (!streamable(D)) {
      printf("%-30s rows of %lld: the two-pass form alone\n", name, (long long)D);
      continue;
    }
    ColumnChunks sc = streamChunks(ln, add, rows, D);
    char what[96];
    snprintf(what, sizeof what, "stream (%d thr, %lld x %lld rows)", threads,
             (long long)sc.count, (long long)sc.rows);
    auto stream = [&](ColumnChunks c) {
      auto go = [&](auto kernel) {
        kernel<<<unsigned(c.count), unsigned(threads)>>>(
            FloatIn{x, false}, w, FloatIn{dy, true}, FloatOut{dx, false}, a, partial, partialB,
            rows, D, 1e-5, c.rows, nullptr, cp);
      };
      if (ln) add ? go(normGradStreamKernel<true, true>) : go(normGradStreamKernel<true, false>);
      else add ? go(normGradStreamKernel<false, true>) : go(normGradStreamKernel<false, false>);
    };
    float tStream = timeFifty([&] { stream(sc); });
    report(what, tStream);
    for (int64_t chunk : {16, 32, 64}) {
      ColumnChunks c{chunk, (rows + chunk - 1) / chunk};
      snprintf(what, sizeof what, "  stream, %lld-row chunks", (long long)chunk);
      report(what, timeFifty([&] { stream(c); }));
    }
    float tFinish = timeFifty([&] {
      for (int set = 0; set < (ln ? 2 : 1); ++set)
        columnFinishKernel<<<finishBlocks(D), kRowThreads>>>(set ? partialB : partial,
                                                             set ? db : dw, sc.count, D);
    });
    report("  + finish", tFinish);
    float tRow = timeFifty([&] {
      auto go = [&](auto kernel) {
        kernel<<<unsigned(rows), kRowThreads>>>(FloatIn{x, false}, w, FloatIn{dy, true},
                                                 FloatOut{dx, false}, a, stats, D, 1e-5, nullptr,
                                                 cp);
      };
      int packs = cachedPacks(D, true);
      if (packs == 2) ln ? go(normGradCachedKernel<true, 2>) : go(normGradCachedKernel<false, 2>);
      else ln ? go(normGradCachedKernel<true, 4>) : go(normGradCachedKernel<false, 4>);
    });
    report("two-pass: row kernel (cached)", tRow);
    float tCols = timeFifty([&] {
      launchColumnPartialPacked(ln ? 1 : 0, FloatIn{x, false}, FloatIn{dy, true}, stats, partial,
                                ln ? partialB : nullptr, rows, D, ch, 0);
    });
    report("two-pass: column partials", tCols);
    float tFinish2 = timeFifty([&] {
      for (int set = 0; set < (ln ? 2 : 1); ++set)
        columnFinishKernel<<<finishBlocks(D), kRowThreads>>>(set ? partialB : partial,
                                                             set ? db : dw, ch.count, D);
    });
    report("two-pass: finish", tFinish2);
    printf("%-30s stream %.4f ms, two-pass %.4f ms (%.2fx)\n", name, tStream + tFinish,
           tRow + tCols + tFinish2, (tRow + tCols + tFinish2) / (tStream + tFinish));
  }
  return 0;
}
