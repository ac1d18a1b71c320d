//===- GpuTestUtil.h - Skipping CUDA tests without a GPU --------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// REQUIRE_GPU() skips a test (reported as skipped, never passed) when the
// build has no CUDA backend or the machine no usable GPU.
//===----------------------------------------------------------------------===//
#ifndef LOOM_UNITTESTS_RUNTIME_GPUTESTUTIL_H
#define LOOM_UNITTESTS_RUNTIME_GPUTESTUTIL_H

#include <gtest/gtest.h>

#include <string>

#ifdef LOOM_HAVE_CUDA
#include "cuda/CudaExecutor.h"
#endif

namespace loom::rt::test {

inline bool haveGpu(std::string &why) {
#ifdef LOOM_HAVE_CUDA
  return cudaDeviceAvailable(why);
#else
  why = "built without the CUDA backend";
  return false;
#endif
}

} // namespace loom::rt::test

#define REQUIRE_GPU()                                                                            \
  do {                                                                                           \
    std::string why_;                                                                            \
    if (!::loom::rt::test::haveGpu(why_)) GTEST_SKIP() << why_;                                  \
  } while (0)

#endif // LOOM_UNITTESTS_RUNTIME_GPUTESTUTIL_H
