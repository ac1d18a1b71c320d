//===- Fp8Cuda.h - fp8 training on the CUDA backend -------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Opcodes 120-122 (Program.h): the scale and cast kernels
// (Fp8Kernels.cu) and the scaled GEMMs through cuBLASLt (Fp8MatMul.cpp),
// which the executor plans once when it is created.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_FP8CUDA_H
#define LOOM_RUNTIME_CUDA_FP8CUDA_H

#include "cuda/CudaKernels.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::rt::cuda {

// Fp8Kernels.cu
void launchFp8Scale(const CudaCall &c, CudaContext &ctx);
void launchFp8Cast(const CudaCall &c, CudaContext &ctx);
void launchFp8Amax(const CudaCall &c, CudaContext &ctx);
/// amax[0] = max |x| as Fp8Amax finds it: an AdamW-kept amax refreshed
/// before a run whose parameter the caller set (RoundedCopies.h).
void launchTensorAmax(const DevTensor &x, const DevTensor &amax, CudaContext &ctx);

/// Fused amax outputs (loom/runtime/Fp8Amax.h) around one instruction's
/// launch: the constructor zeroes them; a kernel that finds the amax of
/// output k as it stores it (cuda/Fp8Amax.cuh) gets fusedAmaxBits(c, k);
/// for the others the destructor reduces the written output (a pass over
/// it, as a separate Fp8Amax would).
class FusedAmaxScope {
public:
  FusedAmaxScope(const CudaCall &c, CudaContext &ctx);
  ~FusedAmaxScope();

private:
  const CudaCall &c_;
  CudaContext &ctx_;
};

/// Where the kernel writing c.out[k] maxes its |value| bits; null when `c`
/// carries no amax for output k.
uint32_t *fusedAmaxBits(const CudaCall &c, size_t k);

/// Whether the kernels of `op` find their amax outputs themselves (a
/// launcher whose chosen kernel cannot calls amaxAfterKernel).
bool kernelFindsAmax(OpCode op);

/// The amax outputs of `c` from a pass over its written outputs.
void amaxAfterKernel(const CudaCall &c, CudaContext &ctx);

/// Every ScaledMatMul of a program as a cuBLASLt fp8 GEMM: operands
/// e4m3/e5m2 in the "TN" layout cuBLASLt takes (transA = 0, transB = 1
/// in loom's row-major terms; K and N multiples of 16), the dequantization
/// factors as A/B scale pointers (scalars, or per row and column vectors
/// under CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F), f32 accumulation
/// (fast accumulation where the instruction allows it), bf16 or f32
/// output. Where this cuBLASLt refuses outer-vector scales, the product
/// runs unscaled and a small kernel multiplies each element by da[m]
/// db[n] in place (the CPU's order of operations).
class Fp8Gemms {
public:
  /// Plans (and, for vector scales, tries once on the executor's memory)
  /// every ScaledMatMul of `calls`. Null with a one-line `err` naming the
  /// instruction when one cannot run.
  static std::unique_ptr<Fp8Gemms> create(const Program &p, const std::vector<CudaCall> &calls,
                                          CudaContext &ctx, size_t workspaceBytes,
                                          std::string &err);
  virtual ~Fp8Gemms() = default;
  /// Enqueues ScaledMatMul instruction `c`.
  virtual void launch(const CudaCall &c, CudaContext &ctx) = 0;
  /// How many products got outer-vector scales in the GEMM, how many the
  /// separate scaling kernel (for the executor's profile).
  virtual int vectorScaled() const = 0;
  virtual int separatelyScaled() const = 0;
};

/// out[m, n] *= da[m] db[n] over out [M, N] (f32 or bf16, rounded once):
/// the fallback epilogue (Fp8Kernels.cu).
void scaleRowsAndColumns(const DevTensor &out, const float *da, bool daPerRow, const float *db,
                         bool dbPerCol, CudaContext &ctx);

} // namespace loom::rt::cuda

#endif
