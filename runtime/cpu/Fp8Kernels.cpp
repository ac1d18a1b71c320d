//===- Fp8Kernels.cpp - fp8 scales, casts and scaled GEMMs on the CPU -----===//
//
// Part of loom, under the Apache License v2.0.
//
// The reference the CUDA kernels are held to (Program.h, opcodes 120-122):
//   Fp8Scale      amax per tensor, row or column as an unsigned max of the
//                 magnitudes' bit patterns (loom/runtime/Fp8.h: the order
//                 of the values, NaN above everything), then the scale and
//                 its reciprocal from Fp8.h's formula;
//   Fp8Cast       fp8(f32(x * s)) per element with Fp8.h's rounding, into
//                 q, q^T or both;
//   ScaledMatMul  the fp8 operands decoded to f32 (exactly), one f32 GEMM
//                 through runMatMul (the product of two fp8 values is exact
//                 in f32, so only the order of the f32 sum differs from a
//                 GPU's), then acc * da * db in f32, rounded to bf16 once
//                 for a bf16 result.
//===----------------------------------------------------------------------===//
#include "cpu/Bf16.h"
#include "cpu/Kernels.h"
#include "loom/runtime/Fp8.h"
#include "loom/runtime/Fp8Amax.h"

#include <algorithm>
#include <atomic>

namespace loom::rt {
namespace {

Fp8Format formatOf(DType t) { return t == DType::F8E5M2 ? Fp8Format::E5M2 : Fp8Format::E4M3; }

/// Element k of an f32 or bf16 tensor.
struct HighPrecision {
  const void *p;
  bool bf16;
  float operator[](int64_t k) const {
    return bf16 ? bf16ToFloat(static_cast<const uint16_t *>(p)[k]) : static_cast<const float *>(p)[k];
  }
};

HighPrecision highPrecision(const Tensor &t) { return {t.data, t.dtype() == DType::BF16}; }

/// max |x| over n elements as fp8AbsBits (chunks in any order: max is exact).
uint32_t amaxBits(HighPrecision x, int64_t n, ThreadPool &pool) {
  std::atomic<uint32_t> all{0};
  pool.parallelFor(n, 1 << 14, [&](int64_t begin, int64_t end) {
    uint32_t m = 0;
    for (int64_t k = begin; k < end; ++k) m = std::max(m, fp8AbsBits(x[k]));
    uint32_t seen = all.load();
    while (m > seen && !all.compare_exchange_weak(seen, m)) {
    }
  });
  return all.load();
}

} // namespace

bool runFp8Scale(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Tensor &x = c.in[0], &s = c.out[0], &inv = c.out[1];
  HighPrecision xv = highPrecision(x);
  Fp8Format f = c.instr->ints[0] ? Fp8Format::E5M2 : Fp8Format::E4M3;
  bool pow2 = c.instr->ints[1] != 0;
  int64_t rows = x.shape()[0], cols = x.shape()[1];
  const std::vector<int64_t> &ss = s.shape();
  bool perRow = ss[0] == rows && rows != 1, perCol = ss[1] == cols && cols != 1;
  // A [1, 1] x is all three at once; it is one group either way.
  std::vector<uint32_t> amax(size_t(s.numel()), 0);
  if (perRow) {
    pool.parallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
                     [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        uint32_t m = 0;
        for (int64_t k = 0; k < cols; ++k) m = std::max(m, fp8AbsBits(xv[r * cols + k]));
        amax[size_t(r)] = m;
      }
    });
  } else if (perCol) {
    pool.parallelFor(cols, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = begin; k < end; ++k)
          amax[size_t(k)] = std::max(amax[size_t(k)], fp8AbsBits(xv[r * cols + k]));
    });
  } else {
    amax[0] = amaxBits(xv, x.numel(), pool);
  }
  float *sp = s.as<float>(), *ip = inv.as<float>();
  for (size_t g = 0; g < amax.size(); ++g) {
    sp[g] = fp8ScaleFromAmax(fp8BitsFloat(amax[g]), f, pow2);
    ip[g] = fp8Inverse(sp[g]);
  }
  return true;
}

void runFusedAmax(const KernelCall &c, const std::vector<KernelCall> &narrowed, ThreadPool &pool) {
  size_t regular = fusedAmaxRegularOutputs(c.instr->op), n = fusedAmaxCount(*c.instr);
  for (size_t k = 0; k < n; ++k) {
    Tensor y = c.out[k];
    for (const KernelCall &cast : narrowed)
      if (cast.in[0].data == y.data)
        y = cast.out[0]; // the bf16 buffer the f32 staging was rounded into
    uint32_t m = amaxBits(highPrecision(y), y.numel(), pool);
    c.out[regular + k].as<float>()[0] = fp8BitsFloat(m);
  }
}

bool runFp8Amax(const KernelCall &c, ThreadPool &pool, std::string &) {
  c.out[0].as<float>()[0] = fp8BitsFloat(amaxBits(highPrecision(c.in[0]), c.in[0].numel(), pool));
  return true;
}

bool runFp8Cast(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Tensor &x = c.in[0], &s = c.in[1];
  HighPrecision xv = highPrecision(x);
  int64_t layout = c.instr->ints[0];
  int64_t rows = x.shape()[0], cols = x.shape()[1];
  const float *sp = s.as<float>();
  // Flat scale index of element (r, k): per tensor, row or column.
  int64_t rowStride = s.shape()[0] == 1 ? 0 : 1, colStride = s.shape()[1] == 1 ? 0 : 1;
  uint8_t *q = layout == 1 ? nullptr : c.out[0].as<uint8_t>();
  uint8_t *qt = layout == 0 ? nullptr : c.out[layout == 1 ? 0 : 1].as<uint8_t>();
  Fp8Format f = formatOf(c.out[0].dtype());
  pool.parallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        float scaled = xv[r * cols + k] * sp[r * rowStride + k * colStride];
        uint8_t v = floatToFp8(scaled, f);
        if (q) q[r * cols + k] = v;
        if (qt) qt[k * rows + r] = v;
      }
  });
  return true;
}

bool runScaledMatMul(const KernelCall &c, ThreadPool &pool, std::string &err) {
  const Tensor &a = c.in[0], &b = c.in[1], &da = c.in[2], &db = c.in[3], &out = c.out[0];
  std::vector<float> af(size_t(a.numel())), bf(size_t(b.numel())), acc(size_t(out.numel()));
  Fp8Format fa = formatOf(a.dtype()), fb = formatOf(b.dtype());
  const uint8_t *ap = a.as<uint8_t>(), *bp = b.as<uint8_t>();
  for (size_t i = 0; i < af.size(); ++i) af[i] = fp8ToFloat(ap[i], fa);
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = fp8ToFloat(bp[i], fb);
  int64_t n = out.shape().back(), m = n ? out.numel() / n : 0; // out is [..., N], M rows
  BufferDesc wa = *a.desc, wb = *b.desc, wc = *out.desc;
  wa.dtype = wb.dtype = wc.dtype = DType::F32;
  wc.shape = {m, n};
  Instr gemm = *c.instr;
  gemm.op = OpCode::MatMul;
  gemm.ints.resize(2); // [transA, transB]
  KernelCall wide{&gemm, {Tensor{af.data(), &wa}, Tensor{bf.data(), &wb}},
                  {Tensor{acc.data(), &wc}}};
  if (!runMatMul(wide, pool, err))
    return false;
  // da is one per tensor or per row of op(a) (either stored orientation
  // holds m values in order); db one per tensor or per column of op(b).
  const float *dap = da.as<float>(), *dbp = db.as<float>();
  bool rowScales = da.numel() > 1, colScales = db.numel() > 1;
  bool bf16 = out.dtype() == DType::BF16;
  pool.parallelFor(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float ra = dap[rowScales ? i : 0];
      for (int64_t j = 0; j < n; ++j) {
        float v = acc[size_t(i * n + j)] * ra * dbp[colScales ? j : 0];
        if (bf16)
          out.as<uint16_t>()[i * n + j] = floatToBf16(v);
        else
          out.as<float>()[i * n + j] = v;
      }
    }
  });
  return true;
}

} // namespace loom::rt
