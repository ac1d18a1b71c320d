//===- PipelinePlan.h - The schedule a pipeline plan runs -------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_PIPELINEPLAN_H
#define LOOM_COMPILER_PIPELINEPLAN_H

#include "loom/runtime/PipelineSchedule.h"
#include "planner/Plan.h"

#include <string>

namespace loom::compiler {

/// Reads and checks a custom schedule (PipelineSchedule.h's CSV).
bool readScheduleFile(const std::string &path, rt::PipelineSchedule &out, std::string &err);

/// The schedule of a plan with pp > 1: built from pp_schedule, pp_virtual
/// and microbatches, or read from the plan's schedule file (which must
/// agree with pp and microbatches), then validated. False with a one-line
/// `err` naming the plan.
bool planSchedule(const planner::Plan &plan, rt::PipelineSchedule &out, std::string &err);

} // namespace loom::compiler

#endif
