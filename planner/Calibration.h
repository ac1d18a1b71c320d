//===- Calibration.h - Measuring a hardware profile through loom's runtime -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// `loom calibrate`: times GEMMs (bf16, bf16 -> f32, f32, fp8), attention, an HBM copy, one
// instruction of each memory-bound opcode class and
// the launch overhead as runtime programs on a backend and writes them
// into a copy of a base profile (Calibration.cpp says how each is timed).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_CALIBRATION_H
#define LOOM_PLANNER_CALIBRATION_H

#include <string>

namespace loom::planner {

struct CalibrationOptions {
  std::string base = "h100";  // profile whose links, memory and spec peaks are kept
  std::string backend = "cuda";
  std::string name;           // "" : the base's, "+calibrated"
  std::string outputName;     // the file the profile goes to (for messages)
  int reps = 10;              // timed runs per measurement
  bool quick = false;         // tiny sizes: tests the path, measures nothing useful
  bool attentionOnly = false; // time attention, print, produce no profile
  bool memoryOnly = false;    // time the copy, launches and memory-bound classes; likewise
};

/// Measures (printing each figure) and sets `profile` to the calibrated
/// profile's JSON, checked to parse as a profile; with attentionOnly or
/// memoryOnly, leaves it empty. False with a one-line `err`.
bool calibrateProfile(const CalibrationOptions &o, std::string &profile, std::string &err);

} // namespace loom::planner

#endif
