//===- CudaKernels.h - The CUDA kernels, one launcher per opcode family -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The CUDA backend mirrors the CPU backend's split (cpu/Kernels.h): one
// launcher per opcode family, each enqueueing its kernels on the executor's
// stream. Launchers run on the host, after Program::validate() and
// cudaSupports(), so they trust shapes, arity and dtypes. They never
// synchronize and never allocate: every launch is recorded once into a CUDA
// graph and replayed, so all memory (arena, scratch, cuBLASLt workspace) is
// fixed when the executor is created.
//
// Errors in the data (a token id out of range) cannot be returned from a
// kernel; the first one is recorded in a DeviceError slot that the executor
// reads after each run (see CudaCommon.cuh).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_CUDAKERNELS_H
#define LOOM_RUNTIME_CUDA_CUDAKERNELS_H

#include "loom/runtime/Program.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

namespace loom::rt::cuda {

/// A buffer as a kernel sees it: a device pointer and its description.
struct DevTensor {
  void *data = nullptr;
  const BufferDesc *desc = nullptr;

  template <typename T> T *as() const { return static_cast<T *>(data); }
  const std::vector<int64_t> &shape() const { return desc->shape; }
  int64_t numel() const { return desc->numElements(); }
  DType dtype() const { return desc->dtype; }
};

/// The first data error a kernel met, written by the kernel (device memory)
/// and read by the executor after a run. `instr` < 0 means none.
struct DeviceError {
  int instr;
  int what;        // 0 id out of range (Embedding/EmbeddingGrad), 1 target out of range
  long long value; // the offending value
  long long at;    // its flat position
  long long bound; // the exclusive upper bound it broke
};

class GemmCache; // MatMul.cpp: cuBLASLt descriptors and algorithms per instruction
class Fp8Gemms;  // Fp8MatMul.cpp: the scaled fp8 GEMMs (Fp8Cuda.h)
class CudnnAttention; // CudnnAttention.h: cuDNN's fused attention plans

/// What every launcher may use besides its operands.
struct CudaContext {
  cudaStream_t stream = nullptr;
  DeviceError *error = nullptr; // device pointer
  void *scratch = nullptr;      // device scratch of scratchBytes, reused by every instruction
  size_t scratchBytes = 0;
  GemmCache *gemms = nullptr;
  Fp8Gemms *fp8Gemms = nullptr; // null when the program has no ScaledMatMul
  void *workspace = nullptr;                  // cuBLASLt's
  std::vector<std::vector<int>> *subGemms = nullptr; // per instruction: planned GemmCache ids
  CudnnAttention *cudnn = nullptr;      // null where cuDNN is missing or disabled
  std::vector<int> *cudnnPlans = nullptr; // per instruction: cuDNN plan id, -1 for loom's kernels
  int rank = 0; // this executor's rank in its world (ShardSlice reads its own slice)
};

/// One instruction, its operands resolved to device memory.
struct CudaCall {
  const Instr *instr = nullptr;
  int index = 0; // position in the program, for DeviceError
  std::vector<DevTensor> in, out;
};

// ElementwiseKernels.cu
void launchBinary(const CudaCall &c, CudaContext &ctx);
void launchUnary(const CudaCall &c, CudaContext &ctx);
void launchWhere(const CudaCall &c, CudaContext &ctx);
void launchCast(const CudaCall &c, CudaContext &ctx);
/// Cast's kernels from one device tensor into another of as many elements
/// (rounding or widening as Cast does; a copy when the dtypes match), for
/// launchers that stage operands through copies of another dtype.
void castTensor(const DevTensor &from, const DevTensor &to, CudaContext &ctx);
/// sums[j] = the sum of column j of b (bf16 [k, n], row-major) in f32,
/// rounded once to bf16: a bias gradient where cuBLASLt's BGRADA epilogue
/// does not run (MatMul.cpp). Deterministic: a fixed order per column.
void columnSumsBf16(const uint16_t *b, int64_t k, int64_t n, uint16_t *sums, CudaContext &ctx);
/// The scratch columnSumsBf16's packed form takes for a [k, n] matrix.
size_t columnSumsScratchBytes(int64_t k, int64_t n);
void launchActivationGrad(const CudaCall &c, CudaContext &ctx);
void launchSwiGlu(const CudaCall &c, CudaContext &ctx);
void launchSwiGluGrad(const CudaCall &c, CudaContext &ctx);
void launchAdamW(const CudaCall &c, CudaContext &ctx);
/// Rounds an f32 parameter into its bf16 copy before a run (RoundedCopies.h).
void launchRoundedCopy(const DevTensor &input, const DevTensor &copy, CudaContext &ctx);
/// Small AdamW instructions run as one launch (loom/runtime/AdamWGroups.h):
/// the members' operands in a device table made once, when the executor is
/// created. Each element is updated as launchAdamW updates it.
class AdamWGroupLaunch {
public:
  /// The table of `members` (AdamW calls sharing floats and scalars), or
  /// null with `err` set when the device memory cannot be had.
  static std::unique_ptr<AdamWGroupLaunch> create(const std::vector<const CudaCall *> &members,
                                                  std::string &err);
  ~AdamWGroupLaunch();
  void launch(CudaContext &ctx) const;
  size_t deviceBytes() const { return bytes_; }

private:
  AdamWGroupLaunch() = default;
  const CudaCall *first_ = nullptr; // lr, step, scale and floats (the same in every member)
  void *table_ = nullptr;           // entries, then blocks
  size_t bytes_ = 0, entries_ = 0;
  int blocks_ = 0;
};
// MovementKernels.cu
void launchTranspose(const CudaCall &c, CudaContext &ctx);
void launchSlice(const CudaCall &c, CudaContext &ctx);
void launchSliceGrad(const CudaCall &c, CudaContext &ctx);
void launchExpand(const CudaCall &c, CudaContext &ctx);
void launchConcat(const CudaCall &c, CudaContext &ctx);
void launchSplit(const CudaCall &c, CudaContext &ctx);
void launchEmbedding(const CudaCall &c, CudaContext &ctx);
void launchRotary(const CudaCall &c, CudaContext &ctx);
void launchRotaryGrad(const CudaCall &c, CudaContext &ctx);
// NormKernels.cu
void launchRmsNorm(const CudaCall &c, CudaContext &ctx);
void launchAddRmsNorm(const CudaCall &c, CudaContext &ctx);
void launchRmsNormGrad(const CudaCall &c, CudaContext &ctx);
void launchLayerNorm(const CudaCall &c, CudaContext &ctx);
void launchLayerNormGrad(const CudaCall &c, CudaContext &ctx);
void launchSoftmax(const CudaCall &c, CudaContext &ctx);
void launchSoftmaxGrad(const CudaCall &c, CudaContext &ctx);
void launchReduce(const CudaCall &c, CudaContext &ctx);
void launchSumSquares(const CudaCall &c, CudaContext &ctx);
void launchGlobalSumSquares(const CudaCall &c, CudaContext &ctx);
// LossKernels.cu
void launchCrossEntropy(const CudaCall &c, CudaContext &ctx);
void launchCrossEntropyGrad(const CudaCall &c, CudaContext &ctx);
// EmbeddingGradKernels.cu
void launchEmbeddingGrad(const CudaCall &c, CudaContext &ctx);
// AttentionKernels.cu
void launchAttention(const CudaCall &c, CudaContext &ctx);
void launchAttentionGrad(const CudaCall &c, CudaContext &ctx);

// SequenceShardingKernels.cu: context, sequence and vocabulary parallelism
void launchShardSlice(const CudaCall &c, CudaContext &ctx);
void launchVocabShardEmbedding(const CudaCall &c, CudaContext &ctx);
void launchVocabShardCrossEntropy(const CudaCall &c, CudaContext &ctx);
void launchVocabShardCrossEntropyGrad(const CudaCall &c, CudaContext &ctx);
// EmbeddingGradKernels.cu (EmbeddingGrad's sort-and-sum, for the rows of one shard)
void launchVocabShardEmbeddingGrad(const CudaCall &c, CudaContext &ctx);

/// Scratch bytes the launcher of `I` needs (0 for most), known from shapes.
size_t lossScratchBytes(const Program &p, const Instr &I);      // LossKernels.cu
size_t embeddingGradScratchBytes(const Program &p, const Instr &I); // EmbeddingGradKernels.cu
size_t attentionScratchBytes(const Program &p, const Instr &I); // AttentionKernels.cu
/// Plans the GEMMs attention instruction `index` runs through cuBLASLt
/// (none when it takes the fused kernels); AttentionKernels.cu.
bool planAttentionGemms(const Program &p, int index, GemmCache &gemms, std::vector<int> &ids,
                        std::string &err);
size_t normScratchBytes(const Program &p, const Instr &I);      // NormKernels.cu
/// Plans attention instruction `index` on cuDNN's fused engines where its
/// shape and storage allow (CudnnAttentionLaunch.cu). Returns the plan id,
/// with the scratch bytes its launch needs, or -1: loom's own kernels run
/// it, and `refused` says why when cuDNN itself turned the shape down.
int planCudnnAttention(const Program &p, int index, CudnnAttention &cudnn, size_t &scratchBytes,
                       std::string &refused);
/// The scratch a cuDNN launch of `I` needs apart from the engine's own
/// workspace (known only once planned on a GPU): what the planner counts.
size_t cudnnAttentionScratchEstimate(const Program &p, const Instr &I);
/// Runs attention instruction `c` on its cuDNN plan; false (nothing
/// enqueued) when it has none, and loom's kernels must run it.
bool launchCudnnAttention(const CudaCall &c, CudaContext &ctx);

/// dst[r, c] = src[r, c] for r < rows, c < cols and 0 elsewhere, over
/// dstRows x dstCols (row pitches srcLd and dstLd, in elements of 2 or 4
/// bytes); MovementKernels.cu.
void copyPadded(const void *src, int64_t srcLd, int64_t rows, int64_t cols, void *dst,
                int64_t dstLd, int64_t dstRows, int64_t dstCols, size_t elemBytes,
                cudaStream_t stream);

// MatMul.cpp: batched products through cuBLASLt.

/// One strided-batched product in row-major terms, for every b < batch:
///   C[b] (m x n) = alpha * op(A[b]) (m x k) * op(B[b]) (k x n)
/// A is stored [m, k], or [k, m] with transA, `lda` elements per stored row
/// (likewise B); C is [m, n] with `ldc` per row. Strides are in elements.
struct GemmSpec {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  DType in = DType::F32, out = DType::F32;
  bool fastBf16 = false; // f32 data, products on bf16 tensor cores (CUBLAS_COMPUTE_32F_FAST_16BF)
  bool bias = false;     // a bias vector over N (of the `out` dtype) in the epilogue
  bool accumulate = false; // D = A B + C: C an addend laid out as the result (beta = 1)
  bool sumsB = false; // B's column sums over K (N values of `out`) in the epilogue (BGRADA)
  uint32_t alignA = 256, alignB = 256, alignC = 256; // bytes the pointers are aligned to
};

class GemmCache {
public:
  /// Plans every MatMul of `p` (layouts, algorithm choice) once. Returns
  /// null with `err` set when cuBLASLt has no algorithm for one. `scratch`
  /// (device memory the caller does not need until finishPlanning(): the
  /// executor's arena, before anything is in it) holds the operands that
  /// candidate algorithms are timed on; a product that does not fit there
  /// allocates its own.
  static std::unique_ptr<GemmCache> create(const Program &p, size_t workspaceBytes,
                                           std::string &err, void *scratch = nullptr,
                                           size_t scratchBytes = 0);
  /// Ends planning: later plan() calls time candidates in memory of their
  /// own, never in the scratch given to create() (whose contents the caller
  /// resets: they are random operands now).
  virtual void finishPlanning() = 0;
  virtual ~GemmCache() = default;
  /// Enqueues the product of MatMul instruction `index` (planned by create()).
  virtual void launch(const CudaCall &c, CudaContext &ctx, void *workspace) = 0;
  /// Plans a product another kernel needs; returns its id, or -1 with `err`.
  virtual int plan(const GemmSpec &spec, std::string &err) = 0;
  /// Enqueues planned product `id` on the given pointers (beta = 0).
  virtual void run(int id, const void *a, const void *b, void *c, float alpha, CudaContext &ctx,
                   void *workspace) = 0;
};

/// n rounded up to a multiple of 256: scratch regions start 256-byte
/// aligned (the executor's scratch block is), as cuBLASLt and 16-byte
/// vector accesses want.
inline size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/// The byte alignment a pointer at byte offset `bytes` of a cudaMalloc'd
/// block has, capped at the arena's 64 (the same for equal shapes wherever
/// they are placed; see MatMul.cpp).
uint32_t alignmentOf(uint64_t bytes);

/// "" when the CUDA kernels cover `I`'s dtypes, else why not.
std::string cudaSupports(const Program &p, const Instr &I);

} // namespace loom::rt::cuda

#endif
