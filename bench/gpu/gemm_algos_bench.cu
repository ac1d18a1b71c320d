//===- gemm_algos_bench.cu - cuBLASLt's heuristic list, each entry timed --===//
//
// Part of loom, under the Apache License v2.0.
//
// The runtime (runtime/cuda/MatMul.cpp) runs the first algorithm cuBLASLt's
// heuristic returns for each product. This times the first eight it
// returns, on the Llama-3.2-1B step's 16 GEMM shapes (B=4, T=2048; the
// H200 profile had them at 224 to 790 TFLOP/s), laid out as MatMul.cpp
// lays them out (row-major operands read as column-major transposes, 64-byte
// alignment, 32 MiB of workspace): how much a choice among them could give.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu/gemm_algos_bench.cu -lcublasLt -o gb && ./gb
//===----------------------------------------------------------------------===//
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Shape {
  long m, n, k;
  bool transA, transB, f32Out;
  int count; // in the step
};

int main() {
  // M x N x K as the profile prints them (out[M, N] = op(A)[M, K] op(B)[K, N]).
  const std::vector<Shape> shapes = {
      {8192, 8192, 2048, false, false, false, 32}, {8192, 2048, 8192, false, true, true, 32},
      {2048, 8192, 8192, true, false, false, 32},  {8192, 8192, 2048, false, true, false, 16},
      {8192, 2048, 8192, true, false, false, 16},  {8192, 128256, 2048, false, true, false, 1},
      {128256, 2048, 8192, true, false, false, 1}, {8192, 2048, 8192, false, false, false, 16},
      {8192, 2048, 128256, false, false, false, 1}, {8192, 2048, 2048, false, false, false, 32},
      {2048, 2048, 8192, true, false, false, 32},  {2048, 512, 8192, true, false, false, 32},
      {8192, 2048, 2048, false, true, false, 16},  {8192, 2048, 2048, false, true, true, 16},
      {8192, 2048, 512, false, true, true, 32},    {8192, 512, 2048, false, false, false, 32},
  };
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  size_t maxElems = 0;
  for (const Shape &s : shapes)
    maxElems = std::max({maxElems, size_t(s.m * s.k), size_t(s.k * s.n), size_t(s.m * s.n)});
  void *a, *b, *c, *ws;
  const size_t wsBytes = size_t(32) << 20;
  cudaMalloc(&a, maxElems * 2);
  cudaMalloc(&b, maxElems * 2);
  cudaMalloc(&c, maxElems * 4);
  cudaMalloc(&ws, wsBytes);
  cudaMemset(a, 0x3c, maxElems * 2); // bf16 ~0.0115 everywhere: finite products
  cudaMemset(b, 0x3c, maxElems * 2);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  double bestTotal = 0, firstTotal = 0;
  for (const Shape &s : shapes) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    cudaDataType_t out = s.f32Out ? CUDA_R_32F : CUDA_R_16BF;
    long ldb = s.transB ? s.k : s.n, lda = s.transA ? s.m : s.k;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.transB ? s.k : s.n, s.transB ? s.n : s.k, ldb);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.transA ? s.m : s.k, s.transA ? s.k : s.m, lda);
    cublasLtMatrixLayoutCreate(&lc, out, s.n, s.m, s.n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t wsb = wsBytes;
    uint32_t al = 64;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t results[8];
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 8, results, &found);
    double flop = 2.0 * s.m * s.n * s.k;
    printf("%ldx%ldx%ld%s%s ->%s (x%d):", s.m, s.n, s.k, s.transA ? " tA" : "", s.transB ? " tB" : "",
           s.f32Out ? "f32" : "bf16", s.count);
    double best = 1e30, first = 0;
    int bestIdx = -1;
    for (int i = 0; i < found; ++i) {
      float alpha = 1, beta = 0;
      auto go = [&] {
        return cublasLtMatmul(h, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &results[i].algo,
                              ws, wsBytes, 0);
      };
      if (go() != CUBLAS_STATUS_SUCCESS) {
        printf("  [%d] fails", i);
        continue;
      }
      go();
      cudaEventRecord(e0);
      const int reps = 20;
      for (int r = 0; r < reps; ++r) go();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      ms /= reps;
      if (i == 0) first = ms;
      if (ms < best) best = ms, bestIdx = i;
      printf("  [%d] %.0f", i, flop / ms / 1e9);
    }
    printf("  TFLOP/s; best [%d] %.3f ms vs [0] %.3f ms (%+.1f%%)\n", bestIdx, best, first,
           100.0 * (best / first - 1));
    bestTotal += best * s.count;
    firstTotal += first * s.count;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
  }
  printf("per step: heuristic's first %.2f ms, best of eight %.2f ms (%+.1f%%)\n", firstTotal,
         bestTotal, 100.0 * (bestTotal / firstTotal - 1));
  return 0;
}
