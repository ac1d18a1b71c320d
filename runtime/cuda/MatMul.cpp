//===- MatMul.cpp - Batched matrix products through cuBLASLt --------------===//
//
// Part of loom, under the Apache License v2.0.
//
// out[b] = op(A[b]) op(B[b]) (row-major, b over the broadcast batch shape).
// cuBLASLt is column-major, and a row-major matrix read column-major is its
// transpose, so each product is issued as
//   C^T (N x M) = op(B)^T (N x K) * op(A)^T (K x M)
// with cuBLASLt's first operand the B buffer and its second the A buffer:
//   B stored [K, N] (no transB) reads column-major as [N, K], ld N: op N;
//   B stored [N, K] (transB)    reads as [K, N], ld K:               op T;
//   A stored [M, K] (no transA) reads as [K, M], ld K:               op N;
//   A stored [K, M] (transA)    reads as [M, K], ld M:               op T.
// Batches become one cuBLASLt call where possible:
//   - a weight shared by every batch (B of rank 2, A untransposed and not
//     broadcast) folds the batch into M, the shape of every linear layer;
//   - operands whose per-batch offsets are a fixed multiple of the batch
//     index run as one strided-batched call (stride 0 for a broadcast one);
//   - other broadcasts (e.g. [B, 1] against [1, H]) issue one call per batch.
// Everything — layouts, the heuristic's algorithm, the pointer offsets — is
// planned once per instruction when the executor is created ("heuristics
// cached per shape"); launch() only enqueues.
//
// Precision: f32 products use CUBLAS_COMPUTE_32F, true fp32 with no TF32,
// because the f32 program is the parity reference against PyTorch's fp32
// runs; f64 products use CUBLAS_COMPUTE_64F; bf16 products (autocast) run
// on the tensor cores with an f32 accumulator and f32 scaling, and round
// the result to bf16 once, as the CPU reference does.
//===----------------------------------------------------------------------===//
#include "cpu/Strided.h"
#include "cuda/CudaKernels.h"
#include "lib/Diagnostics.h"

#include <cublasLt.h>

#include <map>

namespace loom::rt::cuda {
namespace {

/// The largest power of two <= 256 that divides `bytes` (256 for 0):
/// what cuBLASLt may assume about a pointer at that byte offset of a
/// cudaMalloc'd (256-byte aligned) block.
uint32_t alignmentOf(uint64_t bytes) {
  uint32_t a = 256;
  while (a > 1 && bytes % a) a /= 2;
  return a;
}

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr; // cuBLASLt's A (= our B), B, C
  cublasLtMatmulAlgo_t algo{};
  bool zeroFill = false; // K == 0: the empty sum
  bool empty = false;    // M == 0 or N == 0
  struct Call {
    int64_t a, b, c; // element offsets of our A, B and out for one call
  };
  std::vector<Call> calls;
  size_t elemBytes = 4;
  bool f64 = false; // alpha/beta are doubles (f64 products) or floats
};

class LtGemmCache : public GemmCache {
public:
  ~LtGemmCache() override {
    for (auto &[i, p] : plans_) {
      if (p.la) cublasLtMatrixLayoutDestroy(p.la);
      if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
      if (p.lc) cublasLtMatrixLayoutDestroy(p.lc);
      if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    }
    if (handle_) cublasLtDestroy(handle_);
  }

  bool init(const Program &prog, size_t workspaceBytes, std::string &err) {
    workspaceBytes_ = workspaceBytes;
    if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) {
      err = "cuBLASLt: cannot create a handle";
      return false;
    }
    for (size_t i = 0; i < prog.instrs.size(); ++i)
      if (prog.instrs[i].op == OpCode::MatMul && !plan(prog, int(i), err)) {
        err = cat("instr ", i, " (MatMul): ", err);
        return false;
      }
    return true;
  }

  void launch(const CudaCall &c, CudaContext &ctx, void *workspace) override {
    GemmPlan &p = plans_.at(c.index);
    if (p.empty) return;
    if (p.zeroFill) {
      cudaMemsetAsync(c.out[0].data, 0, c.out[0].desc->bytes, ctx.stream);
      return;
    }
    const float oneF = 1.f, zeroF = 0.f;
    const double oneD = 1.0, zeroD = 0.0;
    bool f64 = p.f64;
    const void *alpha = f64 ? static_cast<const void *>(&oneD) : &oneF;
    const void *beta = f64 ? static_cast<const void *>(&zeroD) : &zeroF;
    auto *a = static_cast<const uint8_t *>(c.in[0].data);
    auto *b = static_cast<const uint8_t *>(c.in[1].data);
    auto *out = static_cast<uint8_t *>(c.out[0].data);
    for (const GemmPlan::Call &call : p.calls) {
      uint8_t *cp = out + call.c * p.elemBytes;
      cublasLtMatmul(handle_, p.desc, alpha, b + call.b * p.elemBytes, p.la,
                     a + call.a * p.elemBytes, p.lb, beta, cp, p.lc, cp, p.lc, &p.algo, workspace,
                     workspaceBytes_, ctx.stream);
    }
  }

private:
  bool plan(const Program &prog, int index, std::string &err) {
    const Instr &I = prog.instrs[size_t(index)];
    const BufferDesc &A = prog.buffers[I.in[0]], &B = prog.buffers[I.in[1]], &C = prog.buffers[I.out[0]];
    bool ta = I.ints[0] != 0, tb = I.ints[1] != 0;
    const Shape &as = A.shape, &bs = B.shape, &cs = C.shape;
    size_t ra = as.size(), rb = bs.size(), rc = cs.size();
    int64_t m = cs[rc - 2], n = cs[rc - 1], k = ta ? as[ra - 2] : as[ra - 1];
    GemmPlan &p = plans_[index];
    p.elemBytes = dtypeSize(C.dtype);
    if (m == 0 || n == 0) {
      p.empty = true;
      return true;
    }
    if (k == 0) {
      p.zeroFill = true;
      return true;
    }
    Shape batch(cs.begin(), cs.end() - 2);
    Shape aStrides = broadcastStrides(Shape(as.begin(), as.end() - 2), batch);
    Shape bStrides = broadcastStrides(Shape(bs.begin(), bs.end() - 2), batch);
    int64_t batches = 1;
    for (int64_t d : batch) batches *= d;
    bool bShared = std::all_of(bStrides.begin(), bStrides.end(), [](int64_t s) { return s == 0; });
    bool aFull = Shape(as.begin(), as.end() - 2) == batch;

    int64_t rowsM = m, count = 1, strideA = 0, strideB = 0, strideC = m * n;
    if (bShared && aFull && !ta) { // fold the batch into M
      rowsM = batches * m;
      p.calls.push_back({0, 0, 0});
    } else {
      // One strided call when both operands' batch offsets are linear in
      // the flat batch index; one call per batch otherwise.
      std::vector<int64_t> offA(static_cast<size_t>(batches)), offB(static_cast<size_t>(batches));
      for (int64_t i = 0; i < batches; ++i) {
        offA[size_t(i)] = offsetOf(i, batch, aStrides) * m * k;
        offB[size_t(i)] = offsetOf(i, batch, bStrides) * k * n;
      }
      bool linear = true;
      if (batches > 1) {
        strideA = offA[1];
        strideB = offB[1];
        for (int64_t i = 0; i < batches && linear; ++i)
          linear = offA[size_t(i)] == i * strideA && offB[size_t(i)] == i * strideB;
      }
      if (linear) {
        count = batches;
        p.calls.push_back({0, 0, 0});
      } else {
        strideA = strideB = 0;
        for (int64_t i = 0; i < batches; ++i)
          p.calls.push_back({offA[size_t(i)], offB[size_t(i)], i * m * n});
      }
    }

    p.f64 = C.dtype == DType::F64;
    cudaDataType_t type = p.f64 ? CUDA_R_64F : C.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t compute = p.f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    cudaDataType_t scaleType = p.f64 ? CUDA_R_64F : CUDA_R_32F;
    if (cublasLtMatmulDescCreate(&p.desc, compute, scaleType) != CUBLAS_STATUS_SUCCESS) {
      err = "cuBLASLt: cannot create a matmul descriptor";
      return false;
    }
    cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N; // cuBLASLt's A is our B
    cublasOperation_t opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    int64_t ldb = bs[rb - 1], lda = as[ra - 1];
    // Stored (column-major) shapes: our B is [N, K] or [K, N]; our A is
    // [K, rowsM] or [M, K].
    cublasLtMatrixLayoutCreate(&p.la, type, uint64_t(tb ? k : n), uint64_t(tb ? n : k), ldb);
    cublasLtMatrixLayoutCreate(&p.lb, type, uint64_t(ta ? m : k), uint64_t(ta ? k : rowsM), lda);
    cublasLtMatrixLayoutCreate(&p.lc, type, uint64_t(n), uint64_t(rowsM), n);
    if (count > 1) {
      int32_t cnt = int32_t(count);
      int64_t sa = strideB, sb = strideA, sc = strideC; // cuBLASLt's A is our B
      cublasLtMatrixLayoutSetAttribute(p.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &cnt, sizeof cnt);
      cublasLtMatrixLayoutSetAttribute(p.la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa);
      cublasLtMatrixLayoutSetAttribute(p.lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &cnt, sizeof cnt);
      cublasLtMatrixLayoutSetAttribute(p.lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb);
      cublasLtMatrixLayoutSetAttribute(p.lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &cnt, sizeof cnt);
      cublasLtMatrixLayoutSetAttribute(p.lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc);
    }

    // The heuristic must not assume more alignment than every call's
    // pointers have.
    uint32_t alA = 256, alB = 256, alC = 256;
    for (const GemmPlan::Call &call : p.calls) {
      alA = std::min(alA, alignmentOf(B.offset + uint64_t(call.b) * p.elemBytes));
      alB = std::min(alB, alignmentOf(A.offset + uint64_t(call.a) * p.elemBytes));
      alC = std::min(alC, alignmentOf(C.offset + uint64_t(call.c) * p.elemBytes));
    }
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = workspaceBytes_;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alA, sizeof alA);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alB, sizeof alB);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alC, sizeof alC);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alC, sizeof alC);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.la, p.lb, p.lc, p.lc,
                                                       pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      err = cat("cuBLASLt has no algorithm for ", shapeStr(as), (ta ? "^T" : ""), " x ",
                shapeStr(bs), (tb ? "^T" : ""), " (status ", int(st), ")");
      return false;
    }
    p.algo = result.algo;
    return true;
  }

  cublasLtHandle_t handle_ = nullptr;
  size_t workspaceBytes_ = 0;
  std::map<int, GemmPlan> plans_;
};

} // namespace

std::unique_ptr<GemmCache> GemmCache::create(const Program &p, size_t workspaceBytes,
                                             std::string &err) {
  auto cache = std::make_unique<LtGemmCache>();
  if (!cache->init(p, workspaceBytes, err))
    return nullptr;
  return cache;
}

} // namespace loom::rt::cuda
