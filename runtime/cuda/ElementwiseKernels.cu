//===- ElementwiseKernels.cu - Unary, binary, where, cast, AdamW ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// One thread per output element (grid-stride). Binary ops and Where
// broadcast through a StridedMap (stride 0 on stretched dims). As in the
// CPU reference, transcendental functions evaluate in double and round once,
// so both backends agree to the last bit or two; most of these kernels are
// bound by memory traffic, so the double math costs nothing visible. The
// activations (GELU, SiLU, SwiGLU and their gradients) are not: for bf16
// outputs they evaluate in f32 and keep the double path's bits by a
// certified rounding test (CertifiedActivations.h).
// The f32 kernels may read and write bf16 storage (FloatIn/FloatOut), which
// is how autocast's casts fold into them.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
// CertifiedActivations.h compiles as device code here.
#define LOOM_CERT_FN __device__ inline
#include "cuda/CertifiedActivations.h"
#define LOOM_ADAMW_FN __device__ inline
#include "cpu/AdamWMath.h"
#include "cuda/Fp8Amax.cuh"
#include "cuda/Fp8Cuda.h"
#include "loom/runtime/RoundedCopies.h"

#include <climits>
#include <type_traits>

namespace loom::rt::cuda {
namespace {

//===--- Binary -----------------------------------------------------------===//

template <typename I> __device__ I floatToInt(double v) {
  if (v != v) return 0;
  if (v <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return I(v);
}

template <typename T> __device__ T applyBinary(int op, T a, T b) {
  switch (OpCode(op)) {
  case OpCode::Add: return a + b;
  case OpCode::Sub: return a - b;
  case OpCode::Mul: return a * b;
  case OpCode::Max: return a != a || a > b ? a : b;
  case OpCode::Min: return a != a || a < b ? a : b;
  case OpCode::Pow:
    if constexpr (std::is_floating_point_v<T>) return T(pow(double(a), double(b)));
    else return floatToInt<T>(pow(double(a), double(b)));
  case OpCode::Div:
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else {
      // Truncates toward zero; x / 0 gives 0 here (the CPU backend reports
      // it as an error; integer division survives only in folded shape
      // code, which never reaches a GPU program).
      if (b == 0) return 0;
      return b == -1 ? T(0 - std::make_unsigned_t<T>(a)) : T(a / b);
    }
  default: return a;
  }
}

template <typename T>
__global__ void binaryKernel(int op, const T *a, const T *b, T *y, int64_t n, StridedMap<3> map) {
  LOOM_GRID_STRIDE(i, n) {
    int64_t off[3];
    map.offsets(i, off);
    y[off[0]] = applyBinary<T>(op, a[off[1]], b[off[2]]);
  }
}

/// f32 arithmetic on operands stored as f32 or bf16 (Program.h): the same
/// applyBinary<float> as binaryKernel<float>, so the f32 result is the same;
/// a bf16 output rounds it once.
/// `amax`: a fused fp8 amax output (cuda/Fp8Amax.cuh), or null.
__global__ void binaryMixedKernel(int op, FloatIn a, FloatIn b, FloatOut y, int64_t n,
                                  StridedMap<3> map, uint32_t *amax) {
  uint32_t m = 0;
  LOOM_GRID_STRIDE(i, n) {
    int64_t off[3];
    map.offsets(i, off);
    float v = applyBinary<float>(op, a[off[1]], b[off[2]]);
    y.store(off[0], v);
    maxStored(amax, m, y, v);
  }
  flushAmax(amax, m);
}

__global__ void binaryPackedKernel(int op, FloatIn a, FloatIn b, FloatOut y, int64_t n,
                                   uint32_t *amax) {
  uint32_t m = 0;
  LOOM_PACK_STRIDE(i, n) {
    Pack x = load8(a, i), z = load8(b, i);
    for (int k = 0; k < kPack; ++k) {
      x.v[k] = applyBinary<float>(op, x.v[k], z.v[k]);
      maxStored(amax, m, y, x.v[k]);
    }
    store8(y, i, x);
  }
  flushAmax(amax, m);
}

void binaryMixed(const CudaCall &c, CudaContext &ctx) {
  int64_t count = c.out[0].numel();
  if (count > 0 && packable(count, {&c.in[0], &c.in[1], &c.out[0]})) {
    binaryPackedKernel<<<packGrid(count), kThreads, 0, ctx.stream>>>(
        int(c.instr->op), floatIn(c.in[0]), floatIn(c.in[1]), floatOut(c.out[0]), count,
        fusedAmaxBits(c, 0));
    return;
  }
  const Shape &shape = c.out[0].shape();
  auto map = makeStridedMap<3>(shape, {contiguousStrides(shape),
                                       broadcastStrides(c.in[0].shape(), shape),
                                       broadcastStrides(c.in[1].shape(), shape)});
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  binaryMixedKernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(
      int(c.instr->op), floatIn(c.in[0]), floatIn(c.in[1]), floatOut(c.out[0]), n, map,
      fusedAmaxBits(c, 0));
}

template <typename T> void binaryTyped(const CudaCall &c, CudaContext &ctx) {
  const Shape &shape = c.out[0].shape();
  auto map = makeStridedMap<3>(shape, {contiguousStrides(shape),
                                       broadcastStrides(c.in[0].shape(), shape),
                                       broadcastStrides(c.in[1].shape(), shape)});
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  binaryKernel<T><<<gridFor(n), kThreads, 0, ctx.stream>>>(
      int(c.instr->op), c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), n, map);
}

//===--- Unary ------------------------------------------------------------===//

__device__ double unaryValue(int op, double x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654; // sqrt(2 / pi)
  switch (OpCode(op)) {
  case OpCode::Neg: return -x;
  case OpCode::Sqrt: return sqrt(x);
  case OpCode::Rsqrt: return 1.0 / sqrt(x);
  case OpCode::Reciprocal: return 1.0 / x;
  case OpCode::Exp: return exp(x);
  case OpCode::Log: return log(x);
  case OpCode::Tanh: return tanh(x);
  case OpCode::Sigmoid: return 1.0 / (1.0 + exp(-x));
  case OpCode::Silu: return x / (1.0 + exp(-x));
  case OpCode::GeluTanh: return 0.5 * x * (1.0 + tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  // 1 + erf(z) as erfc(-z): the sum cancels for negative z, where CUDA's
  // and glibc's erf round differently enough to change a bf16 result.
  case OpCode::GeluErf: return 0.5 * x * erfc(-x * 0.7071067811865476);
  case OpCode::Cos: return cos(x);
  case OpCode::Sin: return sin(x);
  case OpCode::Relu: return x > 0.0 ? x : 0.0;
  case OpCode::Erf: return erf(x);
  case OpCode::Softplus: return fmax(x, 0.0) + log1p(exp(-fabs(x)));
  default: return nan("");
  }
}

//===--- f32 activations for bf16 outputs, certified ----------------------===//
//
// The estimates and their certificates are CertifiedActivations.h's (the
// derivations are there), over CUDA's intrinsics (DeviceMath).
//
// What made them fast is as much the shape of the code as the arithmetic:
// the estimate and its test are branch-free (& rather than &&; the test
// rounds y - e and y + e to bf16 with one paired conversion, which on
// 2026-11-28 replaced counting y's f32 ulps to the rounding midpoint), so a
// pack's eight elements interleave, and
// the undecided ones wait in a per-warp queue for the double path
// (certifiedPacks). Measured on an
// H100 (loom calibrate --memory-only, bf16 [8192, 4096], both forms in one
// call): SwiGLU 1603 -> 2038 GB/s, its gradient 1646 -> 1713, GELU-tanh
// 1210 -> 1511, GELU-erf 1090 -> 1384, GELU-tanh's gradient 1183 -> 1220.
// The first form of this change (an early exit per element, the
// two-rounding test) was slower than the double path for SwiGLU (1513,
// gradient 1227).

using DeviceMath = certified::CudaMath;

/// Per warp, the undecided elements waiting for the double path: where
/// each goes and its inputs.
template <int kIn> struct UndecidedSlots {
  static constexpr int kCount = 64; // a batch of 32 waiting + one ballot's 32
  int64_t at[kCount];
  float in[kIn][kCount];
};

/// The certified kernels' loop over packs of eight (every operand
/// contiguous, n % 8 == 0). Each lane takes the packs LOOM_PACK_STRIDE
/// would give it, but the warp walks them in step (a lane past n idles) so
/// that the undecided elements, a few in a thousand, queue per warp in
/// shared memory with their inputs and take the double path 32 at a time,
/// every lane busy. Run inside each pack (the form before), the double path
/// held the whole warp once for each element that needed it: 0.8% of
/// swiglu_grad's elements, and 2,140 -> 2,389 GB/s on an H200
/// (bench/gpu/elementwise_bench.cu). The queue keeps inputs, not addresses:
/// an output may overwrite its own input in place, and the pack is stored
/// before its undecided elements are computed.
///   load(i, in)  the kIn input packs at element i
///   fast(i, in)  the certified forms: stores the pack's outputs and returns
///                the undecided elements' bits (what it stored for them is
///                overwritten later; it leaves them out of any amax)
///   slow(j, x)   the double path for element j from its inputs x[kIn]:
///                stores its outputs
template <int kIn, typename Load, typename Fast, typename Slow>
__device__ inline void certifiedPacks(int64_t n, Load &&load, Fast &&fast, Slow &&slow) {
  __shared__ UndecidedSlots<kIn> warps[kThreads / 32];
  UndecidedSlots<kIn> &q = warps[threadIdx.x >> 5];
  const unsigned lane = threadIdx.x & 31u, below = (1u << lane) - 1u;
  int count = 0; // the same in every lane
  auto drain = [&](int m) {
    __syncwarp(); // the packs' stores and the queue's writes before the reads
    if (int(lane) < m) {
      const int slot = count - m + int(lane);
      float x[kIn];
#pragma unroll
      for (int j = 0; j < kIn; ++j) x[j] = q.in[j][slot];
      slow(q.at[slot], x);
    }
    __syncwarp(); // every slot read before it is written again
    count -= m;
  };
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * kPack;
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u)) * kPack;
       base < n; base += stride) {
    const int64_t i = base + int64_t(lane) * kPack;
    Pack in[kIn];
    unsigned undecided = 0;
    if (i < n) {
      load(i, in);
      undecided = fast(i, in);
    }
    // The pack positions where some lane is undecided: usually one or two
    // of the eight, and the others skip their ballot (the same value in
    // every lane, so the branches are uniform).
    const unsigned which = __reduce_or_sync(0xffffffffu, undecided);
    if (!which)
      continue;
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (!(which >> k & 1u))
        continue;
      const unsigned mask = __ballot_sync(0xffffffffu, undecided >> k & 1u);
      if (undecided >> k & 1u) {
        const int slot = count + __popc(mask & below);
        q.at[slot] = i + k;
#pragma unroll
        for (int j = 0; j < kIn; ++j) q.in[j][slot] = in[j].v[k];
      }
      count += __popc(mask);
      if (count >= 32)
        drain(32);
    }
  }
  if (count)
    drain(count);
}

/// The undecided bits of a pack's certified elements: fast(k) true when
/// element k is decided, all eight as straight-line code.
template <typename Fast> __device__ inline unsigned undecidedOf(Fast &&fast) {
  unsigned undecided = 0;
#pragma unroll
  for (int k = 0; k < kPack; ++k) undecided |= fast(k) ? 0u : 1u << k;
  return undecided;
}

/// The activations that take the certified f32 path for bf16 outputs.
inline bool certifiedActivation(OpCode op) {
  return op == OpCode::GeluTanh || op == OpCode::GeluErf || op == OpCode::Silu;
}

constexpr certified::Activation activationOf(OpCode op) {
  return op == OpCode::Silu       ? certified::Activation::Silu
         : op == OpCode::GeluTanh ? certified::Activation::GeluTanh
                                  : certified::Activation::GeluErf;
}

template <OpCode kOp> __device__ inline bool unaryFast(float x, float &y) {
  static_assert(kOp == OpCode::Silu || kOp == OpCode::GeluTanh || kOp == OpCode::GeluErf,
                "not a certified activation");
  return certified::unaryFast<activationOf(kOp), DeviceMath>(x, y);
}

// The double path as a call where it is the rare fallback of a certified
// kernel: inlined, the compiler predicated it and ran it for every element.
__device__ __noinline__ float unaryDoubleCall(int op, float x) {
  return float(unaryValue(op, double(x)));
}

/// kCert: the certified activation (a bf16 output of a
/// certifiedActivation), or OpCode::Neg for the double path of any op.
constexpr OpCode kDoublePath = OpCode::Neg;

/// An activation's value as the output stores it: certified f32 where that
/// decides the rounding, else the double path.
template <OpCode kCert> __device__ inline float unaryOut(int op, float x) {
  if constexpr (kCert != kDoublePath) {
    float y;
    return unaryFast<kCert>(x, y) ? y : unaryDoubleCall(op, x);
  } else {
    return float(unaryValue(op, double(x)));
  }
}

template <OpCode kCert> __global__ void unaryKernel(int op, FloatIn x, FloatOut y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) y.store(i, unaryOut<kCert>(op, x[i]));
}

template <OpCode kCert>
__global__ void unaryPackedKernel(int op, FloatIn x, FloatOut y, int64_t n) {
  if constexpr (kCert != kDoublePath) {
    certifiedPacks<1>(
        n, [&](int64_t i, Pack(&in)[1]) { in[0] = load8(x, i); },
        [&](int64_t i, const Pack(&in)[1]) {
          Pack r;
          unsigned undecided = undecidedOf([&](int k) { return unaryFast<kCert>(in[0].v[k], r.v[k]); });
          store8(y, i, r);
          return undecided;
        },
        [&](int64_t j, const float(&v)[1]) { y.store(j, unaryDoubleCall(op, v[0])); });
  } else {
    LOOM_PACK_STRIDE(i, n) {
      Pack p = load8(x, i), r;
#pragma unroll
      for (int k = 0; k < kPack; ++k) r.v[k] = float(unaryValue(op, double(p.v[k])));
      store8(y, i, r);
    }
  }
}

//===--- Where ------------------------------------------------------------===//

template <typename Word>
__global__ void whereKernel(const uint8_t *cond, const Word *a, const Word *b, Word *y, int64_t n,
                            StridedMap<4> map) {
  LOOM_GRID_STRIDE(i, n) {
    int64_t off[4];
    map.offsets(i, off);
    y[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

template <typename Word> void whereTyped(const CudaCall &c, CudaContext &ctx) {
  const Shape &shape = c.out[0].shape();
  auto map = makeStridedMap<4>(shape, {contiguousStrides(shape),
                                       broadcastStrides(c.in[0].shape(), shape),
                                       broadcastStrides(c.in[1].shape(), shape),
                                       broadcastStrides(c.in[2].shape(), shape)});
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  whereKernel<Word><<<gridFor(n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<uint8_t>(), c.in[1].as<Word>(), c.in[2].as<Word>(), c.out[0].as<Word>(), n, map);
}

//===--- Cast -------------------------------------------------------------===//

/// An element read as double (float dtypes) or int64 (integers, bool), as in
/// the CPU backend, so large i64 values never detour through double.
struct Element {
  bool isFloat;
  double f;
  int64_t i;
};

__device__ Element load(DType t, const void *p, int64_t k) {
  switch (t) {
  case DType::F32: return {true, double(static_cast<const float *>(p)[k]), 0};
  case DType::F64: return {true, static_cast<const double *>(p)[k], 0};
  case DType::BF16: return {true, double(bf16ToFloat(static_cast<const uint16_t *>(p)[k])), 0};
  case DType::I64: return {false, 0, static_cast<const int64_t *>(p)[k]};
  case DType::I32: return {false, 0, static_cast<const int32_t *>(p)[k]};
  case DType::Bool: return {false, 0, static_cast<const uint8_t *>(p)[k] != 0};
  }
  return {true, nan(""), 0};
}

__device__ void store(DType t, void *p, int64_t k, const Element &e) {
  double f = e.isFloat ? e.f : double(e.i);
  switch (t) {
  case DType::F32: static_cast<float *>(p)[k] = float(f); break;
  case DType::F64: static_cast<double *>(p)[k] = f; break;
  case DType::BF16: static_cast<uint16_t *>(p)[k] = floatToBf16(float(f)); break;
  case DType::I64: static_cast<int64_t *>(p)[k] = e.isFloat ? floatToInt<int64_t>(f) : e.i; break;
  case DType::I32:
    static_cast<int32_t *>(p)[k] = e.isFloat ? floatToInt<int32_t>(f) : int32_t(uint32_t(e.i));
    break;
  case DType::Bool: static_cast<uint8_t *>(p)[k] = e.isFloat ? f != 0 : e.i != 0; break;
  }
}

__global__ void castKernel(DType from, const void *x, DType to, void *y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) store(to, y, i, load(from, x, i));
}

/// The two casts autocast graphs are full of (f32 <-> bf16) get their own
/// kernels: no per-element dtype switch.
__global__ void castF32ToBf16Kernel(const float *x, uint16_t *y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) y[i] = floatToBf16(x[i]);
}

__global__ void castBf16ToF32Kernel(const uint16_t *x, float *y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) y[i] = bf16ToFloat(x[i]);
}

/// Either of the two, one element a thread, into any FloatOut (a column block).
__global__ void castFloatKernel(FloatIn x, FloatOut y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) y.store(i, x[i]);
}

/// Either of the two, 8 elements at a time (f32 FloatIn/FloatOut on one side).
__global__ void castPackedKernel(FloatIn x, FloatOut y, int64_t n) {
  LOOM_PACK_STRIDE(i, n) store8(y, i, load8(x, i));
}

//===--- ActivationGrad ---------------------------------------------------===//

// dx = f'(x) dy with (see TrainingKernels.cpp for the derivations)
//   silu:      s (1 + x (1 - s)),                      s = sigmoid(x)
//   gelu erf:  Phi(x) + x phi(x)
//   gelu tanh: (1 + t) / 2 + x (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2) / 2,
//              t = tanh(sqrt(2/pi) (x + 0.044715 x^3))
//   relu:      dy where x > 0, else 0 (a select, so an infinite dy stays out)
/// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x): activation_grad's and
/// swiglu_grad's.
__device__ inline double siluDerivative(double v) {
  double s = 1.0 / (1.0 + exp(-v));
  return s * (1.0 + v * (1.0 - s));
}

/// GELU-erf's derivative below 1e-300 as +0, as cpu/TrainingKernels.cpp:
/// there erfc and exp return subnormal doubles, which CUDA's and glibc's
/// round differently, and only the sign of the zero product with dy
/// survived of them.
__device__ inline double geluErfDerivativeTail(double d) { return fabs(d) < 1e-300 ? 0.0 : d; }

__device__ float activationGrad(int kind, float xf, float dyf) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  constexpr double kInvSqrt2Pi = 0.3989422804014327;
  double v = xf, d;
  if (kind == 3)
    return xf > 0.0f ? dyf : 0.0f;
  if (kind == 0) {
    d = siluDerivative(v);
  } else if (kind == 1) {
    d = geluErfDerivativeTail(0.5 * erfc(-v * 0.7071067811865476) +
                              v * kInvSqrt2Pi * exp(-0.5 * v * v));
  } else {
    double t = tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v));
    d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * v * v);
  }
  return float(d * double(dyf));
}

__device__ __noinline__ float activationGradDoubleCall(int kind, float x, float dy) {
  return activationGrad(kind, x, dy);
}

/// kCert: the certified kind (0-2, a bf16 output), or -1 for the double path.
template <int kCert> __device__ inline float activationGradOut(int kind, float x, float dy) {
  if constexpr (kCert >= 0) {
    float dx;
    return certified::activationGradFast<kCert, DeviceMath>(x, dy, dx)
               ? dx
               : activationGradDoubleCall(kind, x, dy);
  } else {
    return activationGrad(kind, x, dy);
  }
}

template <int kCert>
__global__ void activationGradKernel(int kind, FloatIn x, FloatIn dy, FloatOut dx, int64_t n) {
  LOOM_GRID_STRIDE(i, n) dx.store(i, activationGradOut<kCert>(kind, x[i], dy[i]));
}

template <int kCert>
__global__ void activationGradPackedKernel(int kind, FloatIn x, FloatIn dy, FloatOut dx,
                                           int64_t n) {
  if constexpr (kCert >= 0) {
    certifiedPacks<2>(
        n,
        [&](int64_t i, Pack(&in)[2]) {
          in[0] = load8(x, i);
          in[1] = load8(dy, i);
        },
        [&](int64_t i, const Pack(&in)[2]) {
          Pack r;
          unsigned undecided = undecidedOf([&](int k) {
            return certified::activationGradFast<kCert, DeviceMath>(in[0].v[k], in[1].v[k], r.v[k]);
          });
          store8(dx, i, r);
          return undecided;
        },
        [&](int64_t j, const float(&v)[2]) {
          dx.store(j, activationGradDoubleCall(kind, v[0], v[1]));
        });
  } else {
    LOOM_PACK_STRIDE(i, n) {
      Pack v = load8(x, i), d = load8(dy, i), r;
#pragma unroll
      for (int k = 0; k < kPack; ++k) r.v[k] = activationGrad(kind, v.v[k], d.v[k]);
      store8(dx, i, r);
    }
  }
}

//===--- SwiGlu -----------------------------------------------------------===//

// As cpu/TrainingKernels.cpp, in double and rounded once per output:
//   y = silu(g) u;  du = dy silu(g);  dg = dy u s (1 + g (1 - s)), s = sigmoid(g)
// One pass over gate and up (forward) or gate, up and dy (backward): the
// silu values never reach memory. bf16 outputs take the certified f32
// forms (CertifiedActivations.h): y = g / d * u, du = g / d * dy, dg = s (1
// + g E s) (dy u).
__device__ inline float swiGlu(float g, float u) {
  return float(unaryValue(int(OpCode::Silu), g) * double(u));
}

__device__ inline void swiGluGrad(float g, float u, float dy, float &dg, float &du) {
  double d = dy;
  du = float(d * unaryValue(int(OpCode::Silu), g));
  dg = float(d * double(u) * siluDerivative(g));
}

__device__ __noinline__ float swiGluDoubleCall(float g, float u) { return swiGlu(g, u); }

/// (dg, du), returned in registers rather than through pointers.
__device__ __noinline__ float2 swiGluGradDoubleCall(float g, float u, float dy) {
  float2 r;
  swiGluGrad(g, u, dy, r.x, r.y);
  return r;
}

template <bool kCertified> __device__ inline float swiGluOut(float g, float u) {
  if constexpr (kCertified) {
    float y;
    return certified::swiGluFast<DeviceMath>(g, u, y) ? y : swiGluDoubleCall(g, u);
  } else {
    return swiGlu(g, u);
  }
}

template <bool kCertified>
__device__ inline void swiGluGradOut(float g, float u, float dy, float &dg, float &du) {
  if constexpr (kCertified) {
    if (certified::swiGluGradFast<DeviceMath>(g, u, dy, dg, du)) return;
    float2 r = swiGluGradDoubleCall(g, u, dy);
    dg = r.x;
    du = r.y;
  } else {
    swiGluGrad(g, u, dy, dg, du);
  }
}

// amax, amaxG, amaxU: fused fp8 amax outputs (cuda/Fp8Amax.cuh), or null.
template <bool kCertified>
__global__ void swiGluKernel(FloatIn g, FloatIn u, FloatOut y, int64_t n, uint32_t *amax) {
  uint32_t m = 0;
  LOOM_GRID_STRIDE(i, n) {
    float v = swiGluOut<kCertified>(g[i], u[i]);
    y.store(i, v);
    maxStored(amax, m, y, v);
  }
  flushAmax(amax, m);
}

template <bool kCertified>
__global__ void swiGluPackedKernel(FloatIn g, FloatIn u, FloatOut y, int64_t n, uint32_t *amax) {
  uint32_t m = 0;
  if constexpr (kCertified) {
    certifiedPacks<2>(
        n,
        [&](int64_t i, Pack(&in)[2]) {
          in[0] = load8(g, i);
          in[1] = load8(u, i);
        },
        [&](int64_t i, const Pack(&in)[2]) {
          Pack r;
          unsigned undecided = undecidedOf([&](int k) {
            return certified::swiGluFast<DeviceMath>(in[0].v[k], in[1].v[k], r.v[k]);
          });
#pragma unroll
          for (int k = 0; k < kPack; ++k)
            if (!(undecided >> k & 1u)) maxStored(amax, m, y, r.v[k]);
          store8(y, i, r);
          return undecided;
        },
        [&](int64_t j, const float(&v)[2]) {
          float r = swiGluDoubleCall(v[0], v[1]);
          y.store(j, r);
          maxStored(amax, m, y, r);
        });
  } else {
    LOOM_PACK_STRIDE(i, n) {
      Pack a = load8(g, i), b = load8(u, i), r;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        r.v[k] = swiGlu(a.v[k], b.v[k]);
        maxStored(amax, m, y, r.v[k]);
      }
      store8(y, i, r);
    }
  }
  flushAmax(amax, m);
}

template <bool kCertified>
__global__ void swiGluGradKernel(FloatIn g, FloatIn u, FloatIn dy, FloatOut dg, FloatOut du,
                                 int64_t n, uint32_t *amaxG, uint32_t *amaxU) {
  uint32_t mg = 0, mu = 0;
  LOOM_GRID_STRIDE(i, n) {
    float a, b;
    swiGluGradOut<kCertified>(g[i], u[i], dy[i], a, b);
    dg.store(i, a);
    du.store(i, b);
    maxStored(amaxG, mg, dg, a);
    maxStored(amaxU, mu, du, b);
  }
  flushAmax(amaxG, mg);
  flushAmax(amaxU, mu);
}

template <bool kCertified>
__global__ void swiGluGradPackedKernel(FloatIn g, FloatIn u, FloatIn dy, FloatOut dg,
                                       FloatOut du, int64_t n, uint32_t *amaxG, uint32_t *amaxU) {
  uint32_t mg = 0, mu = 0;
  if constexpr (kCertified) {
    certifiedPacks<3>(
        n,
        [&](int64_t i, Pack(&in)[3]) {
          in[0] = load8(g, i);
          in[1] = load8(u, i);
          in[2] = load8(dy, i);
        },
        [&](int64_t i, const Pack(&in)[3]) {
          Pack rg, ru;
          unsigned undecided = undecidedOf([&](int k) {
            return certified::swiGluGradFast<DeviceMath>(in[0].v[k], in[1].v[k], in[2].v[k],
                                                         rg.v[k], ru.v[k]);
          });
#pragma unroll
          for (int k = 0; k < kPack; ++k)
            if (!(undecided >> k & 1u)) {
              maxStored(amaxG, mg, dg, rg.v[k]);
              maxStored(amaxU, mu, du, ru.v[k]);
            }
          store8(dg, i, rg);
          store8(du, i, ru);
          return undecided;
        },
        [&](int64_t j, const float(&v)[3]) {
          float2 r = swiGluGradDoubleCall(v[0], v[1], v[2]);
          dg.store(j, r.x);
          du.store(j, r.y);
          maxStored(amaxG, mg, dg, r.x);
          maxStored(amaxU, mu, du, r.y);
        });
  } else {
    LOOM_PACK_STRIDE(i, n) {
      Pack a = load8(g, i), b = load8(u, i), d = load8(dy, i), rg, ru;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        swiGluGrad(a.v[k], b.v[k], d.v[k], rg.v[k], ru.v[k]);
        maxStored(amaxG, mg, dg, rg.v[k]);
        maxStored(amaxU, mu, du, ru.v[k]);
      }
      store8(dg, i, rg);
      store8(du, i, ru);
    }
  }
  flushAmax(amaxG, mg);
  flushAmax(amaxU, mu);
}

//===--- AdamW ------------------------------------------------------------===//

// PyTorch AdamW in f32, one element as cpu/AdamWMath.h computes it (the
// same function: the same bits), lr and step read from device scalars so
// the captured graph needs no host values. With scalePtr (the clip
// coefficient) g is first the f32 product g * scale, rounded as the Mul in
// front of AdamW would have stored it (__fmul_rn: never contracted into
// anything else). g may be bf16 storage (a gradient a bf16 GEMM wrote),
// widened as it is read.
/// The step's scalars, from device memory (see above).
struct AdamWStep {
  AdamWScalars k;
  float scale;
  bool scaled;
};

__device__ AdamWStep adamwStep(const float *lrPtr, const float *stepPtr, const float *scalePtr,
                               double b1, double b2, double eps, double wd) {
  return {adamwScalars(*lrPtr, *stepPtr, b1, b2, eps, wd), scalePtr ? *scalePtr : 1.0f,
          scalePtr != nullptr};
}

/// One element's update: p, m, v in place.
__device__ inline void adamwUpdate(const AdamWStep &s, float gf, float &p, float &m, float &v) {
  adamwElement(s.k, s.scaled ? __fmul_rn(gf, s.scale) : gf, p, m, v);
}

// amaxBits (the kept amax, RoundedCopies.h; null when not kept): each
// thread maxes |p'| bits (fp8AbsBits of the f32 value stored) in a
// register, and flushAmax atomicMaxes the block's maximum into the zeroed
// buffer: max |p'| bit for bit as the CPU and Fp8Scale find it.
__global__ void adamwKernel(const float *p, FloatIn g, const float *m, const float *v,
                            const float *lrPtr, const float *stepPtr, const float *scalePtr,
                            float *po, float *mo, float *vo, FloatOut copy, uint32_t *amaxBits,
                            int64_t n, double b1, double b2, double eps, double wd) {
  AdamWStep s = adamwStep(lrPtr, stepPtr, scalePtr, b1, b2, eps, wd);
  uint32_t amax = 0;
  LOOM_GRID_STRIDE(i, n) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamwUpdate(s, g[i], pi, mi, vi);
    po[i] = pi;
    mo[i] = mi;
    vo[i] = vi;
    if (copy.p) copy.store(i, pi);
    amax = max(amax, __float_as_uint(pi) & 0x7fffffffu);
  }
  flushAmax(amaxBits, amax);
}

__global__ void adamwPackedKernel(const float *p, FloatIn g, const float *m, const float *v,
                                  const float *lrPtr, const float *stepPtr,
                                  const float *scalePtr, float *po, float *mo, float *vo,
                                  FloatOut copy, uint32_t *amaxBits, int64_t n, double b1,
                                  double b2, double eps, double wd) {
  AdamWStep s = adamwStep(lrPtr, stepPtr, scalePtr, b1, b2, eps, wd);
  uint32_t amax = 0;
  LOOM_PACK_STRIDE(i, n) {
    Pack pp = load8({p, false}, i), gp = load8(g, i), mp = load8({m, false}, i),
         vp = load8({v, false}, i);
    for (int k = 0; k < kPack; ++k) {
      adamwUpdate(s, gp.v[k], pp.v[k], mp.v[k], vp.v[k]);
      amax = max(amax, __float_as_uint(pp.v[k]) & 0x7fffffffu);
    }
    store8({po, false}, i, pp);
    store8({mo, false}, i, mp);
    store8({vo, false}, i, vp);
    if (copy.p) store8(copy, i, pp);
  }
  flushAmax(amaxBits, amax);
}

/// One member of a small-AdamW group (AdamWGroupLaunch): adamwKernel's
/// operands.
struct AdamWGroupEntry {
  const float *p, *m, *v;
  FloatIn g;
  float *po, *mo, *vo;
  FloatOut copy; // p == null: none
  int64_t n;
};

/// A block's share of the group: `kAdamWGroupChunk` elements of one member
/// from `begin` (the last chunk of a member may be shorter).
struct AdamWGroupBlock {
  int64_t entry, begin;
};
constexpr int64_t kAdamWGroupChunk = 4 * kThreads;

/// adamwKernel's loop body over a table: each block takes one chunk of one
/// member, so the launch spreads every member over the SMs at once.
__global__ void adamwGroupKernel(const AdamWGroupEntry *entries, const AdamWGroupBlock *blocks,
                                 const float *lrPtr, const float *stepPtr, const float *scalePtr,
                                 double b1, double b2, double eps, double wd) {
  const AdamWGroupBlock b = blocks[blockIdx.x];
  const AdamWGroupEntry e = entries[b.entry];
  AdamWStep s = adamwStep(lrPtr, stepPtr, scalePtr, b1, b2, eps, wd);
  const int64_t end = min(e.n, b.begin + kAdamWGroupChunk);
  for (int64_t i = b.begin + threadIdx.x; i < end; i += blockDim.x) {
    float pi = e.p[i], mi = e.m[i], vi = e.v[i];
    adamwUpdate(s, e.g[i], pi, mi, vi);
    e.po[i] = pi;
    e.mo[i] = mi;
    e.vo[i] = vi;
    if (e.copy.p) e.copy.store(i, pi);
  }
}

} // namespace

void launchBinary(const CudaCall &c, CudaContext &ctx) {
  for (const DevTensor *t : {&c.in[0], &c.in[1], &c.out[0]})
    if (t->dtype() == DType::BF16) { // bf16 storage; validate() made the rest f32
      binaryMixed(c, ctx);
      return;
    }
  switch (c.out[0].dtype()) {
  case DType::F32: binaryMixed(c, ctx); break; // f32 FloatIn/FloatOut: the same float math
  case DType::F64: binaryTyped<double>(c, ctx); break;
  case DType::I64: binaryTyped<int64_t>(c, ctx); break;
  case DType::I32: binaryTyped<int32_t>(c, ctx); break;
  default: break; // cudaSupports() refused the program
  }
}

template <OpCode kCert> void launchUnaryAs(const CudaCall &c, CudaContext &ctx, int64_t n) {
  if (packable(n, {&c.in[0], &c.out[0]}))
    unaryPackedKernel<kCert><<<packGrid(n), kThreads, 0, ctx.stream>>>(
        int(c.instr->op), floatIn(c.in[0]), floatOut(c.out[0]), n);
  else
    unaryKernel<kCert><<<gridFor(n), kThreads, 0, ctx.stream>>>(int(c.instr->op), floatIn(c.in[0]),
                                                                 floatOut(c.out[0]), n);
}

void launchUnary(const CudaCall &c, CudaContext &ctx) {
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  OpCode op = c.out[0].dtype() == DType::BF16 && certifiedActivation(c.instr->op) ? c.instr->op
                                                                                   : kDoublePath;
  switch (op) {
  case OpCode::Silu: launchUnaryAs<OpCode::Silu>(c, ctx, n); break;
  case OpCode::GeluTanh: launchUnaryAs<OpCode::GeluTanh>(c, ctx, n); break;
  case OpCode::GeluErf: launchUnaryAs<OpCode::GeluErf>(c, ctx, n); break;
  default: launchUnaryAs<kDoublePath>(c, ctx, n); break;
  }
}

void launchWhere(const CudaCall &c, CudaContext &ctx) {
  switch (dtypeSize(c.out[0].dtype())) {
  case 1: whereTyped<uint8_t>(c, ctx); break;
  case 2: whereTyped<uint16_t>(c, ctx); break;
  case 4: whereTyped<uint32_t>(c, ctx); break;
  case 8: whereTyped<uint64_t>(c, ctx); break;
  }
}

void launchCast(const CudaCall &c, CudaContext &ctx) { castTensor(c.in[0], c.out[0], ctx); }

void castTensor(const DevTensor &x, const DevTensor &y, CudaContext &ctx) {
  int64_t n = y.numel();
  if (n == 0) return;
  if (y.desc->rowPitch) { // a column block (Program.h): f32 and bf16 only (columnBlockSlot)
    if (x.dtype() == y.dtype()) {
      const size_t es = dtypeSize(y.dtype()), row = size_t(y.shape().back()) * es;
      cudaMemcpy2DAsync(y.data, size_t(y.desc->rowPitch) * es, x.data, row, row, size_t(n) * es / row,
                        cudaMemcpyDeviceToDevice, ctx.stream);
    } else if (packable(n, {&x, &y})) {
      castPackedKernel<<<packGrid(n), kThreads, 0, ctx.stream>>>(floatIn(x), floatOut(y), n);
    } else {
      castFloatKernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(floatIn(x), floatOut(y), n);
    }
    return;
  }
  if (x.dtype() == y.dtype()) { // a reshape or a copy
    cudaMemcpyAsync(y.data, x.data, x.desc->bytes, cudaMemcpyDeviceToDevice, ctx.stream);
  } else if (((x.dtype() == DType::F32 && y.dtype() == DType::BF16) ||
              (x.dtype() == DType::BF16 && y.dtype() == DType::F32)) &&
             packable(n, {&x, &y})) {
    castPackedKernel<<<packGrid(n), kThreads, 0, ctx.stream>>>(floatIn(x), floatOut(y), n);
  } else if (x.dtype() == DType::F32 && y.dtype() == DType::BF16) {
    castF32ToBf16Kernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(x.as<float>(), y.as<uint16_t>(), n);
  } else if (x.dtype() == DType::BF16 && y.dtype() == DType::F32) {
    castBf16ToF32Kernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(x.as<uint16_t>(), y.as<float>(), n);
  } else {
    castKernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(x.dtype(), x.data, y.dtype(), y.data, n);
  }
}

template <int kCert> void launchActivationGradAs(const CudaCall &c, CudaContext &ctx, int64_t n) {
  int kind = int(c.instr->ints[0]);
  if (packable(n, {&c.in[0], &c.in[1], &c.out[0]}))
    activationGradPackedKernel<kCert><<<packGrid(n), kThreads, 0, ctx.stream>>>(
        kind, floatIn(c.in[0]), floatIn(c.in[1]), floatOut(c.out[0]), n);
  else
    activationGradKernel<kCert><<<gridFor(n), kThreads, 0, ctx.stream>>>(
        kind, floatIn(c.in[0]), floatIn(c.in[1]), floatOut(c.out[0]), n);
}

void launchActivationGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  // 0-2: SiLU's, GELU's (erf, tanh), the certified kinds for bf16 outputs.
  int64_t kind = c.out[0].dtype() == DType::BF16 ? c.instr->ints[0] : -1;
  switch (kind) {
  case 0: launchActivationGradAs<0>(c, ctx, n); break;
  case 1: launchActivationGradAs<1>(c, ctx, n); break;
  case 2: launchActivationGradAs<2>(c, ctx, n); break;
  default: launchActivationGradAs<-1>(c, ctx, n); break;
  }
}

void launchSwiGlu(const CudaCall &c, CudaContext &ctx) {
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  bool cert = c.out[0].dtype() == DType::BF16; // the certified f32 form
  if (packable(n, {&c.in[0], &c.in[1], &c.out[0]}))
    (cert ? swiGluPackedKernel<true> : swiGluPackedKernel<false>)<<<packGrid(n), kThreads, 0,
                                                                    ctx.stream>>>(
        floatIn(c.in[0]), floatIn(c.in[1]), floatOut(c.out[0]), n, fusedAmaxBits(c, 0));
  else
    (cert ? swiGluKernel<true> : swiGluKernel<false>)<<<gridFor(n), kThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), floatIn(c.in[1]), floatOut(c.out[0]), n, fusedAmaxBits(c, 0));
}

void launchSwiGluGrad(const CudaCall &c, CudaContext &ctx) {
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  bool cert = c.out[0].dtype() == DType::BF16 && c.out[1].dtype() == DType::BF16;
  if (packable(n, {&c.in[0], &c.in[1], &c.in[2], &c.out[0], &c.out[1]}))
    (cert ? swiGluGradPackedKernel<true> : swiGluGradPackedKernel<false>)<<<
        packGrid(n), kThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), floatIn(c.in[1]), floatIn(c.in[2]), floatOut(c.out[0]),
        floatOut(c.out[1]), n, fusedAmaxBits(c, 0), fusedAmaxBits(c, 1));
  else
    (cert ? swiGluGradKernel<true> : swiGluGradKernel<false>)<<<gridFor(n), kThreads, 0,
                                                                ctx.stream>>>(
        floatIn(c.in[0]), floatIn(c.in[1]), floatIn(c.in[2]), floatOut(c.out[0]),
        floatOut(c.out[1]), n, fusedAmaxBits(c, 0), fusedAmaxBits(c, 1));
}

void launchAdamW(const CudaCall &c, CudaContext &ctx) {
  int64_t n = c.in[0].numel();
  if (n == 0) return;
  const std::vector<double> &f = c.instr->floats;
  const float *scale = c.in.size() > 6 ? c.in[6].as<float>() : nullptr;
  // In place (the outputs share the inputs' bytes) is fine either way: each
  // thread reads its elements before it writes them.
  // The optional rounded copy (RoundedCopies.h): p' stored again, rounded
  // to bf16 in the same pass, so the next step needs no Cast of p.
  bool hasCopy = adamwKeepsCopy(*c.instr);
  FloatOut copy = hasCopy ? floatOut(c.out[3]) : FloatOut{};
  // The optional amax of p' (RoundedCopies.h): its readers, the step's
  // Fp8Scales, all ran before this instruction; it accumulates from zero.
  uint32_t *amax = nullptr;
  if (adamwKeepsAmax(*c.instr)) {
    amax = static_cast<uint32_t *>(c.out.back().data);
    cudaMemsetAsync(amax, 0, sizeof(uint32_t), ctx.stream);
  }
  bool packed = packable(n, {&c.in[0], &c.in[1], &c.in[2], &c.in[3], &c.out[0], &c.out[1],
                             &c.out[2], hasCopy ? &c.out[3] : &c.out[2]});
  auto kernel = packed ? adamwPackedKernel : adamwKernel;
  kernel<<<packed ? packGrid(n) : gridFor(n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<float>(), floatIn(c.in[1]), c.in[2].as<float>(), c.in[3].as<float>(),
      c.in[4].as<float>(), c.in[5].as<float>(), scale, c.out[0].as<float>(),
      c.out[1].as<float>(), c.out[2].as<float>(), copy, amax, n, f[0], f[1], f[2], f[3]);
}

std::unique_ptr<AdamWGroupLaunch>
AdamWGroupLaunch::create(const std::vector<const CudaCall *> &members, std::string &err) {
  std::vector<AdamWGroupEntry> entries;
  std::vector<AdamWGroupBlock> blocks;
  for (const CudaCall *c : members) {
    const int64_t n = c->in[0].numel();
    entries.push_back({c->in[0].as<float>(), c->in[2].as<float>(), c->in[3].as<float>(),
                       floatIn(c->in[1]), c->out[0].as<float>(), c->out[1].as<float>(),
                       c->out[2].as<float>(),
                       adamwKeepsCopy(*c->instr) ? floatOut(c->out[3]) : FloatOut{}, n});
    for (int64_t begin = 0; begin < n; begin += kAdamWGroupChunk)
      blocks.push_back({int64_t(entries.size() - 1), begin});
  }
  std::unique_ptr<AdamWGroupLaunch> g(new AdamWGroupLaunch);
  g->first_ = members.front();
  g->entries_ = entries.size();
  g->blocks_ = int(blocks.size());
  const size_t entryBytes = entries.size() * sizeof(AdamWGroupEntry);
  g->bytes_ = entryBytes + blocks.size() * sizeof(AdamWGroupBlock);
  cudaError_t e = cudaMalloc(&g->table_, g->bytes_);
  if (e == cudaSuccess)
    e = cudaMemcpy(g->table_, entries.data(), entryBytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = cudaMemcpy(static_cast<uint8_t *>(g->table_) + entryBytes, blocks.data(),
                   g->bytes_ - entryBytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    err = std::string("cannot set up a grouped AdamW launch: ") + cudaGetErrorString(e);
    return nullptr;
  }
  return g;
}

AdamWGroupLaunch::~AdamWGroupLaunch() {
  if (table_) cudaFree(table_);
}

void AdamWGroupLaunch::launch(CudaContext &ctx) const {
  if (blocks_ == 0) return;
  const CudaCall &c = *first_;
  const std::vector<double> &f = c.instr->floats;
  const float *scale = c.in.size() > 6 ? c.in[6].as<float>() : nullptr;
  auto *entries = static_cast<const AdamWGroupEntry *>(table_);
  auto *blocks = reinterpret_cast<const AdamWGroupBlock *>(entries + entries_);
  adamwGroupKernel<<<unsigned(blocks_), kThreads, 0, ctx.stream>>>(
      entries, blocks, c.in[4].as<float>(), c.in[5].as<float>(), scale, f[0], f[1], f[2], f[3]);
}

namespace {
/// columnSumsBf16's simple form (any n, any alignment): a block of 32
/// columns, eight threads down each (rows r, r + 8, ... in order), their
/// eight partial sums added in a fixed order.
constexpr int kSumCols = 32, kSumLanes = 8;

__global__ void columnSumsBf16Kernel(const uint16_t *b, int64_t k, int64_t n, uint16_t *sums) {
  __shared__ float part[kSumLanes][kSumCols];
  const int64_t j = int64_t(blockIdx.x) * kSumCols + threadIdx.x;
  float acc = 0;
  if (j < n)
    for (int64_t r = threadIdx.y; r < k; r += kSumLanes) acc += bf16ToFloat(b[r * n + j]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    float total = part[0][threadIdx.x];
    for (int l = 1; l < kSumLanes; ++l) total += part[l][threadIdx.x];
    sums[j] = floatToBf16(total);
  }
}

/// The packed form (n % 8 == 0, 16-byte aligned rows), in two passes so
/// that narrow matrices still spread over every SM: the rows split into
/// `chunks`; a block takes 256 columns (32 threads of eight, 16-byte
/// loads) of one chunk, eight threads down each column group, and writes
/// the chunk's f32 partial sums; the finish adds a column's chunks in
/// order and rounds once. Deterministic: the same order every run.
constexpr int kPackedSumLanes = 8;

__global__ void columnPartialsBf16Kernel(const uint16_t *b, int64_t k, int64_t n,
                                         int64_t rowsPerChunk, float *partial) {
  __shared__ float part[kPackedSumLanes][32 * kPack];
  const int64_t j = (int64_t(blockIdx.x) * 32 + threadIdx.x) * kPack;
  const int64_t r0 = int64_t(blockIdx.y) * rowsPerChunk, r1 = min(k, r0 + rowsPerChunk);
  float acc[kPack] = {};
  if (j < n)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kPackedSumLanes) {
      Pack v = load8(FloatIn{b, true}, r * n + j);
#pragma unroll
      for (int q = 0; q < kPack; ++q) acc[q] += v.v[q];
    }
#pragma unroll
  for (int q = 0; q < kPack; ++q) part[threadIdx.y][threadIdx.x * kPack + q] = acc[q];
  __syncthreads();
  // 256 threads, 256 columns of the block: one column each.
  const int t = threadIdx.y * 32 + threadIdx.x;
  const int64_t col = int64_t(blockIdx.x) * 32 * kPack + t;
  if (col < n) {
    float total = part[0][t];
    for (int l = 1; l < kPackedSumLanes; ++l) total += part[l][t];
    partial[int64_t(blockIdx.y) * n + col] = total;
  }
}

__global__ void columnFinishBf16Kernel(const float *partial, int64_t chunks, int64_t n,
                                       uint16_t *sums) {
  LOOM_GRID_STRIDE(j, n) {
    float total = partial[j];
    for (int64_t c = 1; c < chunks; ++c) total += partial[c * n + j];
    sums[j] = floatToBf16(total);
  }
}

/// Row chunks for the packed form: about two blocks per SM of a 132-SM
/// part, at least 64 rows a chunk.
int64_t columnSumChunks(int64_t k, int64_t n) {
  const int64_t colBlocks = (n + 32 * kPack - 1) / (32 * kPack);
  return std::max<int64_t>(1, std::min<int64_t>((264 + colBlocks - 1) / colBlocks, k / 64));
}

__global__ void roundedCopyKernel(const float *x, FloatOut y, int64_t n) {
  LOOM_GRID_STRIDE(i, n) y.store(i, x[i]);
}
} // namespace

size_t columnSumsScratchBytes(int64_t k, int64_t n) {
  return size_t(columnSumChunks(k, n) * n) * sizeof(float);
}

void columnSumsBf16(const uint16_t *b, int64_t k, int64_t n, uint16_t *sums, CudaContext &ctx) {
  if (n == 0) return;
  const int64_t chunks = columnSumChunks(k, n);
  if (n % kPack == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0 && ctx.scratch &&
      ctx.scratchBytes >= columnSumsScratchBytes(k, n)) {
    auto *partial = static_cast<float *>(ctx.scratch);
    const int64_t rowsPerChunk = (k + chunks - 1) / chunks;
    dim3 grid(unsigned((n + 32 * kPack - 1) / (32 * kPack)), unsigned(chunks));
    columnPartialsBf16Kernel<<<grid, dim3(32, kPackedSumLanes), 0, ctx.stream>>>(b, k, n, rowsPerChunk,
                                                                                 partial);
    columnFinishBf16Kernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(partial, chunks, n, sums);
    return;
  }
  columnSumsBf16Kernel<<<unsigned((n + kSumCols - 1) / kSumCols), dim3(kSumCols, kSumLanes), 0,
                         ctx.stream>>>(b, k, n, sums);
}

void launchRoundedCopy(const DevTensor &input, const DevTensor &copy, CudaContext &ctx) {
  int64_t n = input.numel();
  if (n == 0) return;
  roundedCopyKernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(input.as<float>(), floatOut(copy), n);
}

} // namespace loom::rt::cuda
