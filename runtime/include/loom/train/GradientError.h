//===- GradientError.h - Comparing a gradient with a reference --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The relative L2 error ||g - ref|| / ||ref|| of a gradient, as `loom train
// --expect-grads` and `loom verify` report it. A gradient that is zero in
// exact arithmetic (a key bias without rotary: softmax ignores a shift that
// all of a row's scores share) holds only rounding noise in both runs, and
// noise relative to noise is meaningless; such a gradient, one whose
// reference norm is below 1e-6 of the largest reference gradient's, is
// measured against the largest gradient instead: the scale at which its
// error would matter. (Measured against the 1e-6 floor itself, as before
// 2026-11-27, OPT's exactly-zero key bias under dp_shard=2,tp=2 on CUDA
// came out at 1.8e-5: noise of 2e-11 next to a largest gradient of 1.1.)
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_LOOM_GRADIENTERROR_H
#define LOOM_TRAIN_LOOM_GRADIENTERROR_H

#include <algorithm>
#include <cmath>

namespace loom::train {

/// The norm below which a reference gradient counts as zero.
inline double gradientErrorFloor(double largestReferenceNorm) { return 1e-6 * largestReferenceNorm; }

/// ||g - ref|| / ||ref||, or ||g - ref|| / largest when ||ref|| is below
/// gradientErrorFloor(largest) (sets `floored`); infinite if not finite.
inline double relativeGradientError(double diffNorm2, double refNorm2, double largestRefNorm,
                                    bool &floored) {
  double diff = std::sqrt(diffNorm2), ref = std::sqrt(refNorm2);
  floored = ref < gradientErrorFloor(largestRefNorm);
  // (No gradient at all is nonzero: largest is 0, nothing is floored, and
  // the plain difference is all there is to report.)
  double rel = floored ? diff / largestRefNorm : ref > 0 ? diff / ref : diff;
  return std::isfinite(rel) ? rel : INFINITY;
}

} // namespace loom::train

#endif
