//===- HardwareProfile.h - What one GPU and its links can do ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A profile is a JSON file (planner/profiles/*.json, format in
// docs/planner.md): peak GEMM throughput and achieved fraction by GEMM
// shape, attention efficiency by sequence length, HBM bandwidth, and the
// alpha-beta parameters of the intra-node and inter-node links. Each file
// says where its numbers come from (measured, vendor spec or estimate).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_HARDWAREPROFILE_H
#define LOOM_PLANNER_HARDWAREPROFILE_H

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace loom::planner {

/// A fraction of peak as a function of a size, given at points and
/// interpolated linearly in log2(size); clamped outside the table.
struct EfficiencyCurve {
  std::vector<std::pair<double, double>> points; // (size, fraction), sizes ascending
  double at(double size) const;
};

/// Alpha-beta model of a link: a message of b bytes costs alpha + b / bandwidth.
struct Link {
  std::string name;
  double bandwidth = 0; // achieved bytes/s per GPU, one direction
  double alpha = 0;     // seconds per message (per ring step)
};

struct HardwareProfile {
  std::string name, source;
  double memoryBytes = 0;      // usable per GPU
  double peakBf16 = 0;         // dense FLOP/s
  double peakFp8 = 0;
  double fp8Efficiency = 1;    // fp8 GEMMs reach this fraction of the bf16 curve's efficiency
  EfficiencyCurve gemm;        // fraction of peak vs min(M, N, K)
  // fp8 GEMMs' fraction of the fp8 peak by size, as `loom calibrate`
  // measured it (loom's scaled GEMMs); empty when the profile has none,
  // and then fp8Efficiency x gemm stands in (an assumed factor).
  EfficiencyCurve gemmFp8;
  /// An fp8 GEMM's fraction of the fp8 peak at a cube of side `size`.
  double fp8GemmEfficiency(double size) const {
    return gemmFp8.points.empty() ? fp8Efficiency * gemm.at(size) : gemmFp8.at(size);
  }
  // bf16 products with f32 results (weight gradients accumulated in f32)
  // and f32 products, each as a fraction of the bf16 peak, as `loom
  // calibrate` measured them; empty in older profiles (the bf16 curve
  // stands in, with a note).
  EfficiencyCurve gemmF32Out, gemmF32;
  // GEMMs of training at their own shapes (`loom calibrate`'s
  // gemm.token_grid; empty in older profiles): fractions of the bf16
  // peak for `tokens` rows against weights of widths `dims` x `dims`.
  struct TokenGrid {
    double tokens = 0;
    std::vector<double> dims;
    // [i][j]: [T, dims[i]] x [dims[i], dims[j]] -> bf16 (rowsBf16), and
    // [T, dims[i]]^T x [T, dims[j]] -> bf16 / f32 (weight gradients).
    std::vector<std::vector<double>> rowsBf16, reduceBf16, reduceF32;
    bool empty() const { return dims.empty(); }
    /// `table` at (d0, d1), interpolated in log2 of both, clamped.
    double at(const std::vector<std::vector<double>> &table, double d0, double d1) const;
  };
  TokenGrid gemmTokens;
  // Effective bytes/s of each memory-bound opcode class ("adamw",
  // "embedding_grad", ...: planner/ProgramCost.h's class names), each
  // timed on one representative instruction by `loom calibrate`; a class
  // missing here is priced at hbmBandwidth (the copy's).
  std::map<std::string, double> classBandwidth;
  EfficiencyCurve attention;   // fraction of bf16 peak vs sequence length (forward)
  double attentionBackwardFactor = 1; // backward efficiency relative to forward
  // The same per head dim, as `loom calibrate` measured them (optional;
  // empty in older profiles, which then price every head dim at the
  // tables above).
  struct AttentionTables {
    EfficiencyCurve efficiency;
    double backwardFactor = 1;
  };
  std::map<int, AttentionTables> attentionByHeadDim;
  double hbmBandwidth = 0;     // achieved bytes/s
  double kernelOverhead = 0;   // seconds per kernel launch
  double gemmWorkspace = 0;    // bytes of GEMM library workspace
  int gpusPerNode = 8;
  Link intraNode, interNode;
};

/// Parses a profile; `origin` names the file in the one-line error.
bool parseProfile(const std::string &text, const std::string &origin, HardwareProfile &out,
                  std::string &err);

/// "h100", "h200" (shipped with loom, compiled in) or a JSON file path.
bool loadProfile(const std::string &nameOrPath, HardwareProfile &out, std::string &err);

/// The JSON text of a shipped profile, or empty.
std::string builtinProfileText(const std::string &name);

} // namespace loom::planner

#endif
