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
// Batches become one cuBLASLt call where possible (planInstr below).
// Everything — layouts, the algorithm, the pointer offsets — is planned
// once per instruction when the executor is created; launch() only
// enqueues. The algorithm is one of the first gemmCandidates() the heuristic
// ranks: the one timed fastest on random operands the first time this
// machine saw the product, kept by rank in loom/runtime/GemmTuning.h's
// table so that every later run takes it again (LOOM_GEMM_TUNING=0: the
// heuristic's first, as before). Other kernels (attention)
// plan the products they need through the same cache (GemmSpec).
//
// Precision: f32 products use CUBLAS_COMPUTE_32F, true fp32 with no TF32,
// because the f32 program is the parity reference against PyTorch's fp32
// runs; f64 products use CUBLAS_COMPUTE_64F; bf16 products (autocast) run
// on the tensor cores with an f32 accumulator and f32 scaling, and round
// the result to bf16 once, as the CPU reference does.
//
// A MatMul with a third input (addmm: a bias vector over N) runs
// CUBLASLT_EPILOGUE_BIAS: in the column-major view C^T is [N, M], so the
// bias runs along C^T's rows, cuBLASLt's bias vector; the epilogue adds it
// to the f32 accumulator before the one conversion to the output type. The
// bias pointer is an attribute of the descriptor, set before each call (one
// descriptor per instruction, so a captured graph keeps its pointer).
// A MatMul with B's column sums as a second output (matMulSumsB: a bias
// gradient beside its weight gradient, codegen's foldBiasGradients) sums
// them with columnSumsBf16 (ElementwiseKernels.cu) ahead of the product.
// LOOM_GEMM_BIAS_GRAD_EPILOGUE=1 has cuBLASLt sum them in the product's
// epilogue instead (CUBLASLT_EPILOGUE_BGRADA: cuBLASLt's A is our B, and
// its sums over K are one value per row of C^T, our N, rounded once to
// bf16 and written to the bias pointer), where the heuristic has an
// algorithm with it and the product is not staged. The epilogue slowed
// the product by about what the sums cost apart: on an H200
// (bench/gpu/h200-2026-11-29-ii, call 7) gpt2-large's step took 113.79
// ms of kernels with it and 113.26 with the kernel, qwen2.5-1.5b's 169.12
// and 168.39 (the epilogue ahead on N = 256 and 1,536, the kernel on
// 3,840 and 5,120).
// A third input with the result's shape is an addend instead
// (matMulAccumulates): cuBLASLt's C matrix, laid out as D, with beta = 1,
// so D = A B + C is the f32 accumulator plus the addend rounded once.
//
// A large product with a dim not a whole number of 16-byte words (GPT-2's
// 50,257 logits) runs padded to whole words on zero-padded copies in the
// scratch block (loom/runtime/GemmStaging.h says when and why): operands
// are copied in before the product and the result's real rows and columns
// copied out after (copyPadded, which writes the padding's zeros in the
// same pass). Zeros in K add exact zeros to the f32 sums, so each result is
// a sum of the same products, in the padded kernel's order.
//===----------------------------------------------------------------------===//
#include "cpu/Strided.h"
#include "cuda/CudaKernels.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/GemmStaging.h"
#include "loom/runtime/GemmTuning.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

namespace loom::rt::cuda {

// At most 64: codegen's arena places every buffer at a multiple of 64
// bytes, so two GEMMs of the same shape (a forward GEMM and its recomputed
// clone in the backward, loom-recompute) always ask the heuristic the same
// question and get the same algorithm, hence the same bits, wherever the
// arena put their operands. (cuBLASLt's kernels need 16 bytes.)
uint32_t alignmentOf(uint64_t bytes) {
  uint32_t a = 64;
  while (a > 1 && bytes % a) a /= 2;
  return a;
}

namespace {

/// A planned cuBLASLt product: descriptors and the heuristic's algorithm.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr; // cuBLASLt's A (= our B), B, C
  cublasLtMatmulAlgo_t algo{};
  bool f64 = false;
  bool bias = false;
  bool sumsB = false;
};

/// A MatMul instruction: one planned product issued once or per batch.
struct InstrPlan {
  int gemm = -1;
  bool zeroFill = false; // K == 0: the empty sum (or, with an addend, the addend)
  bool accumulate = false; // a third input of the result's shape (beta = 1)
  bool sumsKernel = false; // B's column sums by columnSumsBf16, not the epilogue
  bool empty = false;    // M == 0 or N == 0
  struct Call {
    int64_t a, b, c; // element offsets of A, B and out for one call
  };
  std::vector<Call> calls;
  size_t inBytes = 4, outBytes = 4;
  GemmStaging staging; // operands copied to padded rows around the product
};

/// Copies `m` into its zero-padded layout, or back out of it.
void stageIn(const StagedMatrix &m, const void *from, void *to, cudaStream_t stream) {
  copyPadded(from, m.cols, m.rows, m.cols, to, m.paddedCols, m.paddedRows, m.paddedCols,
             m.elemBytes, stream);
}
void stageOut(const StagedMatrix &m, const void *from, void *to, cudaStream_t stream) {
  copyPadded(from, m.paddedCols, m.rows, m.cols, to, m.cols, m.rows, m.cols, m.elemBytes, stream);
}

cudaDataType_t ltType(DType t) {
  return t == DType::F64 ? CUDA_R_64F : t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// How many of the heuristic's algorithms compete for a product: 8, or
/// LOOM_GEMM_CANDIDATES (1 to kMostCandidates; the count is part of the
/// tuning key, so each count keeps its own choices). On an H200 32 found
/// nothing the first 8 had not: llama-1b's GEMMs 713-715 TFLOP/s a step
/// either way (bench/gpu/h200-2026-11-29-i, call 5).
constexpr int kMostCandidates = 32;
int gemmCandidates() {
  static const int n = [] {
    const char *e = std::getenv("LOOM_GEMM_CANDIDATES");
    int v = e ? std::atoi(e) : 8;
    return v < 1 ? 8 : std::min(v, kMostCandidates);
  }();
  return n;
}

/// The process's tuning table (GemmTuning.h), loaded on first use and
/// shared by every executor: simulated ranks and recomputed clones of a
/// product take one algorithm. Also the random operand values candidates
/// are timed on, made once per dtype.
struct ProcessTuning {
  std::mutex mu;
  bool loaded = false;
  bool dirty = false; // choices recorded since the last save
  std::string path;
  GemmTuningTable table;
  std::map<DType, std::vector<uint8_t>> randomBlocks;

  /// Loads the table once; a file that cannot be read is said once and
  /// left out (every product is then timed and the file rewritten).
  void ensureLoaded() {
    if (loaded) return;
    loaded = true;
    path = GemmTuningTable::defaultPath();
    std::string err;
    if (!path.empty() && !table.load(path, err))
      std::fprintf(stderr, "loom: %s; GEMM algorithms are timed again\n", err.c_str());
  }

  /// Writes the recorded choices, if any are new.
  void saveIfDirty() {
    if (!dirty) return;
    dirty = false;
    std::string err;
    if (!table.save(path, err))
      std::fprintf(stderr, "loom: %s (the choices hold for this run only)\n", err.c_str());
  }

  /// 4 MiB of uniform [-1, 1) values of `t`, the same for every product.
  const std::vector<uint8_t> &randomBlock(DType t) {
    std::vector<uint8_t> &host = randomBlocks[t];
    if (!host.empty()) return host;
    host.resize(size_t(4) << 20);
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    size_t esz = dtypeSize(t);
    for (size_t i = 0; i + esz <= host.size(); i += esz) {
      float f = u(rng);
      if (t == DType::BF16) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t h = uint16_t(bits >> 16);
        std::memcpy(&host[i], &h, 2);
      } else if (t == DType::F64) {
        double d = f;
        std::memcpy(&host[i], &d, 8);
      } else {
        std::memcpy(&host[i], &f, 4);
      }
    }
    return host;
  }
};

ProcessTuning &processTuning() {
  static ProcessTuning t;
  return t;
}

/// The product as the tuning table knows it: the GPU, the cuBLASLt
/// version, and everything the heuristic is asked about.
std::string tuningKey(const GemmSpec &s, size_t workspaceBytes, int found) {
  static const std::string device = [] {
    cudaDeviceProp prop{};
    int dev = 0;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&prop, dev);
    std::string name = prop.name;
    for (char &c : name)
      if (c == '\t' || c == ' ') c = '_';
    return cat(name, "|sm", prop.major, prop.minor, "|lt", cublasLtGetVersion());
  }();
  return cat(device, "|", s.m, "x", s.n, "x", s.k, s.transA ? "tA" : "", s.transB ? "tB" : "",
             "|ld", s.lda, ",", s.ldb, ",", s.ldc, "|b", s.batch, ",", s.strideA, ",", s.strideB,
             ",", s.strideC, "|", dtypeName(s.in), "->", dtypeName(s.out), s.fastBf16 ? "|fast" : "",
             s.bias ? "|bias" : "", s.accumulate ? "|acc" : "", s.sumsB ? "|bgrad" : "", "|al",
             s.alignA, ",", s.alignB,
             ",", s.alignC, "|ws", workspaceBytes, "|n", found);
}

/// Elements `layout` spans: ld * cols, times the batch stride.
size_t layoutElements(int64_t ld, int64_t cols, int64_t batch, int64_t stride) {
  return size_t(ld * cols + (batch - 1) * stride);
}

/// Fills `bytes` of device memory with copies of `block`.
bool fillRandom(void *dst, size_t bytes, const std::vector<uint8_t> &block) {
  for (size_t off = 0; off < bytes; off += block.size())
    if (cudaMemcpy(static_cast<uint8_t *>(dst) + off, block.data(),
                   std::min(block.size(), bytes - off), cudaMemcpyHostToDevice) != cudaSuccess)
      return false;
  return true;
}

class LtGemmCache : public GemmCache {
public:
  ~LtGemmCache() override {
    for (LtPlan &p : gemms_) {
      if (p.la) cublasLtMatrixLayoutDestroy(p.la);
      if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
      if (p.lc) cublasLtMatrixLayoutDestroy(p.lc);
      if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    }
    if (handle_) cublasLtDestroy(handle_);
  }

  bool init(const Program &prog, size_t workspaceBytes, std::string &err, void *scratch,
            size_t scratchBytes) {
    workspaceBytes_ = workspaceBytes;
    tuneScratch_ = static_cast<uint8_t *>(scratch);
    tuneScratchBytes_ = scratch ? scratchBytes : 0;
    if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) {
      err = "cuBLASLt: cannot create a handle";
      return false;
    }
    for (size_t i = 0; i < prog.instrs.size(); ++i)
      if (prog.instrs[i].op == OpCode::MatMul && !planInstr(prog, int(i), err)) {
        err = cat("instr ", i, " (MatMul): ", err);
        return false;
      }
    return true;
  }

  // Row-major to column-major: C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m),
  // so cuBLASLt's first operand is our B and its second our A, each read
  // as stored (a row-major [r, c] is a column-major [c, r]).
  int plan(const GemmSpec &s, std::string &err) override {
    LtPlan p;
    p.f64 = s.out == DType::F64;
    cudaDataType_t in = ltType(s.in), out = ltType(s.out);
    cublasComputeType_t compute = p.f64        ? CUBLAS_COMPUTE_64F
                                  : s.fastBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                               : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale = p.f64 ? CUDA_R_64F : CUDA_R_32F;
    if (cublasLtMatmulDescCreate(&p.desc, compute, scale) != CUBLAS_STATUS_SUCCESS) {
      err = "cuBLASLt: cannot create a matmul descriptor";
      return -1;
    }
    cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N; // cuBLASLt's A is our B
    cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    if (s.bias || s.sumsB) {
      p.bias = s.bias;
      p.sumsB = s.sumsB;
      cublasLtEpilogue_t epilogue = s.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADA;
      cudaDataType_t biasType = out;
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                     sizeof epilogue);
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                                     sizeof biasType);
    }
    // Stored (column-major) shapes: our B is [n, k] or [k, n]; our A is
    // [k, m] or [m, k]; C is [n, m].
    cublasLtMatrixLayoutCreate(&p.la, in, uint64_t(s.transB ? s.k : s.n), uint64_t(s.transB ? s.n : s.k), s.ldb);
    cublasLtMatrixLayoutCreate(&p.lb, in, uint64_t(s.transA ? s.m : s.k), uint64_t(s.transA ? s.k : s.m), s.lda);
    cublasLtMatrixLayoutCreate(&p.lc, out, uint64_t(s.n), uint64_t(s.m), s.ldc);
    if (s.batch > 1) {
      int32_t cnt = int32_t(s.batch);
      int64_t sa = s.strideB, sb = s.strideA, sc = s.strideC;
      for (auto [layout, stride] : {std::pair{p.la, sa}, std::pair{p.lb, sb}, std::pair{p.lc, sc}}) {
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &cnt, sizeof cnt);
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                         sizeof stride);
      }
    }
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = workspaceBytes_;
    uint32_t alA = s.alignB, alB = s.alignA, alC = s.alignC; // cuBLASLt's A is our B
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alA, sizeof alA);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alB, sizeof alB);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alC, sizeof alC);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alC, sizeof alC);
    cublasLtMatmulHeuristicResult_t results[kMostCandidates] = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.la, p.lb, p.lc, p.lc,
                                                       pref, gemmCandidates(), results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      err = cat("cuBLASLt has no algorithm for ", s.m, "x", s.k, (s.transA ? "^T" : ""), " times ",
                s.k, "x", s.n, (s.transB ? "^T" : ""), ", batch ", s.batch,
                s.bias ? " with a bias epilogue" : "", s.sumsB ? " with a bias-gradient epilogue" : "",
                " (status ", int(st), ")");
      cublasLtMatrixLayoutDestroy(p.la);
      cublasLtMatrixLayoutDestroy(p.lb);
      cublasLtMatrixLayoutDestroy(p.lc);
      cublasLtMatmulDescDestroy(p.desc);
      return -1;
    }
    p.algo = results[choose(p, s, results, found)].algo;
    gemms_.push_back(p);
    return int(gemms_.size() - 1);
  }

  void finishPlanning() override {
    tuneScratch_ = nullptr;
    tuneScratchBytes_ = 0;
    planning_ = false;
    ProcessTuning &t = processTuning();
    std::lock_guard<std::mutex> lock(t.mu);
    t.saveIfDirty(); // once for the whole program, not once per product
  }

  void run(int id, const void *a, const void *b, void *c, float alpha, CudaContext &ctx,
           void *workspace) override {
    runWith(id, a, b, nullptr, c, alpha, ctx, workspace);
  }

  /// c = alpha a b, plus `addend` (laid out as c) when it is not null.
  void runWith(int id, const void *a, const void *b, const void *addend, void *c, float alpha,
               CudaContext &ctx, void *workspace) {
    const LtPlan &p = gemms_[size_t(id)];
    const float alphaF = alpha, betaF = addend ? 1.f : 0.f;
    const double alphaD = alpha, betaD = addend ? 1.0 : 0.0;
    const void *al = p.f64 ? static_cast<const void *>(&alphaD) : &alphaF;
    const void *be = p.f64 ? static_cast<const void *>(&betaD) : &betaF;
    cublasLtMatmul(handle_, p.desc, al, b, p.la, a, p.lb, be, addend ? addend : c, p.lc, c, p.lc,
                   &p.algo, workspace, workspaceBytes_, ctx.stream);
  }

  void launch(const CudaCall &c, CudaContext &ctx, void *workspace) override {
    InstrPlan &p = instrs_.at(c.index);
    if (p.sumsKernel) // B is only read: the sums may come before the product
      columnSumsBf16(c.in[1].as<uint16_t>(), c.in[1].shape()[0], c.in[1].shape()[1],
                     c.out[1].as<uint16_t>(), ctx);
    if (p.empty) return;
    if (p.zeroFill) {
      if (p.accumulate)
        cudaMemcpyAsync(c.out[0].data, c.in[2].data, c.out[0].desc->bytes, cudaMemcpyDeviceToDevice,
                        ctx.stream);
      else
        cudaMemsetAsync(c.out[0].data, 0, c.out[0].desc->bytes, ctx.stream);
      return;
    }
    auto *a = static_cast<const uint8_t *>(c.in[0].data);
    auto *b = static_cast<const uint8_t *>(c.in[1].data);
    auto *out = static_cast<uint8_t *>(c.out[0].data);
    auto *addend = p.accumulate ? static_cast<const uint8_t *>(c.in[2].data) : nullptr;
    if (c.in.size() == 3 && !p.accumulate) {
      const void *bias = c.in[2].data;
      cublasLtMatmulDescSetAttribute(gemms_[size_t(p.gemm)].desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &bias, sizeof bias);
    }
    if (gemms_[size_t(p.gemm)].sumsB) {
      void *sums = c.out[1].data;
      cublasLtMatmulDescSetAttribute(gemms_[size_t(p.gemm)].desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &sums, sizeof sums);
    }
    if (p.staging.any()) { // one call (planGemmStaging); see the file comment
      const GemmStaging &g = p.staging;
      auto *scratch = static_cast<uint8_t *>(ctx.scratch);
      uint8_t *sa = scratch, *sb = scratch + g.offsetOfB(), *sc = scratch + g.offsetOfOut();
      if (g.a.staged) stageIn(g.a, a, sa, ctx.stream);
      if (g.b.staged) stageIn(g.b, b, sb, ctx.stream);
      // A staged result takes its addend staged in place (C = D, one layout).
      if (addend && g.out.staged) stageIn(g.out, addend, sc, ctx.stream);
      const void *c3 = addend && g.out.staged ? sc : addend;
      runWith(p.gemm, g.a.staged ? sa : a, g.b.staged ? sb : b, c3, g.out.staged ? sc : out, 1.f,
              ctx, workspace);
      if (g.out.staged) stageOut(g.out, sc, out, ctx.stream);
      return;
    }
    for (const InstrPlan::Call &call : p.calls)
      runWith(p.gemm, a + call.a * p.inBytes, b + call.b * p.inBytes,
              addend ? addend + call.c * p.outBytes : nullptr, out + call.c * p.outBytes, 1.f, ctx,
              workspace);
  }

private:
  /// The rank of the algorithm product `s` runs: the tuning table's, else
  /// the fastest of `found` candidates timed now on random operands (and
  /// recorded), else (tuning off, no room for the operands) the first.
  int choose(const LtPlan &p, const GemmSpec &s, const cublasLtMatmulHeuristicResult_t *results,
             int found) {
    if (found < 2) return 0;
    ProcessTuning &t = processTuning();
    std::lock_guard<std::mutex> lock(t.mu);
    t.ensureLoaded();
    if (t.path.empty()) return 0;
    const std::string key = tuningKey(s, workspaceBytes_, found);
    if (std::optional<int> r = t.table.lookup(key); r && *r < found) return *r;
    int rank = timeCandidates(p, s, results, found, t);
    if (rank < 0) return 0; // not recorded: a later run with room times it
    t.table.record(key, rank);
    t.dirty = true;
    if (!planning_) t.saveIfDirty(); // a product planned after create()
    return rank;
  }

  /// Times each candidate (one warm-up, then the best of three) on
  /// operands filled with random values, so that the tensor cores' power
  /// and clocks are those of real data: in the scratch create() was given
  /// (the empty arena, which holds every product's operands at once, so
  /// timing costs no memory), else in an allocation of their own. -1 when
  /// that cannot be allocated or no candidate runs.
  int timeCandidates(const LtPlan &p, const GemmSpec &s,
                     const cublasLtMatmulHeuristicResult_t *results, int found,
                     ProcessTuning &t) {
    // cuBLASLt's A is our B, its B our A (see plan()).
    size_t na = layoutElements(s.ldb, s.transB ? s.n : s.k, s.batch, s.strideB);
    size_t nb = layoutElements(s.lda, s.transA ? s.k : s.m, s.batch, s.strideA);
    size_t nc = layoutElements(s.ldc, s.m, s.batch, s.strideC);
    size_t inBytes = dtypeSize(s.in), outBytes = dtypeSize(s.out);
    size_t offB = align256(na * inBytes), offC = offB + align256(nb * inBytes);
    size_t offAddend = offC + align256(nc * outBytes);
    size_t offBias = offAddend + (s.accumulate ? align256(nc * outBytes) : 0);
    size_t offWs = offBias + align256(size_t(s.n) * outBytes);
    size_t total = offWs + align256(std::max<size_t>(workspaceBytes_, 1));
    void *buf = nullptr;
    if (total > tuneScratchBytes_ && cudaMalloc(&buf, total) != cudaSuccess) {
      cudaGetLastError(); // out of memory is not an error of the run
      return -1;
    }
    auto *base = buf ? static_cast<uint8_t *>(buf) : tuneScratch_;
    void *ws = base + offWs;
    int best = -1;
    float bestMs = 0;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    if (fillRandom(base, na * inBytes, t.randomBlock(s.in)) &&
        fillRandom(base + offB, nb * inBytes, t.randomBlock(s.in)) &&
        (!s.bias || fillRandom(base + offBias, size_t(s.n) * outBytes, t.randomBlock(s.out))) &&
        (!s.accumulate || fillRandom(base + offAddend, nc * outBytes, t.randomBlock(s.out))) &&
        cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
      if (s.bias || s.sumsB) { // the bias read, or the column sums written
        const void *bias = base + offBias;
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                       sizeof bias);
      }
      const float oneF = 1.f, zeroF = 0.f;
      const double oneD = 1.0, zeroD = 0.0;
      const void *al = p.f64 ? static_cast<const void *>(&oneD) : &oneF;
      const void *be = s.accumulate ? al : p.f64 ? static_cast<const void *>(&zeroD) : &zeroF;
      uint8_t *cIn = s.accumulate ? base + offAddend : base + offC;
      for (int i = 0; i < found; ++i) {
        auto go = [&] {
          return cublasLtMatmul(handle_, p.desc, al, base, p.la, base + offB, p.lb, be, cIn, p.lc,
                                base + offC, p.lc, &results[i].algo, ws, workspaceBytes_, nullptr);
        };
        if (go() != CUBLAS_STATUS_SUCCESS) continue;
        float ms = 0;
        for (int rep = 0; rep < 3; ++rep) {
          cudaEventRecord(e0);
          go();
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          float t = 0;
          cudaEventElapsedTime(&t, e0, e1);
          ms = rep == 0 ? t : std::min(ms, t);
        }
        if (best < 0 || ms < bestMs) best = i, bestMs = ms;
      }
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaDeviceSynchronize();
    if (buf) cudaFree(buf);
    cudaGetLastError();
    return best;
  }

  // Batches become one cuBLASLt call where possible:
  //   - a weight shared by every batch (B of rank 2, A untransposed and not
  //     broadcast) folds the batch into M, the shape of every linear layer;
  //   - operands whose per-batch offsets are a fixed multiple of the batch
  //     index run as one strided-batched call (stride 0 when broadcast);
  //   - other broadcasts ([B, 1] against [1, H]) issue one call per batch.
  bool planInstr(const Program &prog, int index, std::string &err) {
    const Instr &I = prog.instrs[size_t(index)];
    const BufferDesc &A = prog.buffers[I.in[0]], &B = prog.buffers[I.in[1]], &C = prog.buffers[I.out[0]];
    GemmSpec s;
    s.transA = I.ints[0] != 0;
    s.transB = I.ints[1] != 0;
    const Shape &as = A.shape, &bs = B.shape, &cs = C.shape;
    size_t ra = as.size(), rb = bs.size(), rc = cs.size();
    int64_t m = cs[rc - 2], n = cs[rc - 1], k = s.transA ? as[ra - 2] : as[ra - 1];
    InstrPlan &p = instrs_[index];
    p.sumsKernel = matMulSumsB(I); // unless the epilogue takes them (below)
    p.inBytes = dtypeSize(A.dtype);
    p.outBytes = dtypeSize(C.dtype);
    if (m == 0 || n == 0) return p.empty = true;
    s.accumulate = p.accumulate = matMulAccumulates(prog, I);
    if (k == 0 && I.in.size() == 3 && !s.accumulate) {
      err = "an empty sum (K = 0) with a bias";
      return false;
    }
    if (k == 0) return p.zeroFill = true; // launch() copies an addend
    s.bias = I.in.size() == 3 && !s.accumulate;
    Shape batch(cs.begin(), cs.end() - 2);
    Shape aStrides = broadcastStrides(Shape(as.begin(), as.end() - 2), batch);
    Shape bStrides = broadcastStrides(Shape(bs.begin(), bs.end() - 2), batch);
    int64_t batches = 1;
    for (int64_t d : batch) batches *= d;
    bool bShared = std::all_of(bStrides.begin(), bStrides.end(), [](int64_t st) { return st == 0; });
    bool aFull = Shape(as.begin(), as.end() - 2) == batch;
    s.m = m;
    s.n = n;
    s.k = k;
    s.strideC = m * n;
    if (bShared && aFull && !s.transA) { // fold the batch into M
      s.m = batches * m;
      p.calls.push_back({0, 0, 0});
    } else {
      std::vector<int64_t> offA(static_cast<size_t>(batches)), offB(static_cast<size_t>(batches));
      for (int64_t i = 0; i < batches; ++i) {
        offA[size_t(i)] = offsetOf(i, batch, aStrides) * m * k;
        offB[size_t(i)] = offsetOf(i, batch, bStrides) * k * n;
      }
      bool linear = true;
      if (batches > 1) {
        s.strideA = offA[1];
        s.strideB = offB[1];
        for (int64_t i = 0; i < batches && linear; ++i)
          linear = offA[size_t(i)] == i * s.strideA && offB[size_t(i)] == i * s.strideB;
      }
      if (linear) {
        s.batch = batches;
        p.calls.push_back({0, 0, 0});
      } else {
        s.strideA = s.strideB = 0;
        for (int64_t i = 0; i < batches; ++i)
          p.calls.push_back({offA[size_t(i)], offB[size_t(i)], i * m * n});
      }
    }
    // A column block (BufferView) is read in place: its rows are its
    // row pitch apart, which is what the leading dimension says. Only as
    // one product (a folded batch or none): batch strides assume dense rows.
    if ((A.rowPitch || B.rowPitch) && (p.calls.size() != 1 || s.batch != 1)) {
      err = "a column-block operand of a batched product";
      return false;
    }
    s.lda = A.rowPitch ? A.rowPitch : as[ra - 1];
    s.ldb = B.rowPitch ? B.rowPitch : bs[rb - 1];
    s.ldc = n;
    s.in = A.dtype;
    s.out = C.dtype;
    // The heuristic must not assume more alignment than every call's
    // pointers have.
    for (const InstrPlan::Call &call : p.calls) {
      s.alignA = std::min(s.alignA, alignmentOf(A.offset + uint64_t(call.a) * p.inBytes));
      s.alignB = std::min(s.alignB, alignmentOf(B.offset + uint64_t(call.b) * p.inBytes));
      s.alignC = std::min(s.alignC, alignmentOf(C.offset + uint64_t(call.c) * p.outBytes));
      if (s.accumulate) // C and D share the heuristic's alignment
        s.alignC = std::min(s.alignC, alignmentOf(prog.buffers[I.in[2]].offset +
                                                  uint64_t(call.c) * p.outBytes));
    }
    if (s.batch > 1) {
      s.alignA = std::min(s.alignA, alignmentOf(uint64_t(s.strideA) * p.inBytes));
      s.alignB = std::min(s.alignB, alignmentOf(uint64_t(s.strideB) * p.inBytes));
      s.alignC = std::min(s.alignC, alignmentOf(uint64_t(s.strideC) * p.outBytes));
    }
    p.staging = planGemmStaging(prog, I);
    // A column block is read in place, so it may not be the padded copy,
    // nor read past its K rows when padding widens K.
    if (p.staging.any() && ((A.rowPitch && (p.staging.a.staged || p.staging.k != k)) ||
                            (B.rowPitch && (p.staging.b.staged || p.staging.k != k)))) {
      err = "a column-block operand whose rows need staging";
      return false;
    }
    if (p.staging.any()) {
      if (p.calls.size() != 1 || s.batch != 1) {
        err = "a staged product must be one call (GemmStaging.cpp and planInstr disagree)";
        return false;
      }
      // The padded problem; scratch regions start 256-byte aligned (the
      // arena's 64 as elsewhere).
      const GemmStaging &g = p.staging;
      s.m = g.m, s.n = g.n, s.k = g.k;
      s.lda = g.a.staged ? g.a.paddedCols : s.lda;
      s.ldb = g.b.staged ? g.b.paddedCols : s.ldb;
      s.ldc = g.out.staged ? g.out.paddedCols : s.ldc;
      if (g.a.staged) s.alignA = alignmentOf(0);
      if (g.b.staged) s.alignB = alignmentOf(0);
      if (g.out.staged) s.alignC = alignmentOf(0);
    }
    if (matMulSumsB(I)) {
      // The kernel, or (asked for) the epilogue where cuBLASLt has it.
      const char *e = std::getenv("LOOM_GEMM_BIAS_GRAD_EPILOGUE"); // read per executor
      const bool epilogueOn = e && std::strcmp(e, "1") == 0;
      s.sumsB = epilogueOn && !p.staging.any() && s.batch == 1 && p.calls.size() == 1;
      if (s.sumsB) {
        std::string refused;
        p.gemm = plan(s, refused);
        if (p.gemm >= 0) {
          p.sumsKernel = false;
          return true;
        }
        s.sumsB = false;
      }
    }
    p.gemm = plan(s, err);
    return p.gemm >= 0;
  }

  cublasLtHandle_t handle_ = nullptr;
  size_t workspaceBytes_ = 0;
  uint8_t *tuneScratch_ = nullptr; // create()'s scratch until finishPlanning()
  size_t tuneScratchBytes_ = 0;
  bool planning_ = true; // before finishPlanning(): new choices are saved there, together
  std::vector<LtPlan> gemms_;
  std::map<int, InstrPlan> instrs_;
};

} // namespace

std::unique_ptr<GemmCache> GemmCache::create(const Program &p, size_t workspaceBytes,
                                             std::string &err, void *scratch,
                                             size_t scratchBytes) {
  auto cache = std::make_unique<LtGemmCache>();
  if (!cache->init(p, workspaceBytes, err, scratch, scratchBytes))
    return nullptr;
  return cache;
}

} // namespace loom::rt::cuda
