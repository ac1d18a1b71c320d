//===- GradientErrorTest.cpp - Comparing gradients, zeros included --------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/GradientError.h"

#include <gtest/gtest.h>

namespace loom::train {
namespace {

TEST(GradientError, RelativeToTheReference) {
  bool floored = true;
  // ||g - ref|| = 1e-3 against ||ref|| = 2: 5e-4.
  EXPECT_DOUBLE_EQ(relativeGradientError(1e-6, 4.0, 10.0, floored), 5e-4);
  EXPECT_FALSE(floored);
}

TEST(GradientError, ZeroGradientsAgainstTheLargest) {
  // OPT's key bias under dp_shard=2,tp=2 on CUDA: reference norm 1.9e-11,
  // difference 2e-11, largest gradient 1.1. Against the floor (1.1e-6) that
  // read 1.8e-5; against the largest it is noise.
  bool floored = false;
  double rel = relativeGradientError(4e-22, 1.9e-11 * 1.9e-11, 1.1, floored);
  EXPECT_TRUE(floored);
  EXPECT_NEAR(rel, 2e-11 / 1.1, 1e-20);
  // A real error in a zero gradient still shows: 1e-4 of the largest.
  rel = relativeGradientError(1.1e-4 * 1.1e-4, 0.0, 1.1, floored);
  EXPECT_TRUE(floored);
  EXPECT_NEAR(rel, 1e-4, 1e-12);
  // Just above the floor is compared relative to itself.
  rel = relativeGradientError(0.0, 1.2e-6 * 1.2e-6, 1.1, floored);
  EXPECT_FALSE(floored);
}

TEST(GradientError, AllZeroAndNonFinite) {
  bool floored = false;
  // Every reference gradient zero: the plain difference.
  EXPECT_EQ(relativeGradientError(0.0, 0.0, 0.0, floored), 0.0);
  EXPECT_EQ(relativeGradientError(4.0, 0.0, 0.0, floored), 2.0);
  EXPECT_TRUE(std::isinf(relativeGradientError(NAN, 1.0, 1.0, floored)));
}

} // namespace
} // namespace loom::train
