//===- GemmStaging.h - Running odd-sized GEMMs on padded copies -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// cuBLASLt's fast Hopper kernels want every dimension of a product a whole
// number of 16-byte words: a row-major operand whose rows are not (GPT-2's
// 50,257 logits per token) sends the product to slow kernels, and so does
// an odd M, N or K even when the rows are padded. On an H100 the [8192,
// 1280] x [1280, 50257] logits GEMM and its two gradients ran at 88-325
// TFLOP/s in loom (11.7, 9.0 and 3.0 ms) where PyTorch's same products with
// 50,264 columns run at 760-810 (1.4, 1.3 and 1.4 ms;
// bench/gpu/gemm-align-h100-2026-11-27.txt). The CUDA backend therefore
// runs such a product on the problem padded to multiples of 16 bytes: each
// operand that needs it is copied into scratch with zero rows and columns
// added (zeros in K add nothing to any sum; padded rows of M and N only
// make results that are never copied out), and a padded result is computed
// into scratch and its real rows and columns copied back. That costs a read
// and a write of each staged matrix, far less than the slow kernels. The
// decision is a property of the program (shapes and dtypes), so it lives
// here: the CUDA backend sizes its scratch from it and `loom plan` prices
// the copies from it, without a GPU.
//
// Only large single products qualify (a batch folded into M, or rank-2
// operands): small ones are quick either way, and a padded copy of a
// batched operand would need a stride per batch.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_GEMMSTAGING_H
#define LOOM_RUNTIME_GEMMSTAGING_H

#include "loom/runtime/Program.h"

#include <cstdint>

namespace loom::rt {

/// One row-major matrix of a product as stored (`rows` x `cols`, cols the
/// leading dimension) and as the padded product reads or writes it.
struct StagedMatrix {
  bool staged = false;
  int64_t rows = 0, cols = 0;
  int64_t paddedRows = 0, paddedCols = 0;
  uint64_t elemBytes = 0;
  uint64_t paddedBytes() const {
    return staged ? uint64_t(paddedRows * paddedCols) * elemBytes : 0;
  }
  /// The copy's traffic: the stored elements once and the padded copy once.
  uint64_t copyBytes() const {
    return staged ? uint64_t(rows * cols + paddedRows * paddedCols) * elemBytes : 0;
  }
};

struct GemmStaging {
  StagedMatrix a, b, out;  // MatMul's in[0], in[1] and out[0]
  int64_t m = 0, n = 0, k = 0; // the padded problem (M with the batch folded in)
  bool any() const { return a.staged || b.staged || out.staged; }
  /// Scratch the padded copies take, each region 256-byte aligned.
  uint64_t scratchBytes() const;
  /// Byte offsets of the staged regions in that scratch (a, then b, then out).
  uint64_t offsetOfB() const;
  uint64_t offsetOfOut() const;
  uint64_t copyBytes() const { return a.copyBytes() + b.copyBytes() + out.copyBytes(); }
};

/// Products below this many FLOPs (2 M N K) run unstaged: a copy's fixed
/// cost would outweigh what the fast kernels save.
constexpr double kGemmStagingMinFlops = double(1ull << 30);

/// How the CUDA backend runs MatMul instruction `I`: staged when some dim
/// is not a multiple of 16 bytes of the operands' dtype (nothing staged for
/// any other instruction, f64 products, batched products, small products,
/// whole-word dims, and a bias epilogue over an N that would need padding).
GemmStaging planGemmStaging(const Program &p, const Instr &I);

} // namespace loom::rt

#endif
