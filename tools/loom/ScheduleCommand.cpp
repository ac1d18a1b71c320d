//===- ScheduleCommand.cpp - `loom schedule`: pipeline schedules as data --===//
//
// Part of loom, under the Apache License v2.0.
//
// Builds a pipeline schedule (or reads a custom one from a CSV file),
// validates it, and prints it as a rank x time table with each rank's idle
// fraction and peak of microbatches in flight; --svg draws the timeline,
// --csv writes the actions (a starting point for a custom schedule). The
// schedule is the object `loom train --plan pp=...` runs.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "compiler/PipelinePlan.h"
#include "loom/runtime/PipelineProfile.h"
#include "loom/runtime/PipelineSchedule.h"
#include "loom/train/ScheduleReport.h"

#include <cstdio>
#include <fstream>

namespace loom::tools {
using namespace compiler;

int runSchedule(int argc, char **argv) {
  Args args("schedule", "--pp P --microbatches M [--schedule S] [--virtual V] | --file F.csv");
  args.flag("pp", "pipeline ranks");
  args.flag("microbatches", "microbatches per step");
  args.flag("schedule", "gpipe, 1f1b, interleaved or zb", false, "1f1b");
  args.flag("virtual", "stages per rank (interleaved: 2 or more; zb: 1 = ZB-H1, 2 = ZBV)", false,
            "1");
  args.flag("file", "a custom schedule: CSV of rank,action,stage,microbatch");
  args.flag("svg", "write the timeline (unit costs: F 1, B 2, I 1, W 1) to this .svg");
  args.flag("csv", "write the schedule's actions to this .csv");
  args.flag("actions", "also list every rank's actions in order, transfers included", true);
  args.flag("serial", "its unpipelined counterpart: one microbatch at a time through every stage "
                      "(the same placement and backward; for loom train --stage-costs-out)",
            true);
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  rt::PipelineSchedule s;
  std::string err;
  if (args.has("file")) {
    if (!readScheduleFile(args.get("file"), s, err))
      return fail("schedule", err);
  } else {
    if (!args.has("pp") || !args.has("microbatches"))
      return fail("schedule", "--pp and --microbatches are required (or --file)");
    rt::ScheduleKind kind;
    if (!rt::parseScheduleKind(args.get("schedule"), kind))
      return fail("schedule", "unknown schedule '" + args.get("schedule") +
                                  "' (gpipe, 1f1b, interleaved, zb)");
    if (!rt::buildSchedule(kind, int(args.getInt("pp")), int(args.getInt("virtual")),
                           int(args.getInt("microbatches")), s, err))
      return fail("schedule", err);
  }
  if (args.has("serial"))
    s = rt::serialSchedule(s);
  rt::ScheduleTimeline t;
  if (!rt::simulateSchedule(s, {}, t, err))
    return fail("schedule", s.name + ": " + err);
  std::printf("%s", train::scheduleReport(s, t, args.has("actions")).c_str());
  auto write = [&](const std::string &path, const std::string &text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    return bool(out << text);
  };
  if (args.has("svg")) {
    if (!write(args.get("svg"), rt::scheduleSvg(s, t, "loom schedule " + s.name)))
      return fail("schedule", "cannot write '" + args.get("svg") + "'");
    std::printf("wrote %s\n", args.get("svg").c_str());
  }
  if (args.has("csv")) {
    if (!write(args.get("csv"), rt::scheduleCsv(s)))
      return fail("schedule", "cannot write '" + args.get("csv") + "'");
    std::printf("wrote %s\n", args.get("csv").c_str());
  }
  return 0;
}

} // namespace loom::tools
