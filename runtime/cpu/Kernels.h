//===- Kernels.h - The CPU kernels, one entry point per opcode family -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Kernels run after Program::validate() and CpuExecutor's dtype check, so
// they trust shapes, arity and dtypes and index memory directly. Outputs
// never alias inputs (validate() guarantees it). A kernel returns false with
// a one-line error only for problems in the data itself, such as a token id
// out of range; the executor prefixes the instruction.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPU_KERNELS_H
#define LOOM_RUNTIME_CPU_KERNELS_H

#include "cpu/ThreadPool.h"
#include "loom/runtime/Program.h"

#include <cmath>
#include <string>
#include <vector>

namespace loom::rt {

/// silu(x) = x sigmoid(x) and silu'(x) = s (1 + x (1 - s)), s = sigmoid(x),
/// in double: the one definition the unary, activation_grad and swiglu
/// kernels share.
inline double siluValue(double x) { return x / (1.0 + std::exp(-x)); }
inline double siluDerivative(double x) {
  double s = 1.0 / (1.0 + std::exp(-x));
  return s * (1.0 + x * (1.0 - s));
}

/// A buffer as a kernel sees it: where its bytes are and what they hold.
struct Tensor {
  void *data = nullptr;
  const BufferDesc *desc = nullptr;

  template <typename T> T *as() const { return static_cast<T *>(data); }
  const std::vector<int64_t> &shape() const { return desc->shape; }
  int64_t numel() const { return desc->numElements(); }
  DType dtype() const { return desc->dtype; }
};

/// One instruction, its operands resolved to memory.
struct KernelCall {
  const Instr *instr = nullptr;
  std::vector<Tensor> in, out;
};

// ElementwiseKernels.cpp
bool runBinary(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runUnary(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runWhere(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runCast(const KernelCall &c, ThreadPool &pool, std::string &err);
// MatMulKernel.cpp
bool runMatMul(const KernelCall &c, ThreadPool &pool, std::string &err);
// NormKernels.cpp
bool runRmsNorm(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runAddRmsNorm(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runLayerNorm(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSoftmax(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runReduce(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSumSquares(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runGlobalSumSquares(const KernelCall &c, ThreadPool &pool, std::string &err);
// AttentionKernel.cpp
bool runAttention(const KernelCall &c, ThreadPool &pool, std::string &err);
// MovementKernels.cpp
bool runTranspose(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSlice(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runConcat(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSplit(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runExpand(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runEmbedding(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runRotary(const KernelCall &c, ThreadPool &pool, std::string &err);
// LossKernels.cpp
bool runCrossEntropy(const KernelCall &c, ThreadPool &pool, std::string &err);
// TrainingKernels.cpp: backward kernels and the optimizer
bool runEmbeddingGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runRmsNormGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runLayerNormGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runAttentionGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runRotaryGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runActivationGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSwiGlu(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSwiGluGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSoftmaxGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runCrossEntropyGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runSliceGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runAdamW(const KernelCall &c, ThreadPool &pool, std::string &err);
// Fp8Kernels.cpp: fp8 training (issue 17)
bool runFp8Scale(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runFp8Cast(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runFp8Amax(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runScaledMatMul(const KernelCall &c, ThreadPool &pool, std::string &err);
/// The fused amax outputs of `c` (loom/runtime/Fp8Amax.h), from the
/// regular outputs it has just written: a second pass here, which is the
/// definition the GPU's in-kernel reductions are held to. `narrowed`: the
/// Casts that rounded f32 staging of bf16 outputs into them (the amax is
/// of the stored values).
void runFusedAmax(const KernelCall &c, const std::vector<KernelCall> &narrowed, ThreadPool &pool);

// SequenceShardingKernels.cpp: context, sequence and vocabulary parallelism
bool runShardSlice(const KernelCall &c, int rank, ThreadPool &pool, std::string &err);
bool runVocabShardEmbedding(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runVocabShardEmbeddingGrad(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runVocabShardCrossEntropy(const KernelCall &c, ThreadPool &pool, std::string &err);
bool runVocabShardCrossEntropyGrad(const KernelCall &c, ThreadPool &pool, std::string &err);

/// The dtypes the CPU kernels implement for `I` (shapes are validate()'s
/// job). Returns "" when supported, else why not.
std::string cpuSupports(const Program &p, const Instr &I);

} // namespace loom::rt

#endif
