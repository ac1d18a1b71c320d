//===- PipelinePlan.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/PipelinePlan.h"
#include "loom/io/FileBytes.h"


namespace loom::compiler {

bool readScheduleFile(const std::string &path, rt::PipelineSchedule &out, std::string &err) {
  std::string text;
  if (!io::readFileBytes(path, text)) {
    err = "cannot read schedule file '" + path + "'";
    return false;
  }
  return rt::parseScheduleCsv(text, path, out, err);
}

bool planSchedule(const planner::Plan &plan, rt::PipelineSchedule &out, std::string &err) {
  std::string name = planner::meshPlanName(plan);
  if (!plan.scheduleFile.empty()) {
    if (!readScheduleFile(plan.scheduleFile, out, err))
      return false;
    if (out.ranks != plan.pp || out.microbatches != plan.microbatches) {
      err = "plan '" + name + "': schedule file " + plan.scheduleFile + " has " +
            std::to_string(out.ranks) + " ranks and " + std::to_string(out.microbatches) +
            " microbatches, the plan pp=" + std::to_string(plan.pp) + " and microbatches=" +
            std::to_string(plan.microbatches);
      return false;
    }
  } else {
    rt::ScheduleKind kind = rt::ScheduleKind::OneFOneB;
    switch (plan.schedule) {
    case planner::Schedule::GPipe: kind = rt::ScheduleKind::GPipe; break;
    case planner::Schedule::Interleaved: kind = rt::ScheduleKind::Interleaved; break;
    case planner::Schedule::ZeroBubble: kind = rt::ScheduleKind::ZeroBubble; break;
    default: break;
    }
    if (!rt::buildSchedule(kind, plan.pp, plan.virtualStages, plan.microbatches, out, err)) {
      err = "plan '" + name + "': " + err;
      return false;
    }
  }
  if (std::string why = rt::validateSchedule(out); !why.empty()) {
    err = "plan '" + name + "': schedule " + out.name + ": " + why;
    return false;
  }
  return true;
}

} // namespace loom::compiler
