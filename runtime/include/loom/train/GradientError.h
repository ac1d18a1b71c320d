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
// measured against that floor instead.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_LOOM_GRADIENTERROR_H
#define LOOM_TRAIN_LOOM_GRADIENTERROR_H

#include <algorithm>
#include <cmath>

namespace loom::train {

/// The floor below which a reference gradient counts as zero.
inline double gradientErrorFloor(double largestReferenceNorm) { return 1e-6 * largestReferenceNorm; }

/// ||g - ref|| / ||ref||, or / floor when ||ref|| < floor; sets `floored`.
inline double relativeGradientError(double diffNorm2, double refNorm2, double floor,
                                    bool &floored) {
  double diff = std::sqrt(diffNorm2), ref = std::sqrt(refNorm2);
  floored = ref < floor;
  double rel = floored ? diff / floor : ref > 0 ? diff / ref : diff;
  return std::isfinite(rel) ? rel : INFINITY;
}

} // namespace loom::train

#endif
