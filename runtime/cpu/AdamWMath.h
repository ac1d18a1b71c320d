//===- AdamWMath.h - One AdamW element, the same bits on CPU and GPU -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// PyTorch's AdamW (decoupled decay, no amsgrad), t = step + 1:
//   p' = p (1 - lr wd)
//   m' = b1 m + (1 - b1) g
//   v' = b2 v + (1 - b2) g^2
//   p' = p' - lr / (1 - b1^t) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps)
// The per-step scalars are computed in double and rounded to f32 once; the
// per-element work is f32, each operation rounded in the order written, as
// PyTorch's fused AdamW computes for f32 parameters. The CPU backend and
// the CUDA kernels both call these functions: IEEE f32 + - * / and sqrt
// round the same on both, and neither side contracts a * b + c into a
// fused multiply-add (the CUDA file is compiled --fmad=false, the CPU one
// -ffp-contract=off), so the two backends agree bit for bit.
//
// b^t is taken by squaring (exact IEEE multiplications) rather than pow,
// whose last bit differs between glibc and CUDA's libdevice.
//
// The includer may define LOOM_ADAMW_FN (CUDA: __host__ __device__ inline).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPU_ADAMWMATH_H
#define LOOM_RUNTIME_CPU_ADAMWMATH_H

#include <cmath>
#include <cstdint>

#ifndef LOOM_ADAMW_FN
#define LOOM_ADAMW_FN inline
#endif

namespace loom::rt {

/// One step's scalars, each rounded once to f32.
struct AdamWScalars {
  float b1, oneMinusB1, b2, oneMinusB2, eps, decay, stepSize, bc2Sqrt;
};

/// b^t for t >= 0 by binary powering.
LOOM_ADAMW_FN double adamwPower(double b, int64_t t) {
  double r = 1.0;
  while (t > 0) {
    if (t & 1) r *= b;
    b *= b;
    t >>= 1;
  }
  return r;
}

/// The scalars of the step numbered `step` (0 first) at learning rate lr.
LOOM_ADAMW_FN AdamWScalars adamwScalars(float lr, float step, double b1, double b2, double eps,
                                        double wd) {
  int64_t t = int64_t(step) + 1;
  return {float(b1),
          float(1.0 - b1),
          float(b2),
          float(1.0 - b2),
          float(eps),
          float(1.0 - double(lr) * wd),
          float(double(lr) / (1.0 - adamwPower(b1, t))),
          float(sqrt(1.0 - adamwPower(b2, t)))};
}

/// One element: p, m, v updated in place from the gradient g.
LOOM_ADAMW_FN void adamwElement(const AdamWScalars &k, float g, float &p, float &m, float &v) {
  float mi = k.b1 * m + k.oneMinusB1 * g;
  float vi = k.b2 * v + k.oneMinusB2 * g * g;
  float denom = sqrtf(vi) / k.bc2Sqrt + k.eps;
  p = p * k.decay - k.stepSize * mi / denom;
  m = mi;
  v = vi;
}

} // namespace loom::rt

#endif
