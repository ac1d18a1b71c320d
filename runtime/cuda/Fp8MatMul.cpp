//===- Fp8MatMul.cpp - ScaledMatMul as cuBLASLt fp8 GEMMs -----------------===//
//
// Part of loom, under the Apache License v2.0.
//
// out[M, N] = (a[M, K] b[N, K]^T) * da[m] * db[n], a and b fp8. As in
// MatMul.cpp, row-major data read column-major is transposed, so the
// product is issued as C^T (N x M) = b (N x K) * a^T (K x M): cuBLASLt's A
// is our b, stored column-major [K, N] and read transposed (op T), its B
// our a, [K, M], read as is (op N). That is the one layout Hopper's fp8
// GEMMs take ("TN": both operands K-major), with K and N multiples of 16
// (16-byte leading dimensions); codegen emits only it, and anything else is
// refused here when the executor is created.
//
// Scales: cuBLASLt multiplies by its A and B scale pointers, so A's is our
// db and B's our da (the dequantization factors Fp8Scale wrote). One per
// tensor, they are the default scalar mode; one per row of a and per row
// of b (rowwise) they are CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
// vectors of length cuBLASLt's M (= our N) and N (= our M). The scale
// pointers are set before the heuristic is asked: for any mode other than
// a scalar one cuBLASLt's heuristic refuses a descriptor without them
// (CUBLAS_STATUS_INVALID_VALUE, "the scaling mode ... requires a custom
// pointer"), which is why loom's first H100 run (2026-11-25) fell back on
// every rowwise product. They are the executor's fixed buffer addresses,
// so they are set once here. Whether a cuBLASLt accepts vector scales for
// a shape on this GPU shows only when it runs, so each such product is
// run once while the executor is being created (on its own, still unused
// memory); if it is refused, the product runs unscaled and
// scaleRowsAndColumns multiplies in place (exact for the power-of-two
// scales of the rowwise recipe), and the message says why it was refused.
//===----------------------------------------------------------------------===//
#include "cuda/Fp8Cuda.h"
#include "lib/Diagnostics.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <map>

namespace loom::rt::cuda {
namespace {

struct Fp8Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool vector = false;   // outer-vector scales in the GEMM
  bool separate = false; // scales applied by scaleRowsAndColumns
  bool daPerRow = false, dbPerCol = false;
  bool empty = false;    // M or N is 0: nothing to write
  bool zeroFill = false; // K is 0: the empty sum
};

cudaDataType_t ltType(DType t) {
  switch (t) {
  case DType::F8E4M3: return CUDA_R_8F_E4M3;
  case DType::F8E5M2: return CUDA_R_8F_E5M2;
  case DType::BF16: return CUDA_R_16BF;
  default: return CUDA_R_32F;
  }
}

void destroy(Fp8Plan &p) {
  if (p.la) cublasLtMatrixLayoutDestroy(p.la);
  if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
  if (p.lc) cublasLtMatrixLayoutDestroy(p.lc);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = Fp8Plan();
}

class LtFp8Gemms : public Fp8Gemms {
public:
  ~LtFp8Gemms() override {
    for (auto &[i, p] : plans_) destroy(p);
    if (handle_) cublasLtDestroy(handle_);
  }

  bool init(const Program &prog, const std::vector<CudaCall> &calls, CudaContext &ctx,
            size_t workspaceBytes, std::string &err) {
    workspaceBytes_ = workspaceBytes;
    for (const CudaCall &c : calls) {
      if (c.instr->op != OpCode::ScaledMatMul)
        continue;
      if (!handle_ && cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) {
        err = "cuBLASLt: cannot create a handle";
        return false;
      }
      std::string why;
      if (!planInstr(prog, c, ctx, why)) {
        err = cat("instr ", c.index, " (scaled_matmul): ", why);
        return false;
      }
    }
    // Not an error (the results are the same), but someone timing rowwise
    // fp8 should know that the scaling costs a pass of its own.
    if (int n = separatelyScaled())
      std::fprintf(stderr,
                   "loom: %d rowwise fp8 GEMMs scale their results in a kernel of their own: "
                   "no outer-vector scales in cuBLASLt %zu (first: %s)\n",
                   n, cublasLtGetVersion(), vectorRefusal_.c_str());
    return true;
  }

  void launch(const CudaCall &c, CudaContext &ctx) override {
    Fp8Plan &p = plans_.at(c.index);
    if (p.empty)
      return;
    if (p.zeroFill) {
      cudaMemsetAsync(c.out[0].data, 0, c.out[0].desc->bytes, ctx.stream);
      return;
    }
    run(p, c, ctx);
    if (p.separate)
      scaleRowsAndColumns(c.out[0], c.in[2].as<float>(), p.daPerRow, c.in[3].as<float>(),
                          p.dbPerCol, ctx);
  }

  int vectorScaled() const override { return count([](const Fp8Plan &p) { return p.vector; }); }
  int separatelyScaled() const override {
    return count([](const Fp8Plan &p) { return p.separate; });
  }

private:
  template <typename F> int count(F f) const {
    int n = 0;
    for (const auto &[i, p] : plans_) n += f(p) ? 1 : 0;
    return n;
  }

  cublasStatus_t run(const Fp8Plan &p, const CudaCall &c, CudaContext &ctx) {
    const float one = 1.f, zero = 0.f;
    return cublasLtMatmul(handle_, p.desc, &one, c.in[1].data, p.la, c.in[0].data, p.lb, &zero,
                          c.out[0].data, p.lc, c.out[0].data, p.lc, &p.algo, ctx.workspace,
                          workspaceBytes_, ctx.stream);
  }

  /// Descriptors and the heuristic's algorithm; vector or scalar scales,
  /// or none (`separate`). False when cuBLASLt has no algorithm.
  bool describe(Fp8Plan &p, const CudaCall &c, int64_t m, int64_t n, int64_t k, bool fastAccum,
                std::string &why) {
    cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t opA = CUBLAS_OP_T, opB = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    int8_t fast = fastAccum ? 1 : 0;
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    if (p.vector) {
      int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F; // the attribute is an int32_t
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode);
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode);
    }
    if (!p.separate) { // before the heuristic: see the file comment
      const void *aScale = c.in[3].data, *bScale = c.in[2].data; // cuBLASLt's A is our b
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &aScale,
                                     sizeof aScale);
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bScale,
                                     sizeof bScale);
    }
    cublasLtMatrixLayoutCreate(&p.la, ltType(c.in[1].dtype()), uint64_t(k), uint64_t(n), k);
    cublasLtMatrixLayoutCreate(&p.lb, ltType(c.in[0].dtype()), uint64_t(k), uint64_t(m), k);
    cublasLtMatrixLayoutCreate(&p.lc, ltType(c.out[0].dtype()), uint64_t(n), uint64_t(m), n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = workspaceBytes_;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    uint32_t alA = alignmentOf(reinterpret_cast<uintptr_t>(c.in[1].data));
    uint32_t alB = alignmentOf(reinterpret_cast<uintptr_t>(c.in[0].data));
    uint32_t alC = alignmentOf(reinterpret_cast<uintptr_t>(c.out[0].data));
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
      why = cat("cuBLASLt has no fp8 algorithm for ", m, "x", k, " times (", n, "x", k, ")^T ",
                dtypeName(c.in[0].dtype()), " x ", dtypeName(c.in[1].dtype()), " -> ",
                dtypeName(c.out[0].dtype()), p.vector ? " with outer-vector scales" : "",
                " (heuristic: ", cublasLtGetStatusName(st), ", ", found, " algorithms)");
      return false;
    }
    p.algo = result.algo;
    return true;
  }

  bool planInstr(const Program &prog, const CudaCall &c, CudaContext &ctx, std::string &why) {
    const Instr &I = *c.instr;
    const BufferDesc &a = prog.buffers[I.in[0]], &b = prog.buffers[I.in[1]];
    if (I.ints[0] != 0 || I.ints[1] != 1) {
      why = cat("cuBLASLt's fp8 GEMMs take a [M, K] times b [N, K] (transA = 0, transB = 1), not "
                "transA = ", I.ints[0], ", transB = ", I.ints[1]);
      return false;
    }
    int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
    if (k % 16 || n % 16) {
      why = cat("cuBLASLt's fp8 GEMMs need K and N multiples of 16, not K = ", k, ", N = ", n);
      return false;
    }
    if (a.dtype == DType::F8E5M2 && b.dtype == DType::F8E5M2) {
      why = "cuBLASLt has no e5m2 x e5m2 GEMM (one operand must be e4m3)";
      return false;
    }
    Fp8Plan &p = plans_[c.index];
    if (m == 0 || n == 0)
      return p.empty = true;
    if (k == 0)
      return p.zeroFill = true;
    int64_t daN = c.in[2].numel(), dbN = c.in[3].numel();
    bool fast = I.ints[2] != 0;
    p.daPerRow = daN > 1;
    p.dbPerCol = dbN > 1;
    p.vector = daN > 1 || dbN > 1;
    if (p.vector && daN == m && dbN == n) {
      std::string refused;
      if (describe(p, c, m, n, k, fast, refused) && probe(p, c, ctx, refused))
        return true;
      if (vectorRefusal_.empty())
        vectorRefusal_ = cat("instr ", c.index, ": ", refused);
    } else if (p.vector && vectorRefusal_.empty()) {
      vectorRefusal_ = cat("instr ", c.index, ": ", daN, " and ", dbN, " scales for ", m, " x ",
                           n, " (the outer-vector mode scales every row of both)");
    }
    // Vector scales refused (or one per tensor on one side only): an
    // unscaled product, then the scaling kernel.
    if (p.vector) {
      destroy(p);
      p.daPerRow = daN > 1;
      p.dbPerCol = dbN > 1;
      p.separate = true;
    }
    return describe(p, c, m, n, k, fast, why);
  }

  /// Runs the vector-scaled product once on the executor's memory (arena
  /// contents are still unused) and says whether cuBLASLt accepted it.
  bool probe(const Fp8Plan &p, const CudaCall &c, CudaContext &ctx, std::string &why) {
    cublasStatus_t st = run(p, c, ctx);
    cudaError_t e = cudaStreamSynchronize(ctx.stream);
    cudaGetLastError();
    if (st != CUBLAS_STATUS_SUCCESS)
      why = cat("cublasLtMatmul returned ", cublasLtGetStatusName(st));
    else if (e != cudaSuccess)
      why = cat("the product failed on the GPU: ", cudaGetErrorString(e));
    return st == CUBLAS_STATUS_SUCCESS && e == cudaSuccess;
  }

  cublasLtHandle_t handle_ = nullptr;
  size_t workspaceBytes_ = 0;
  std::map<int, Fp8Plan> plans_;
  std::string vectorRefusal_; // why cuBLASLt refused the first vector-scaled product
};

} // namespace

std::unique_ptr<Fp8Gemms> Fp8Gemms::create(const Program &p, const std::vector<CudaCall> &calls,
                                           CudaContext &ctx, size_t workspaceBytes,
                                           std::string &err) {
  auto g = std::make_unique<LtFp8Gemms>();
  if (!g->init(p, calls, ctx, workspaceBytes, err))
    return nullptr;
  return g;
}

} // namespace loom::rt::cuda
