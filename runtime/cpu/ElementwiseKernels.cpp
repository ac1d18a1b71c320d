//===- ElementwiseKernels.cpp - Unary, binary, where and cast -------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Binary ops and Where broadcast NumPy style through StridedLoop: each
// operand reads with stride 0 on the dims it is stretched along. The inner
// loop has a contiguous fast path (all inner strides 1) that compilers
// vectorize.
//
// Precision: + - * / max min are exact roundings in the operand type. The
// transcendental unary ops and pow evaluate in double and round once, so f32
// results are within half an ulp of the exact value; this backend is the
// numerical reference for the others.
//===----------------------------------------------------------------------===//
#include "cpu/Bf16.h"
#include "cpu/Kernels.h"
#include "cpu/Strided.h"
#include "lib/Diagnostics.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

namespace loom::rt {
namespace {

//===--- Binary -----------------------------------------------------------===//

/// Float to integer truncates toward zero and saturates (NaN gives 0);
/// the plain C++ conversion is undefined outside the target's range.
template <typename I> I floatToInt(double v) {
  if (v != v)
    return 0;
  if (v <= double(std::numeric_limits<I>::min()))
    return std::numeric_limits<I>::min();
  if (v >= double(std::numeric_limits<I>::max()))
    return std::numeric_limits<I>::max();
  return I(v);
}

/// Runs out = f(a, b) with broadcasting. f returns false on a bad element
/// (integer division by zero); the first failing flat output index is kept.
template <typename T, typename F>
bool binaryLoop(const KernelCall &c, ThreadPool &pool, F f, int64_t &badIndex) {
  const Tensor &a = c.in[0], &b = c.in[1], &o = c.out[0];
  const Shape &shape = o.shape();
  StridedLoop loop(shape, {contiguousStrides(shape), broadcastStrides(a.shape(), shape),
                           broadcastStrides(b.shape(), shape)});
  const T *pa = a.as<T>(), *pb = b.as<T>();
  T *po = o.as<T>();
  int64_t n = loop.innerSize(), sa = loop.innerStride(1), sb = loop.innerStride(2);
  std::atomic<int64_t> bad{std::numeric_limits<int64_t>::max()};
  loop.forEachRow(pool, [&](int64_t row) {
    T *y = po + loop.rowOffset(0, row);
    const T *x0 = pa + loop.rowOffset(1, row), *x1 = pb + loop.rowOffset(2, row);
    bool ok = true;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) ok &= f(x0[i], x1[i], y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) ok &= f(x0[i * sa], x1[i * sb], y[i]);
    }
    if (!ok) { // rare: find the element, keep the smallest index
      for (int64_t i = 0; i < n; ++i) {
        T scratch;
        if (!f(x0[i * sa], x1[i * sb], scratch)) {
          int64_t at = (y - po) + i, cur = bad.load();
          while (at < cur && !bad.compare_exchange_weak(cur, at)) {}
          break;
        }
      }
    }
  });
  badIndex = bad.load();
  return badIndex == std::numeric_limits<int64_t>::max();
}

/// max/min that propagate NaN like NumPy's maximum/minimum.
template <typename T> T nanMax(T a, T b) { return a != a || a > b ? a : b; }
template <typename T> T nanMin(T a, T b) { return a != a || a < b ? a : b; }

template <typename T> bool binaryTyped(const KernelCall &c, ThreadPool &pool, std::string &err) {
  int64_t bad = 0;
  bool ok = true;
  switch (c.instr->op) {
  case OpCode::Add: ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) { y = a + b; return true; }, bad); break;
  case OpCode::Sub: ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) { y = a - b; return true; }, bad); break;
  case OpCode::Mul: ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) { y = a * b; return true; }, bad); break;
  case OpCode::Max: ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) { y = nanMax(a, b); return true; }, bad); break;
  case OpCode::Min: ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) { y = nanMin(a, b); return true; }, bad); break;
  case OpCode::Pow:
    ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) {
      double v = std::pow(double(a), double(b));
      if constexpr (std::is_floating_point_v<T>) y = T(v);
      else y = floatToInt<T>(v);
      return true;
    }, bad);
    break;
  case OpCode::Div:
    if constexpr (std::is_floating_point_v<T>) {
      ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) { y = a / b; return true; }, bad);
    } else {
      // Integer division truncates toward zero (C and ONNX). Dividing by zero
      // is an error; MIN / -1 wraps instead of trapping.
      ok = binaryLoop<T>(c, pool, [](T a, T b, T &y) {
        if (b == 0) return false;
        y = b == -1 ? T(0 - std::make_unsigned_t<T>(a)) : T(a / b);
        return true;
      }, bad);
    }
    break;
  default:
    err = cat("not a binary opcode");
    return false;
  }
  if (!ok)
    err = cat("integer division by zero at output element ", bad);
  return ok;
}

//===--- Unary ------------------------------------------------------------===//

double unaryValue(OpCode op, double x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654; // sqrt(2 / pi)
  switch (op) {
  case OpCode::Neg: return -x;
  case OpCode::Sqrt: return std::sqrt(x);
  case OpCode::Rsqrt: return 1.0 / std::sqrt(x);
  case OpCode::Reciprocal: return 1.0 / x;
  case OpCode::Exp: return std::exp(x);
  case OpCode::Log: return std::log(x);
  case OpCode::Tanh: return std::tanh(x);
  case OpCode::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case OpCode::Silu: return siluValue(x);
  case OpCode::GeluTanh: return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  // 1 + erf(z) as erfc(-z): the sum cancels for negative z (and the CUDA
  // backend's erf rounds differently there).
  case OpCode::GeluErf: return 0.5 * x * std::erfc(-x * M_SQRT1_2);
  case OpCode::Cos: return std::cos(x);
  case OpCode::Sin: return std::sin(x);
  case OpCode::Relu: return x > 0.0 ? x : 0.0;
  case OpCode::Erf: return std::erf(x);
  // log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
  case OpCode::Softplus: return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
  default: return std::nan("");
  }
}

template <typename T> void unaryTyped(const KernelCall &c, ThreadPool &pool) {
  const T *x = c.in[0].as<T>();
  T *y = c.out[0].as<T>();
  OpCode op = c.instr->op;
  pool.parallelFor(c.out[0].numel(), 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = T(unaryValue(op, double(x[i])));
  });
}

//===--- Where ------------------------------------------------------------===//

/// out = cond ? a : b, moving elements as raw words of the dtype's size.
template <typename Word> void whereTyped(const KernelCall &c, ThreadPool &pool) {
  const Tensor &cond = c.in[0], &a = c.in[1], &b = c.in[2], &o = c.out[0];
  const Shape &shape = o.shape();
  StridedLoop loop(shape, {contiguousStrides(shape), broadcastStrides(cond.shape(), shape),
                           broadcastStrides(a.shape(), shape), broadcastStrides(b.shape(), shape)});
  int64_t n = loop.innerSize(), sc = loop.innerStride(1), sa = loop.innerStride(2),
          sb = loop.innerStride(3);
  loop.forEachRow(pool, [&](int64_t row) {
    Word *y = o.as<Word>() + loop.rowOffset(0, row);
    const uint8_t *p = cond.as<uint8_t>() + loop.rowOffset(1, row);
    const Word *x0 = a.as<Word>() + loop.rowOffset(2, row);
    const Word *x1 = b.as<Word>() + loop.rowOffset(3, row);
    for (int64_t i = 0; i < n; ++i) y[i] = p[i * sc] ? x0[i * sa] : x1[i * sb];
  });
}

//===--- Cast -------------------------------------------------------------===//

/// Reads element i of a buffer as a double (float dtypes) or int64 (integer
/// dtypes and bool), then writes it as the destination dtype. Integers go
/// through int64 so large i64 values are not rounded by a detour via double.
struct Element {
  bool isFloat;
  double f;
  int64_t i;
};

Element load(DType t, const void *p, int64_t k) {
  switch (t) {
  case DType::F32: return {true, double(static_cast<const float *>(p)[k]), 0};
  case DType::F64: return {true, static_cast<const double *>(p)[k], 0};
  case DType::BF16: return {true, double(bf16ToFloat(static_cast<const uint16_t *>(p)[k])), 0};
  case DType::I64: return {false, 0, static_cast<const int64_t *>(p)[k]};
  case DType::I32: return {false, 0, static_cast<const int32_t *>(p)[k]};
  case DType::Bool: return {false, 0, static_cast<const uint8_t *>(p)[k] != 0};
  }
  return {true, std::nan(""), 0};
}

void store(DType t, void *p, int64_t k, const Element &e) {
  double f = e.isFloat ? e.f : double(e.i);
  switch (t) {
  case DType::F32: static_cast<float *>(p)[k] = float(f); break;
  case DType::F64: static_cast<double *>(p)[k] = f; break;
  case DType::BF16: static_cast<uint16_t *>(p)[k] = floatToBf16(float(f)); break;
  case DType::I64: static_cast<int64_t *>(p)[k] = e.isFloat ? floatToInt<int64_t>(f) : e.i; break;
  case DType::I32:
    // i64 -> i32 keeps the low 32 bits, like a C cast.
    static_cast<int32_t *>(p)[k] = e.isFloat ? floatToInt<int32_t>(f) : int32_t(uint32_t(e.i));
    break;
  case DType::Bool: static_cast<uint8_t *>(p)[k] = e.isFloat ? f != 0 : e.i != 0; break;
  }
}

} // namespace

bool runBinary(const KernelCall &c, ThreadPool &pool, std::string &err) {
  switch (c.out[0].dtype()) {
  case DType::F32: return binaryTyped<float>(c, pool, err);
  case DType::F64: return binaryTyped<double>(c, pool, err);
  case DType::I64: return binaryTyped<int64_t>(c, pool, err);
  case DType::I32: return binaryTyped<int32_t>(c, pool, err);
  default:
    err = cat("no binary kernel for ", dtypeName(c.out[0].dtype()));
    return false;
  }
}

bool runUnary(const KernelCall &c, ThreadPool &pool, std::string &err) {
  switch (c.out[0].dtype()) {
  case DType::F32: unaryTyped<float>(c, pool); return true;
  case DType::F64: unaryTyped<double>(c, pool); return true;
  default:
    err = cat("no unary kernel for ", dtypeName(c.out[0].dtype()));
    return false;
  }
}

bool runWhere(const KernelCall &c, ThreadPool &pool, std::string &err) {
  switch (dtypeSize(c.out[0].dtype())) {
  case 1: whereTyped<uint8_t>(c, pool); return true;
  case 2: whereTyped<uint16_t>(c, pool); return true;
  case 4: whereTyped<uint32_t>(c, pool); return true;
  case 8: whereTyped<uint64_t>(c, pool); return true;
  }
  err = cat("no where kernel for ", dtypeName(c.out[0].dtype()));
  return false;
}

bool runCast(const KernelCall &c, ThreadPool &pool, std::string &) {
  const Tensor &x = c.in[0], &y = c.out[0];
  if (x.dtype() == y.dtype()) { // a reshape or a copy
    std::memcpy(y.data, x.data, x.desc->bytes);
    return true;
  }
  pool.parallelFor(y.numel(), 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) store(y.dtype(), y.data, k, load(x.dtype(), x.data, k));
  });
  return true;
}

} // namespace loom::rt
