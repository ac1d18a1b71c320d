//===- GemmStaging.cpp - Running odd-sized GEMMs on padded copies ---------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/GemmStaging.h"

namespace loom::rt {
namespace {

uint64_t align256(uint64_t n) { return (n + 255) / 256 * 256; }

/// A stored rows x cols matrix read (or written) as paddedRows x paddedCols.
StagedMatrix matrix(DType t, int64_t rows, int64_t cols, int64_t paddedRows, int64_t paddedCols) {
  StagedMatrix s;
  s.elemBytes = dtypeSize(t);
  s.rows = rows, s.cols = cols, s.paddedRows = paddedRows, s.paddedCols = paddedCols;
  s.staged = paddedRows != rows || paddedCols != cols;
  return s;
}

} // namespace

uint64_t GemmStaging::offsetOfB() const { return align256(a.paddedBytes()); }
uint64_t GemmStaging::offsetOfOut() const { return offsetOfB() + align256(b.paddedBytes()); }
uint64_t GemmStaging::scratchBytes() const {
  return any() ? offsetOfOut() + align256(out.paddedBytes()) : 0;
}

GemmStaging planGemmStaging(const Program &p, const Instr &I) {
  GemmStaging g;
  if (I.op != OpCode::MatMul || I.in.size() < 2 || I.out.empty() || I.ints.size() < 2)
    return g;
  const BufferDesc &A = p.buffers[I.in[0]], &B = p.buffers[I.in[1]], &C = p.buffers[I.out[0]];
  if (A.dtype == DType::F64 || C.dtype == DType::F64 || A.shape.size() < 2 ||
      B.shape.size() != 2 || C.shape.size() < 2)
    return g;
  bool transA = I.ints[0] != 0, transB = I.ints[1] != 0;
  // One product: rank-2 operands, or A's batch dims folded into M (the
  // layout of every linear layer; MatMul.cpp plans it as one call).
  bool single = A.shape.size() == 2 ||
                (!transA && std::vector<int64_t>(A.shape.begin(), A.shape.end() - 2) ==
                                std::vector<int64_t>(C.shape.begin(), C.shape.end() - 2));
  if (!single)
    return g;
  int64_t n = C.shape.back(), k = transA ? A.shape[A.shape.size() - 2] : A.shape.back();
  int64_t m = n > 0 ? C.numElements() / n : 0;
  if (m <= 0 || n <= 0 || k <= 0 || 2.0 * double(m) * double(n) * double(k) < kGemmStagingMinFlops)
    return g;
  // Whole 16-byte words of the operands (and so of an f32 result too).
  int64_t word = int64_t(16 / dtypeSize(A.dtype));
  auto up = [&](int64_t d) { return (d + word - 1) / word * word; };
  g.m = up(m), g.n = up(n), g.k = up(k);
  // A bias epilogue would read the bias past N's end. (An addend is staged
  // in with the result: MatMul.cpp.)
  bool biasPastN = I.in.size() > 2 && !matMulAccumulates(p, I) && g.n != n;
  if ((g.m == m && g.n == n && g.k == k) || biasPastN)
    return g;
  g.a = transA ? matrix(A.dtype, k, m, g.k, g.m) : matrix(A.dtype, m, k, g.m, g.k);
  g.b = transB ? matrix(B.dtype, n, k, g.n, g.k) : matrix(B.dtype, k, n, g.k, g.n);
  g.out = matrix(C.dtype, m, n, g.m, g.n);
  return g;
}

} // namespace loom::rt
