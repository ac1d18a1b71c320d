//===- RowDivision.h - An element's row by multiply and shift ---*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A kernel that stores into a column block (Program.h, BufferView) finds
// each element's row, i / cols, once per stored pack. A 32-bit integer
// division is some twenty instructions on the GPU, a 64-bit one several
// times that: in swiglu_grad's certified packs that was 9% of the kernel
// (H200, bench/gpu/h200-2026-11-29-iii/call3). Division by an invariant d
// is a multiply and a shift instead (Granlund and Montgomery, "Division
// by invariant integers using multiplication", 1994): with l = ceil(log2
// d) and m = ceil(2^(31 + l) / d), floor(n m / 2^(31 + l)) = floor(n / d)
// for every 0 <= n < 2^31, and m < 2^32. Host code computes (m, 31 + l);
// the device multiplies. Indices from 2^31 on take the division.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ROWDIVISION_H
#define LOOM_RUNTIME_ROWDIVISION_H

#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_ROW_DIVISION_FN __host__ __device__ inline
#else
#define LOOM_ROW_DIVISION_FN inline
#endif

namespace loom::rt {

struct RowDivision {
  uint64_t d = 1;        // the divisor (a column block's columns)
  uint32_t magic = 0;    // m
  uint32_t shift = 0;    // 31 + l
};

/// The multiplier and shift for dividing by d (1 <= d < 2^31).
inline RowDivision rowDivision(uint64_t d) {
  uint32_t l = 0;
  while ((uint64_t(1) << l) < d) ++l;
  RowDivision r;
  r.d = d;
  r.shift = 31 + l;
  r.magic = uint32_t(((uint64_t(1) << r.shift) + d - 1) / d);
  return r;
}

/// floor(n / r.d) for n >= 0.
LOOM_ROW_DIVISION_FN int64_t divideRow(int64_t n, const RowDivision &r) {
  if (uint64_t(n) < (uint64_t(1) << 31))
    return int64_t((uint64_t(n) * r.magic) >> r.shift);
  return int64_t(uint64_t(n) / r.d);
}

} // namespace loom::rt

#endif // LOOM_RUNTIME_ROWDIVISION_H
