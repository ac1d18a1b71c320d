//===- elementwise_bench.cu - Where swiglu_grad and AdamW lose their time --===//
//
// Part of loom, under the Apache License v2.0.
//
// A standalone timing of kernel forms on the Llama-3.2-1B step's operands
// (the H200 profile had swiglu_grad at 1,356 GB/s and AdamW at 3 TB/s
// against 3.9 TB/s for the adds), written to choose between them before
// the runtime changed: results in bench/gpu/h200-2026-11-28-b/. Same
// helpers as the runtime's kernels (CudaCommon.cuh,
// CertifiedActivations.h); the double paths here are the runtime's
// formulas, so the fallback rate and the timing are theirs. Only the
// timing matters: no result is checked here (the runtime's tests do that
// for the forms that ship: the queued one and AdamW in f32).
//
//   nvcc -O3 -arch=sm_90 --fmad=false --expt-relaxed-constexpr -std=c++17 \
//     -I runtime/include -I runtime bench/gpu/elementwise_bench.cu -o eb && ./eb
//
// swiglu_grad forms over bf16 g, u, dy -> dg, du, [8192, 8192]:
//   copy      reads three, writes two: the bandwidth roof
//   inline    the runtime's form before: 8 certified elements, then the
//             double path for each undecided one, inside the pack's loop
//   fastonly  no double path (wrong bits where undecided): counts the
//             undecided elements (its time is its per-thread atomics')
//   queued    undecided elements queue per warp in shared memory and run
//             the double path 32 at a time, all lanes busy (the runtime's
//             certifiedPacks now); x2: two packs a thread in flight
// AdamW over 1.24e9 f32 p, m, v, f32 g, + a bf16 copy of p:
//   copy      reads four, writes three f32 and one bf16
//   double    the runtime's double arithmetic before; x2: two packs in flight
//   float     the same formula in f32 (what cpu/AdamWMath.h now computes)
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "BenchTiming.cuh"
#define LOOM_CERT_FN __device__ inline
#include "cuda/CertifiedActivations.h"

#include <cstdio>
#include <cstdlib>

using namespace loom::rt::cuda;
namespace certified = loom::rt::certified;

using DeviceMath = certified::CudaMath;


// Normal samples by hash and Box-Muller, scaled.
__device__ float normalAt(uint64_t i, uint32_t seed) {
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(seed) << 32);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  float a = float((h & 0xffffff) + 1) / 16777217.0f, b = float((h >> 24) & 0xffffff) / 16777216.0f;
  return sqrtf(-2.0f * logf(a)) * cospif(2.0f * b);
}

__global__ void fillBf16(uint16_t *p, int64_t n, uint32_t seed, float scale) {
  LOOM_GRID_STRIDE(i, n) p[i] = floatToBf16(scale * normalAt(uint64_t(i), seed));
}
__global__ void fillF32(float *p, int64_t n, uint32_t seed, float scale, bool positive) {
  LOOM_GRID_STRIDE(i, n) {
    float v = scale * normalAt(uint64_t(i), seed);
    p[i] = positive ? v * v : v;
  }
}

//===--- swiglu_grad ------------------------------------------------------===//

__device__ double siluDerivative(double v) {
  double s = 1.0 / (1.0 + exp(-v));
  return s * (1.0 + v * (1.0 - s));
}

__device__ __noinline__ float2 swiGluGradDouble(float g, float u, float dy) {
  double d = dy, gd = g;
  return make_float2(float(d * double(u) * siluDerivative(gd)), float(d * (gd / (1.0 + exp(-gd)))));
}

__global__ void copyKernel(FloatIn g, FloatIn u, FloatIn dy, FloatOut dg, FloatOut du, int64_t n) {
  LOOM_PACK_STRIDE(i, n) {
    Pack a = load8(g, i), b = load8(u, i), d = load8(dy, i), rg, ru;
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      rg.v[k] = a.v[k] + d.v[k];
      ru.v[k] = b.v[k] + d.v[k];
    }
    store8(dg, i, rg);
    store8(du, i, ru);
  }
}

template <bool kFallback>
__global__ void inlineKernel(FloatIn g, FloatIn u, FloatIn dy, FloatOut dg, FloatOut du, int64_t n,
                             unsigned long long *undecidedCount) {
  unsigned count = 0;
  LOOM_PACK_STRIDE(i, n) {
    Pack a = load8(g, i), b = load8(u, i), d = load8(dy, i), rg, ru;
    unsigned undecided = 0;
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      undecided |= certified::swiGluGradFast<DeviceMath>(a.v[k], b.v[k], d.v[k], rg.v[k], ru.v[k])
                       ? 0u
                       : 1u << k;
    if (kFallback && undecided) {
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        if (undecided >> k & 1u) {
          float2 r = swiGluGradDouble(a.v[k], b.v[k], d.v[k]);
          rg.v[k] = r.x;
          ru.v[k] = r.y;
        }
    }
    count += __popc(undecided);
    store8(dg, i, rg);
    store8(du, i, ru);
  }
  if (!kFallback) atomicAdd(undecidedCount, (unsigned long long)count);
}

// The queue: per warp, undecided element indices in shared memory; the
// warp runs them through the double path 32 at a time (each lane one),
// after a __syncwarp that orders the packs' stores before the overwrites.
constexpr int kQueue = 32 + 32 * kPack; // a full batch left over + one pack per lane

__device__ void drainQueue(const int64_t *q, int count, FloatIn g, FloatIn u, FloatIn dy,
                           FloatOut dg, FloatOut du, int lane) {
  __syncwarp();
  if (lane < count) {
    int64_t j = q[lane];
    float2 r = swiGluGradDouble(g[j], u[j], dy[j]);
    dg.store(j, r.x);
    du.store(j, r.y);
  }
  __syncwarp();
}

__global__ void queuedKernel(FloatIn g, FloatIn u, FloatIn dy, FloatOut dg, FloatOut du, int64_t n) {
  __shared__ int64_t queues[kThreads / 32][kQueue];
  int lane = threadIdx.x & 31;
  int64_t *q = queues[threadIdx.x >> 5];
  int count = 0; // warp-uniform
  // The warp walks its packs together (every lane takes each trip), so the
  // ballots below see all 32 lanes; lanes past n only take part.
  int64_t stride = int64_t(gridDim.x) * blockDim.x * kPack;
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31)) * kPack; base < n;
       base += stride) {
    int64_t i = base + int64_t(lane) * kPack;
    unsigned undecided = 0;
    if (i < n) {
      Pack a = load8(g, i), b = load8(u, i), d = load8(dy, i), rg, ru;
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        undecided |= certified::swiGluGradFast<DeviceMath>(a.v[k], b.v[k], d.v[k], rg.v[k], ru.v[k])
                         ? 0u
                         : 1u << k;
      store8(dg, i, rg);
      store8(du, i, ru);
    }
    if (__any_sync(0xffffffffu, undecided)) {
      unsigned below = (1u << lane) - 1u;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        unsigned mask = __ballot_sync(0xffffffffu, undecided >> k & 1u);
        if (undecided >> k & 1u) q[count + __popc(mask & below)] = i + k;
        count += __popc(mask);
      }
      while (count >= 32) {
        drainQueue(q + count - 32, 32, g, u, dy, dg, du, lane);
        count -= 32;
      }
    }
  }
  if (count) drainQueue(q, count, g, u, dy, dg, du, lane);
}

//===--- AdamW ------------------------------------------------------------===//

__global__ void adamCopy(const float *p, const float *g, const float *m, const float *v, float *po,
                         float *mo, float *vo, FloatOut copy, int64_t n) {
  LOOM_PACK_STRIDE(i, n) {
    Pack pp = load8({p, false}, i), gp = load8({g, false}, i), mp = load8({m, false}, i),
         vp = load8({v, false}, i);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      pp.v[k] += gp.v[k];
      mp.v[k] += gp.v[k];
      vp.v[k] += gp.v[k];
    }
    store8({po, false}, i, pp);
    store8({mo, false}, i, mp);
    store8({vo, false}, i, vp);
    store8(copy, i, pp);
  }
}

template <typename T>
__global__ void adamKernel(const float *p, const float *g, const float *m, const float *v,
                           float *po, float *mo, float *vo, FloatOut copy, int64_t n, T b1, T b2,
                           T eps, T stepSize, T bc2Sqrt, T decay) {
  LOOM_PACK_STRIDE(i, n) {
    Pack pp = load8({p, false}, i), gp = load8({g, false}, i), mp = load8({m, false}, i),
         vp = load8({v, false}, i);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      T gi = gp.v[k];
      T mi = b1 * T(mp.v[k]) + (T(1) - b1) * gi;
      T vi = b2 * T(vp.v[k]) + (T(1) - b2) * gi * gi;
      pp.v[k] = float(T(pp.v[k]) * decay - stepSize * mi / (sqrt(vi) / bc2Sqrt + eps));
      mp.v[k] = float(mi);
      vp.v[k] = float(vi);
    }
    store8({po, false}, i, pp);
    store8({mo, false}, i, mp);
    store8({vo, false}, i, vp);
    store8(copy, i, pp);
  }
}

// U packs a thread per trip, all loaded before any is computed: more bytes
// in flight while the double arithmetic runs.
template <int U>
__global__ void adamKernelU(const float *p, const float *g, const float *m, const float *v,
                            float *po, float *mo, float *vo, FloatOut copy, int64_t n, double b1,
                            double b2, double eps, double stepSize, double bc2Sqrt, double decay) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * kPack;
  for (int64_t i0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPack; i0 < n;
       i0 += U * stride) {
    Pack pp[U], gp[U], mp[U], vp[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int64_t i = i0 + u * stride;
      if (i < n) {
        pp[u] = load8({p, false}, i);
        gp[u] = load8({g, false}, i);
        mp[u] = load8({m, false}, i);
        vp[u] = load8({v, false}, i);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int64_t i = i0 + u * stride;
      if (i >= n) break;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        double gi = gp[u].v[k];
        double mi = b1 * mp[u].v[k] + (1.0 - b1) * gi;
        double vi = b2 * vp[u].v[k] + (1.0 - b2) * gi * gi;
        pp[u].v[k] = float(pp[u].v[k] * decay - stepSize * mi / (sqrt(vi) / bc2Sqrt + eps));
        mp[u].v[k] = float(mi);
        vp[u].v[k] = float(vi);
      }
      store8({po, false}, i, pp[u]);
      store8({mo, false}, i, mp[u]);
      store8({vo, false}, i, vp[u]);
      store8(copy, i, pp[u]);
    }
  }
}

// swiglu_grad, queued, U packs a thread per trip loaded up front.
template <int U>
__global__ void queuedKernelU(FloatIn g, FloatIn u, FloatIn dy, FloatOut dg, FloatOut du, int64_t n) {
  __shared__ int64_t queues[kThreads / 32][32 + 32 * kPack * U];
  int lane = threadIdx.x & 31;
  int64_t *q = queues[threadIdx.x >> 5];
  int count = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * kPack;
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31)) * kPack; base < n;
       base += U * stride) {
    int64_t i0 = base + int64_t(lane) * kPack;
    Pack a[U], b[U], d[U];
#pragma unroll
    for (int s = 0; s < U; ++s)
      if (i0 + s * stride < n) {
        a[s] = load8(g, i0 + s * stride);
        b[s] = load8(u, i0 + s * stride);
        d[s] = load8(dy, i0 + s * stride);
      }
    unsigned undecided[U] = {};
#pragma unroll
    for (int s = 0; s < U; ++s) {
      int64_t i = i0 + s * stride;
      if (i < n) {
        Pack rg, ru;
#pragma unroll
        for (int k = 0; k < kPack; ++k)
          undecided[s] |= certified::swiGluGradFast<DeviceMath>(a[s].v[k], b[s].v[k], d[s].v[k],
                                                                  rg.v[k], ru.v[k])
                              ? 0u
                              : 1u << k;
        store8(dg, i, rg);
        store8(du, i, ru);
      }
    }
    unsigned any = 0;
#pragma unroll
    for (int s = 0; s < U; ++s) any |= undecided[s];
    if (__any_sync(0xffffffffu, any)) {
      unsigned below = (1u << lane) - 1u;
#pragma unroll
      for (int s = 0; s < U; ++s)
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          unsigned mask = __ballot_sync(0xffffffffu, undecided[s] >> k & 1u);
          if (undecided[s] >> k & 1u) q[count + __popc(mask & below)] = i0 + s * stride + k;
          count += __popc(mask);
        }
      while (count >= 32) {
        drainQueue(q + count - 32, 32, g, u, dy, dg, du, lane);
        count -= 32;
      }
    }
  }
  if (count) drainQueue(q, count, g, u, dy, dg, du, lane);
}

//===--- Timing -----------------------------------------------------------===//


int main(int argc, char **argv) {
  int64_t rows = argc > 1 ? atoll(argv[1]) : 8192, cols = argc > 2 ? atoll(argv[2]) : 8192;
  int64_t n = rows * cols;
  double dyScale = argc > 3 ? atof(argv[3]) : 1e-4;
  uint16_t *g, *u, *dy, *dg, *du;
  for (uint16_t **p : {&g, &u, &dy, &dg, &du}) CHECK(cudaMalloc(p, size_t(n) * 2));
  fillBf16<<<2048, 256>>>(g, n, 1, 1.0f);
  fillBf16<<<2048, 256>>>(u, n, 2, 1.0f);
  fillBf16<<<2048, 256>>>(dy, n, 3, float(dyScale));
  unsigned long long *count;
  CHECK(cudaMalloc(&count, 8));
  CHECK(cudaMemset(count, 0, 8));
  FloatIn G{g, true}, U{u, true}, DY{dy, true};
  FloatOut DG{dg, true}, DU{du, true};
  double bytes = 10.0 * double(n);
  auto report = [&](const char *name, float ms, double b) {
    printf("%-24s %8.3f ms  %7.0f GB/s\n", name, ms, b / ms / 1e6);
  };
  report("swiglu_grad copy", timeMs([&] { copyKernel<<<packGrid(n), kThreads>>>(G, U, DY, DG, DU, n); }), bytes);
  report("swiglu_grad inline", timeMs([&] {
           inlineKernel<true><<<packGrid(n), kThreads>>>(G, U, DY, DG, DU, n, count);
         }), bytes);
  CHECK(cudaMemset(count, 0, 8));
  report("swiglu_grad fastonly", timeMs([&] {
           inlineKernel<false><<<packGrid(n), kThreads>>>(G, U, DY, DG, DU, n, count);
         }, 1), bytes);
  unsigned long long undecided;
  CHECK(cudaMemcpy(&undecided, count, 8, cudaMemcpyDeviceToHost));
  // timeMs launched it 3 times (2 warm-ups + 1 timed).
  printf("undecided elements: %.4f%%\n", 100.0 * double(undecided) / 3.0 / double(n));
  report("swiglu_grad queued", timeMs([&] {
           queuedKernel<<<packGrid(n), kThreads>>>(G, U, DY, DG, DU, n);
         }), bytes);
  report("swiglu_grad queued x2", timeMs([&] {
           queuedKernelU<2><<<packGrid(n) / 2 + 1, kThreads>>>(G, U, DY, DG, DU, n);
         }), bytes);
  report("swiglu_grad queued x2 full grid", timeMs([&] {
           queuedKernelU<2><<<packGrid(n), kThreads>>>(G, U, DY, DG, DU, n);
         }), bytes);
  for (uint16_t *p : {g, u, dy, dg, du}) CHECK(cudaFree(p));

  int64_t params = argc > 4 ? atoll(argv[4]) : 1235814400;
  float *p, *gr, *m, *v;
  uint16_t *copy;
  for (float **q : {&p, &gr, &m, &v}) CHECK(cudaMalloc(q, size_t(params) * 4));
  CHECK(cudaMalloc(&copy, size_t(params) * 2));
  fillF32<<<2048, 256>>>(p, params, 4, 0.02f, false);
  fillF32<<<2048, 256>>>(gr, params, 5, 1e-3f, false);
  fillF32<<<2048, 256>>>(m, params, 6, 1e-4f, false);
  fillF32<<<2048, 256>>>(v, params, 7, 1e-4f, true);
  double abytes = 30.0 * double(params);
  FloatOut C{copy, true};
  report("adamw copy", timeMs([&] { adamCopy<<<packGrid(params), kThreads>>>(p, gr, m, v, p, m, v, C, params); }, 5), abytes);
  report("adamw double", timeMs([&] {
           adamKernel<double><<<packGrid(params), kThreads>>>(p, gr, m, v, p, m, v, C, params, 0.9, 0.95, 1e-8, 3e-4, 0.1, 0.9999);
         }, 5), abytes);
  report("adamw double x2", timeMs([&] {
           adamKernelU<2><<<packGrid(params), kThreads>>>(p, gr, m, v, p, m, v, C, params, 0.9, 0.95, 1e-8, 3e-4, 0.1, 0.9999);
         }, 5), abytes);
  report("adamw double x1 (U form)", timeMs([&] {
           adamKernelU<1><<<packGrid(params), kThreads>>>(p, gr, m, v, p, m, v, C, params, 0.9, 0.95, 1e-8, 3e-4, 0.1, 0.9999);
         }, 5), abytes);
  report("adamw float", timeMs([&] {
           adamKernel<float><<<packGrid(params), kThreads>>>(p, gr, m, v, p, m, v, C, params, 0.9f, 0.95f, 1e-8f, 3e-4f, 0.1f, 0.9999f);
         }, 5), abytes);
  return 0;
}
