//===- sibling_gemm_bench.cu - Sibling projections apart and as one GEMM ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Llama-3.2-1B's step (B=4, T=2048: 8,192 rows) runs q, k and v, and gate
// and up, as separate products that read the same normed activations. One
// product over the concatenated weights would have the same FLOPs in
// fewer, wider GEMMs; in the backward, the input gradient's sum over the
// siblings becomes one product over a K as wide as all of them (no
// addend pass). This times both forms of each of the six groups as
// MatMul.cpp runs them (row-major operands read as column-major
// transposes, the best of cuBLASLt's first eight algorithms, 32 MiB of
// workspace), the groups in turn, three rounds: what the fusion could give
// before the layout work it needs.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu/sibling_gemm_bench.cu -lcublasLt -o sgb && ./sgb
//===----------------------------------------------------------------------===//
#include "BenchTiming.cuh"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

struct Gemm {
  long m, n, k;
  bool transA, transB, f32Out, addend;
};

struct Group {
  const char *name;
  std::vector<Gemm> apart;
  Gemm fused;
  int perStep; // groups in a step (layers)
};

cublasLtHandle_t handle;
void *bufA, *bufB, *bufC, *workspace;
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// Best of the heuristic's first eight algorithms, ms per product.
float timeGemm(const Gemm &s) {
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  // out[M, N] row-major is out^T column-major: compute B^T A^T.
  cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
  cudaDataType_t out = s.f32Out ? CUDA_R_32F : CUDA_R_16BF;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.transB ? s.k : s.n, s.transB ? s.n : s.k,
                             s.transB ? s.k : s.n);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.transA ? s.m : s.k, s.transA ? s.k : s.m,
                             s.transA ? s.m : s.k);
  cublasLtMatrixLayoutCreate(&lc, out, s.n, s.m, s.n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t wsb = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                       sizeof wsb);
  cublasLtMatmulHeuristicResult_t results[8];
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref, 8, results, &found);
  float best = 1e30f;
  for (int i = 0; i < found; ++i) {
    float alpha = 1, beta = s.addend ? 1.f : 0.f;
    auto go = [&] {
      return cublasLtMatmul(handle, desc, &alpha, bufB, la, bufA, lb, &beta, bufC, lc, bufC, lc,
                            &results[i].algo, workspace, kWorkspaceBytes, 0);
    };
    if (go() != CUBLAS_STATUS_SUCCESS) continue;
    best = std::min(best, timeMs([&] { go(); }, 10));
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  return best;
}

} // namespace

int main() {
  // M x N x K as loom's profile prints them: out[M, N] = op(A)[M, K] op(B)[K, N].
  const long T = 8192, D = 2048, Q = 2048, KV = 512, F = 8192;
  const std::vector<Group> groups = {
      {"qkv forward",
       {{T, Q, D, 0, 0, 0, 0}, {T, KV, D, 0, 0, 0, 0}, {T, KV, D, 0, 0, 0, 0}},
       {T, Q + 2 * KV, D, 0, 0, 0, 0}, 16},
      {"qkv input grad (f32, into an addend)",
       {{T, D, Q, 0, 1, 1, 1}, {T, D, KV, 0, 1, 1, 1}, {T, D, KV, 0, 1, 1, 1}},
       {T, D, Q + 2 * KV, 0, 1, 1, 1}, 16},
      {"qkv weight grad",
       {{D, Q, T, 1, 0, 0, 0}, {D, KV, T, 1, 0, 0, 0}, {D, KV, T, 1, 0, 0, 0}},
       {D, Q + 2 * KV, T, 1, 0, 0, 0}, 16},
      {"gate/up forward", {{T, F, D, 0, 0, 0, 0}, {T, F, D, 0, 0, 0, 0}}, {T, 2 * F, D, 0, 0, 0, 0}, 16},
      {"gate/up input grad (f32)",
       {{T, D, F, 0, 1, 1, 0}, {T, D, F, 0, 1, 1, 1}},
       {T, D, 2 * F, 0, 1, 1, 0}, 16},
      {"gate/up weight grad", {{D, F, T, 1, 0, 0, 0}, {D, F, T, 1, 0, 0, 0}}, {D, 2 * F, T, 1, 0, 0, 0}, 16},
      // The input gradient's output dtype alone: f32 (loom) against bf16.
      {"down-proj-shaped input grad, bf16 out (not a fusion: f32 vs bf16)",
       {{T, D, F, 0, 1, 1, 0}}, {T, D, F, 0, 1, 0, 0}, 16},
  };
  cublasLtCreate(&handle);
  size_t elems = 0;
  for (const Group &g : groups)
    for (const Gemm &s : g.apart)
      elems = std::max({elems, size_t(s.m * s.k), size_t(s.k * s.n), size_t(s.m * s.n)});
  elems = std::max(elems, size_t(T * 2 * F));
  CHECK(cudaMalloc(&bufA, elems * 2));
  CHECK(cudaMalloc(&bufB, elems * 2));
  CHECK(cudaMalloc(&bufC, elems * 4));
  CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  CHECK(cudaMemset(bufA, 0x3c, elems * 2)); // bf16 ~0.0115: finite products
  CHECK(cudaMemset(bufB, 0x3c, elems * 2));
  CHECK(cudaMemset(bufC, 0, elems * 4));
  double savedPerStep = 0;
  for (int round = 0; round < 3; ++round) {
    printf("round %d\n", round);
    savedPerStep = 0;
    for (const Group &g : groups) {
      float apart = 0;
      double flop = 0;
      for (const Gemm &s : g.apart) {
        apart += timeGemm(s);
        flop += 2.0 * s.m * s.n * s.k;
      }
      float fused = timeGemm(g.fused);
      printf("  %-60s apart %.4f ms (%.0f TFLOP/s)  one GEMM %.4f ms (%.0f)  %+.1f%%  x%d: %+.3f ms a step\n",
             g.name, apart, flop / apart / 1e9, fused, flop / fused / 1e9,
             100.0 * (fused / apart - 1), g.perStep, (fused - apart) * g.perStep);
      if (g.name[0] != 'd') savedPerStep += (apart - fused) * g.perStep;
    }
    printf("  sibling fusions together: %.3f ms a step saved\n", savedPerStep);
  }
  return 0;
}
