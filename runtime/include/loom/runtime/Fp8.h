//===- Fp8.h - OCP 8-bit floating point: rounding, decoding, scales -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The two formats of the OCP 8-bit floating point specification (OFP8,
// v1.0), as NVIDIA's Hopper tensor cores and PyTorch's float8_e4m3fn and
// float8_e5m2 store them:
//
//   E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities;
//         S.1111.111 is NaN, so the largest finite value is S.1111.110 =
//         448. Subnormals are m * 2^-9, m = 1..7.
//   E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
//         S.11111.00 is infinity, S.11111.{01,10,11} NaN, the largest
//         finite value 57344. Subnormals are m * 2^-16, m = 1..3.
//
// floatToFp8 is the spec's conversion with saturation (what CUDA's
// cvt.rn.satfinite and torchao's clamp-then-cast compute): round to nearest,
// ties to even, on the exact f32 input; a result beyond the largest finite
// value (infinities included) becomes that value with the input's sign; a
// NaN becomes the canonical NaN 0x7f; zero keeps its sign, and so does a
// value that rounds to zero.
//
// The functions are header-only and also compiled as device code, so the
// CPU reference and the CUDA kernels share one definition of the scales;
// the CUDA casts themselves use the hardware conversion, which the unit
// tests compare with floatToFp8 bit for bit.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_FP8_H
#define LOOM_RUNTIME_FP8_H

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define LOOM_FP8_HD __host__ __device__
#else
#define LOOM_FP8_HD
#endif

namespace loom::rt {

/// Values are stable: they are written into artifacts (Fp8Scale's ints).
enum class Fp8Format : uint8_t { E4M3 = 0, E5M2 = 1 };

/// The largest finite value of a format.
LOOM_FP8_HD inline float fp8Max(Fp8Format f) { return f == Fp8Format::E4M3 ? 448.0f : 57344.0f; }

/// The canonical NaN both conversions produce.
constexpr uint8_t kFp8NaN = 0x7f;

LOOM_FP8_HD inline uint32_t fp8FloatBits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

LOOM_FP8_HD inline float fp8BitsFloat(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/// Rounds x to the format: nearest, ties to even, saturating (see above).
/// Integer arithmetic on x's bits: with x = M 2^(E - 23) (M the 24-bit
/// significand), the format's quantum near x is 2^(max(E, 1 - bias) - man),
/// so the rounded magnitude in quanta is M shifted right by the difference,
/// and the code is that count plus the exponent field's offset (a count of
/// 2^(man+1) carries into the exponent, one of 2^man leaves the subnormals).
LOOM_FP8_HD inline uint8_t floatToFp8(float x, Fp8Format f) {
  const int man = f == Fp8Format::E4M3 ? 3 : 2;
  const int bias = f == Fp8Format::E4M3 ? 7 : 15;
  const int maxCode = f == Fp8Format::E4M3 ? 0x7e : 0x7b;
  uint32_t u = fp8FloatBits(x);
  uint8_t sign = uint8_t((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return kFp8NaN;
  if (a >= 0x7f800000u)
    return uint8_t(sign | maxCode);
  if (a < 0x00800000u) // zero or an f32 subnormal: far below half the smallest fp8 subnormal
    return sign;
  int e = int(a >> 23) - 127;
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  int minNormal = 1 - bias;
  int shift = 23 - man + (e < minNormal ? minNormal - e : 0);
  if (shift > 24) // below half the smallest subnormal
    return sign;
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u)))
    ++q;
  int code = e < minNormal ? int(q) : ((e + bias - 1) << man) + int(q);
  if (code > maxCode)
    code = maxCode;
  return uint8_t(sign | code);
}

/// The exact value of an fp8 code (every one is an f32 value).
LOOM_FP8_HD inline float fp8ToFloat(uint8_t code, Fp8Format f) {
  const int man = f == Fp8Format::E4M3 ? 3 : 2;
  const int bias = f == Fp8Format::E4M3 ? 7 : 15;
  const int expMax = f == Fp8Format::E4M3 ? 15 : 31;
  uint32_t sign = uint32_t(code & 0x80) << 24;
  int exp = (code & 0x7f) >> man, m = code & ((1 << man) - 1);
  if (f == Fp8Format::E4M3 && (code & 0x7f) == 0x7f)
    return fp8BitsFloat(0x7fc00000u);
  if (f == Fp8Format::E5M2 && exp == expMax)
    return fp8BitsFloat(m ? 0x7fc00000u : (sign | 0x7f800000u));
  if (exp == 0) { // m 2^(1 - bias - man): exact in f32 as m times a power of two
    float v = float(m) * fp8BitsFloat(uint32_t(127 + 1 - bias - man) << 23);
    return fp8BitsFloat(fp8FloatBits(v) | sign);
  }
  return fp8BitsFloat(sign | (uint32_t(exp - bias + 127) << 23) | (uint32_t(m) << (23 - man)));
}

/// Below this amax a tensor is treated as this small (torchao's EPS): the
/// scale of an all-zero tensor stays finite.
constexpr float kFp8AmaxFloor = 1e-12f;

/// The dynamic scale of a tensor (or row) whose largest magnitude is
/// `amax`: s = fmax / max(amax, 1e-12), rounded once to f32, so that x * s
/// fills the format's range (torchao's amax_to_scale). With `powerOfTwo`
/// (torchao's rowwise recipe) s is rounded down to a power of two, which
/// makes scaling and unscaling exact. A NaN amax gives a NaN scale.
LOOM_FP8_HD inline float fp8ScaleFromAmax(float amax, Fp8Format f, bool powerOfTwo) {
  float a = amax < kFp8AmaxFloor ? kFp8AmaxFloor : amax; // NaN < floor is false: NaN stays
#ifdef __CUDA_ARCH__
  float s = __fdiv_rn(fp8Max(f), a);
#else
  float s = fp8Max(f) / a;
#endif
  if (powerOfTwo && s == s && s > 0)
    s = fp8BitsFloat(fp8FloatBits(s) & 0xff800000u); // s >= 448 / 3.4e38 is normal
  return s;
}

/// 1 / s rounded once to f32: the factor a scaled GEMM multiplies by.
LOOM_FP8_HD inline float fp8Inverse(float s) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(s);
#else
  return 1.0f / s;
#endif
}

/// |x| as ordered bits: for non-negative floats (NaN included, above
/// infinity) the unsigned bit patterns sort like the values, so an amax is
/// an unsigned max of these, and NaN wins it.
LOOM_FP8_HD inline uint32_t fp8AbsBits(float x) { return fp8FloatBits(x) & 0x7fffffffu; }

} // namespace loom::rt

#undef LOOM_FP8_HD

#endif
