//===- CertifiedActivations.h - f32 activations that keep double's bf16 -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// In double, GELU, SiLU and SwiGLU and their gradients are compute-bound on
// Hopper (GELU alone was 17 ms of gpt2-large's 147 ms step, four times its
// memory time). A bf16 output keeps 8 of f32's 24 bits, so a cheap f32
// evaluation almost always decides its rounding. Ziv's test makes "almost"
// exact: each f32 estimate y comes with `err`, four times a worst-case
// bound on |y - the double path's value|, and when every value within err
// of y rounds to the same bf16, that is the double path's bf16; otherwise
// (a few elements in a thousand, near a rounding boundary, and tiny, huge or
// non-finite values) the element takes the double path. So bf16 outputs
// keep the CPU backend's bits (ElementwiseKernels.cu holds the kernels and
// the double paths).
//
// The estimates use one exponential and one division each, through the
// logistic function: with E = e^-z and s = 1 / (1 + E) = sigmoid(z),
//   silu(g)        = g / (1 + e^-g)
//   gelu_tanh(x)   = x / (1 + e^-2u),   u = sqrt(2/pi)(x + a x^3), since
//                    (1 + tanh u) / 2 = sigmoid(2u)
//   silu'(g)       = s (1 + g E s),     since 1 - s = E s
//   gelu_tanh'(x)  = s (1 + 4 p E s),   p = x/2 sqrt(2/pi)(1 + 3 a x^2), since
//                    1 - tanh^2 u = 4 s (1 - s)
// E comes from M::expFast (on the GPU __expf, CUDA's documented bound: 2 +
// floor(1.173 |z|) ulp) and the quotients from M::divide (__fdividef, 2 ulp
// for divisors in [2^-126, 2^126]); + - * round to nearest (within eps / 2,
// eps = 2^-23 = ulp(1) relative). An error in z of relative d moves E by |z|
// d relative. The double path has errors of its own where it cancels (1 +
// tanh u at negative x, 1 - tanh^2 u): an absolute term of 2^-46 times the
// operands' scale covers them (the double rounding is within a few 2^-53).
// GELU-erf keeps M::erf (erff, 2 ulp; no logistic form): its bound is
// written with it. Inputs are limited to 2^-100 <= |x| <= 64, so no
// intermediate is subnormal or overflows unseen.
//
// The functions are templates over M, the intrinsics: the kernels pass
// CUDA's, and CertifiedActivationsTest passes host versions that err by the
// documented maxima, so `make test` checks the bounds against the CPU
// backend's bits without a GPU. The includer defines LOOM_CERT_FN (how the
// functions compile: __device__ in the kernels) before including this.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CUDA_CERTIFIEDACTIVATIONS_H
#define LOOM_RUNTIME_CUDA_CERTIFIEDACTIVATIONS_H

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#endif

#ifndef LOOM_CERT_FN
#define LOOM_CERT_FN inline
#endif

namespace loom::rt::certified {

constexpr float kEps = 1.0f / 8388608.0f, kDoubleSlack = 0x1p-46f;
constexpr float kSqrt2OverPiF = 0.7978845608f, kGeluA = 0.044715f;
constexpr float kInvSqrt2F = 0.70710678f, kInvSqrt2PiF = 0.39894228f;

/// The activations with a certified f32 form (unaryFast).
enum class Activation { Silu, GeluTanh, GeluErf };

/// True when every value within err of y rounds to y's bf16, so the double
/// path's bf16 is y's. M::bf16Pair rounds lo and hi to bf16 (round to
/// nearest even, lo in the low half; on the GPU one cvt.rn.bf16x2 for the
/// pair); rounding is monotone, so when the two ends of [lo, hi] round to
/// the same bf16, so does every value between them. The interval is y -+ e
/// with e >= err + 4 ulp(y) (|y| 2^-21 >= 4 ulp(y) for normal y): the
/// double path's value z is within err of y, rounds to f32 first (half an
/// ulp of z, at most ulp(y)), and hi = y + e rounded loses at most ulp(hi)
/// / 2 <= ulp(y) of e where lo and hi share a bf16 (hi then lies within a
/// bf16 step of y). |y| outside [1e-30, 1e30], NaN, and an infinite or NaN
/// err are never decided (a + e <= 1e30 fails for all three). Branch-free
/// (& not &&), so the elements of a pack interleave. This form replaced
/// one counting y's f32 ulps to the rounding midpoint: 9 instructions
/// instead of 16 per test, two tests per swiglu_grad element.
template <class M> LOOM_CERT_FN bool bf16Decided(float y, float err) {
  float a = fabsf(y), e = fmaf(a, 0x1p-21f, err);
  uint32_t pair = M::bf16Pair(y - e, y + e);
  return (a >= 1e-30f) & (a + e <= 1e30f) & ((pair & 0xffffu) == (pair >> 16));
}

/// bf16Decided for two values at once (swiglu_grad's dg and du): the low
/// ends of both intervals in one pair, the high ends in the other, so one
/// 32-bit compare decides both, and one min and one max the ranges.
template <class M> LOOM_CERT_FN bool bf16DecidedBoth(float y, float err, float z, float errZ) {
  float a = fabsf(y), e = fmaf(a, 0x1p-21f, err);
  float b = fabsf(z), f = fmaf(b, 0x1p-21f, errZ);
  uint32_t low = M::bf16Pair(y - e, z - f), high = M::bf16Pair(y + e, z + f);
  return (fminf(a, b) >= 1e-30f) & (fmaxf(a + e, b + f) <= 1e30f) & (low == high);
}

LOOM_CERT_FN bool fastInput(float x) {
  float a = fabsf(x);
  return (a <= 64.0f) & (a >= 0x1p-100f);
}

/// The logistic pieces of z: E = e^-z, d = 1 + E, and bounds on their
/// relative errors given zRelErr, z's (kExactZ: z is exact).
struct Logistic {
  float e, d, relErrE, relErrD;
};

/// `scale` multiplies both bounds (4: the four times bf16Decided takes,
/// folded into the constants).
template <class M, bool kExactZ>
LOOM_CERT_FN Logistic logistic(float z, float zRelErr = 0.0f, float scale = 1.0f) {
  float e = M::expFast(-z), az = fabsf(z);
  float relErrE = fmaf(az, scale * 1.2f * kEps, scale * 2.0f * kEps);
  if constexpr (!kExactZ) relErrE += az * (scale * zRelErr);
  return {e, 1.0f + e, relErrE, fmaf(relErrE, fminf(e, 1.0f), scale * 0.5f * kEps)};
}

/// GELU-tanh's z = 2u; u's relative error is within 3.5 eps (x + a x^3 adds
/// like-signed terms).
LOOM_CERT_FN float geluTanhZ(float x) { return 2.0f * kSqrt2OverPiF * (x + kGeluA * x * x * x); }

// SiLU, GELU-tanh: y = x / d (d's error, the quotient's 2 ulp).
// GELU-erf, y = (x / 2)(1 + erf(x / sqrt 2)): erf within 2 ulp of an
// argument within eps, 1 + t within 4.8 eps: |y - gelu| <= 2.4 eps |x| + 0.5
// eps |y|.
template <Activation kAct, class M> LOOM_CERT_FN bool unaryFast(float x, float &y) {
  float err;
  if constexpr (kAct == Activation::Silu) {
    Logistic l = logistic<M, true>(x);
    y = M::divide(x, l.d);
    err = fabsf(y) * (l.relErrD + 2.0f * kEps);
  } else if constexpr (kAct == Activation::GeluTanh) {
    Logistic l = logistic<M, false>(geluTanhZ(x), 3.5f * kEps);
    y = M::divide(x, l.d);
    err = fabsf(y) * (l.relErrD + 2.0f * kEps) + kDoubleSlack * fabsf(x);
  } else {
    y = 0.5f * x * (1.0f + M::erf(x * kInvSqrt2F));
    err = kEps * (2.5f * fabsf(x) + fabsf(y)) + kDoubleSlack * fabsf(x);
  }
  return fastInput(x) & bf16Decided<M>(y, 4.0f * err);
}

// The certified f32 form of the activation gradient, dx = d dy.
// SiLU's and GELU-tanh's derivatives are s (1 + w) (w = g E s, or 4 p E s):
// with s = 1 / d from M::divide (relative error es = d's + 2 eps) and w's
// relative error ew, 1 + w is within |w| ew + eps/2 |1 + w|, and
//   |dx - .| <= |s dy| (|w| ew + |1 + w| (es + 1.5 eps)),
// absolute because 1 + w cancels where the derivative crosses zero (x near
// -1.28 or -0.75).
//   gelu erf: (1 + t) / 2 within 1.75 eps; x phi(x) within (x^2 / 4 +
//     3.5) eps |x phi(x)| <= 1 eps (|x|^3 phi <= 0.47, |x| phi <= 0.25):
//     |dx - .| <= 3.4 eps |dy| + 0.5 eps |dx|.
/// s (1 + w) dy and its bound, from the logistic pieces, w's factor f (g,
/// or 4p) with relative error ef, and dy's relative error edy.
template <class M>
LOOM_CERT_FN float logisticDerivative(const Logistic &l, float f, float ef, float dy, float edy,
                                      float &err) {
  float s = M::divide(1.0f, l.d), es = l.relErrD + 2.0f * kEps;
  float w = f * l.e * s, ew = ef + l.relErrE + es + kEps;
  float v = 1.0f + w, sdy = s * dy;
  err = fabsf(sdy) * (fabsf(w) * ew + fabsf(v) * (es + 1.5f * kEps + edy));
  return sdy * v;
}

/// kKind: ActivationGrad's kind (0 SiLU, 1 GELU-erf, 2 GELU-tanh).
template <int kKind, class M> LOOM_CERT_FN bool activationGradFast(float x, float dy, float &dx) {
  float err;
  if constexpr (kKind == 0) { // silu: w = g E s
    dx = logisticDerivative<M>(logistic<M, true>(x), x, 0.0f, dy, 0.0f, err);
  } else if constexpr (kKind == 1) {
    float d = 0.5f * (1.0f + M::erf(x * kInvSqrt2F)) + x * kInvSqrt2PiF * M::exp(-0.5f * x * x);
    dx = d * dy;
    err = kEps * (3.5f * fabsf(dy) + fabsf(dx)) + kDoubleSlack * fabsf(dy);
  } else { // gelu tanh: w = 4 p E s, p within 4 eps
    static_assert(kKind == 2, "not a certified kind");
    float p = 0.5f * kSqrt2OverPiF * x * (1.0f + 3.0f * kGeluA * x * x);
    dx = logisticDerivative<M>(logistic<M, false>(geluTanhZ(x), 3.5f * kEps), 4.0f * p,
                               4.0f * kEps, dy, 0.0f, err);
    err += kDoubleSlack * fabsf(dy) * (1.0f + 4.0f * fabsf(p));
  }
  return fastInput(x) & bf16Decided<M>(dx, 4.0f * err);
}

// SwiGLU: y = g / d * u, du = g / d * dy, dg = s (1 + g E s) (dy u), with
// the bounds four times over from the start (logistic's scale).
//   y:  g / d within relErrD + 2 eps, times u: + eps / 2.
//   dg, du: s = 1 / d (M::divide) within es = relErrD + 2 eps, gs = g s
//     (+ eps / 2) serves both w = gs E (ew = relErrE + es + eps, as
//     logisticDerivative's) and du = gs dy (relErrD + 3 eps); dg's bound
//     is logisticDerivative's with edy = eps / 2 (dy u rounded), its |v|
//     term relErrD + 4 eps and, since ew <= relErrE + that, its |w| term
//     taken as their sum. One division instead of two per element.
template <class M> LOOM_CERT_FN bool swiGluFast(float g, float u, float &y) {
  Logistic l = logistic<M, true>(g, 0.0f, 4.0f);
  y = M::divide(g, l.d) * u;
  return fastInput(g) & bf16Decided<M>(y, fabsf(y) * (l.relErrD + 10.0f * kEps));
}

template <class M>
LOOM_CERT_FN bool swiGluGradFast(float g, float u, float dy, float &dg, float &du) {
  Logistic l = logistic<M, true>(g, 0.0f, 4.0f);
  float s = M::divide(1.0f, l.d), gs = g * s;
  float w = gs * l.e, v = 1.0f + w, sdy = s * (dy * u);
  dg = sdy * v;
  du = gs * dy;
  float termV = l.relErrD + 16.0f * kEps; // 4 (relErrD + 4 eps)
  float errG = fabsf(sdy) * fmaf(fabsf(v), termV, fabsf(w) * (l.relErrE + termV));
  return fastInput(g) & bf16DecidedBoth<M>(dg, errG, du, fabsf(du) * (l.relErrD + 12.0f * kEps));
}

#ifdef __CUDACC__
/// CUDA's intrinsics, whose documented maxima the bounds above assume.
struct CudaMath {
  static __device__ float expFast(float x) { return __expf(x); }
  static __device__ float divide(float a, float b) { return __fdividef(a, b); }
  static __device__ float erf(float x) { return erff(x); }
  static __device__ float exp(float x) { return expf(x); }
  static __device__ uint32_t bf16Pair(float lo, float hi) {
    __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &r, 4);
    return bits;
  }
};
#endif

} // namespace loom::rt::certified

#endif
