//===- CalibrateCommand.cpp - `loom calibrate` ----------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Flags in, the planner's calibration (planner/Calibration.h) measures, the
// profile goes out through a temp file and a rename.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "loom/runtime/AtomicFile.h"
#include "planner/Calibration.h"

#include <algorithm>
#include <cstdio>

namespace loom::tools {

int runCalibrate(int argc, char **argv) {
  Args args("calibrate", "-o PROFILE.json [--base h100|h200|FILE.json] [--backend cuda]");
  args.flag("o", "write the calibrated profile here");
  args.flag("base", "profile whose links, memory and spec peaks are kept", false, "h100");
  args.flag("backend", "runtime backend to measure", false, "cuda");
  args.flag("name", "the profile's name (default: the base's, '+ calibrated')");
  args.flag("reps", "timed runs per measurement", false, "10");
  args.flag("quick", "tiny sizes only (tests the command, measures nothing useful)", true);
  args.flag("attention-only", "time attention forward and backward only; print, write nothing", true);
  args.flag("memory-only", "time the memory-bound opcode classes only; print, write nothing", true);
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  planner::CalibrationOptions o;
  o.attentionOnly = args.has("attention-only");
  o.memoryOnly = args.has("memory-only");
  bool printOnly = o.attentionOnly || o.memoryOnly;
  if (!args.has("o") && !printOnly)
    return fail("calibrate", "missing -o PROFILE.json");
  o.base = args.get("base");
  o.backend = args.get("backend");
  o.name = args.get("name");
  o.outputName = args.get("o");
  o.reps = int(std::max<int64_t>(1, args.getInt("reps")));
  o.quick = args.has("quick");
  std::string profile, err;
  if (!planner::calibrateProfile(o, profile, err))
    return fail("calibrate", err);
  if (printOnly)
    return 0;
  if (!rt::writeAtomically(o.outputName, profile, err))
    return fail("calibrate", err);
  std::printf("wrote %s\n", o.outputName.c_str());
  return 0;
}

} // namespace loom::tools
