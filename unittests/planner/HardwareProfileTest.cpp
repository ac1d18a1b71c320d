//===- HardwareProfileTest.cpp - Profiles and efficiency curves -----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/HardwareProfile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace loom::planner;

namespace {

std::string shippedProfile(const std::string &name) {
  // The source root comes from CMake: __FILE__ is relative when ccache
  // rewrites paths (CCACHE_BASEDIR), and tests run from the build tree.
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/planner/profiles/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PlannerProfile, CurveInterpolatesInLog2) {
  EfficiencyCurve c;
  c.points = {{64, 0.1}, {256, 0.5}};
  // 128 is half-way between 64 and 256 in log2: 0.1 + 0.5 * (0.5 - 0.1) = 0.3.
  EXPECT_NEAR(c.at(128), 0.3, 1e-12);
  // Clamped outside the table.
  EXPECT_EQ(c.at(8), 0.1);
  EXPECT_EQ(c.at(1 << 20), 0.5);
  EXPECT_EQ(c.at(256), 0.5);
}

TEST(PlannerProfile, ShippedH100) {
  HardwareProfile hw;
  std::string err;
  ASSERT_TRUE(parseProfile(shippedProfile("h100.json"), "h100.json", hw, err)) << err;
  EXPECT_EQ(hw.peakBf16, 989e12);
  EXPECT_EQ(hw.peakFp8, 1979e12);
  // Large GEMMs reach the measured 819 of 989 TFLOP/s.
  EXPECT_NEAR(hw.gemm.at(8192) * hw.peakBf16, 819e12, 0.5e12);
  // 78 GiB usable; 3.35 TB/s at the assumed 80% achieved.
  EXPECT_EQ(hw.memoryBytes, 78.0 * 1024 * 1024 * 1024);
  EXPECT_NEAR(hw.hbmBandwidth, 3350e9 * 0.8, 1);
  // NVLink 450 GB/s per direction at 80%, 10 us per step.
  EXPECT_NEAR(hw.intraNode.bandwidth, 360e9, 1);
  EXPECT_NEAR(hw.intraNode.alpha, 10e-6, 1e-15);
  EXPECT_EQ(hw.gpusPerNode, 8);
  EXPECT_NE(hw.source.find("NOT produced by 'loom calibrate'"), std::string::npos);
}

// loom calibrate's measured fp8 curve replaces the assumed ratio; a bad
// one is an error naming it.
TEST(PlannerProfile, MeasuredFp8Curve) {
  std::string text = shippedProfile("h100.json");
  HardwareProfile assumed, measured;
  std::string err;
  ASSERT_TRUE(parseProfile(text, "h100.json", assumed, err)) << err;
  EXPECT_TRUE(assumed.gemmFp8.points.empty());
  EXPECT_NEAR(assumed.fp8GemmEfficiency(8192), 0.8 * assumed.gemm.at(8192), 1e-12);
  const std::string key = "\"fp8_efficiency_ratio\": 0.8,";
  size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  std::string withCurve = text;
  withCurve.insert(at + key.size(), " \"fp8_efficiency_by_min_dim\": [[1024, 0.3], [4096, 0.6]],");
  ASSERT_TRUE(parseProfile(withCurve, "calibrated.json", measured, err)) << err;
  EXPECT_NEAR(measured.fp8GemmEfficiency(2048), 0.45, 1e-12);
  std::string bad = text;
  bad.insert(at + key.size(), " \"fp8_efficiency_by_min_dim\": [[1024, 1.5]],");
  EXPECT_FALSE(parseProfile(bad, "bad.json", measured, err));
  EXPECT_NE(err.find("gemm.fp8_efficiency_by_min_dim"), std::string::npos) << err;
}

TEST(PlannerProfile, ShippedH200DiffersInMemoryOnly) {
  HardwareProfile h100, h200;
  std::string err;
  ASSERT_TRUE(parseProfile(shippedProfile("h100.json"), "h100.json", h100, err)) << err;
  ASSERT_TRUE(parseProfile(shippedProfile("h200.json"), "h200.json", h200, err)) << err;
  EXPECT_EQ(h200.peakBf16, h100.peakBf16);
  EXPECT_EQ(h200.memoryBytes, 139.0 * 1024 * 1024 * 1024);
  EXPECT_NEAR(h200.hbmBandwidth, 4800e9 * 0.8, 1);
}

TEST(PlannerProfile, ErrorsNameTheProblem) {
  HardwareProfile hw;
  std::string err;
  EXPECT_FALSE(parseProfile("{", "bad.json", hw, err));
  EXPECT_EQ(err.rfind("bad.json: not valid JSON", 0), 0u) << err;
  std::string text = shippedProfile("h100.json");
  std::string noPeak = text;
  noPeak.replace(noPeak.find("\"bf16\": 989"), 11, "\"bf16x\": 989");
  EXPECT_FALSE(parseProfile(noPeak, "p.json", hw, err));
  EXPECT_EQ(err, "p.json: missing number 'gemm.peak_tflops.bf16'");
  std::string descending = text;
  descending.replace(descending.find("[16, 0.02]"), 10, "[9999, 0.02]");
  EXPECT_FALSE(parseProfile(descending, "p.json", hw, err));
  EXPECT_EQ(err, "p.json: 'gemm.efficiency_by_min_dim' sizes must ascend");
  EXPECT_FALSE(loadProfile("/nonexistent/gpu.json", hw, err));
  EXPECT_EQ(err, "cannot open GPU profile '/nonexistent/gpu.json' (use h100, h200 or a JSON file)");
}

} // namespace
