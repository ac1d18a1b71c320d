//===- MeasuredStageCosts.h - loom plan --stage-costs -----------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Reads the stage-cost profiles `loom plan --stage-costs` times pipeline
// plans with (loom/runtime/PipelineProfile.h; CostModel::useStageCosts
// picks the one that fits each plan).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_MEASUREDSTAGECOSTS_H
#define LOOM_PLANNER_MEASUREDSTAGECOSTS_H

#include "loom/runtime/PipelineProfile.h"
#include "planner/Plan.h"

#include <string>
#include <vector>

namespace loom::planner {

/// Reads each file of the comma-separated `paths`. A profile measured at
/// another microbatch or sequence length than `req` asks for, or for more
/// pipeline ranks than it has GPUs, could time no plan of this request:
/// that is an error naming the file and both shapes. False with a
/// one-line `err`.
bool loadStageCostProfiles(const std::string &paths, const PlanRequest &req,
                           std::vector<rt::StageCostProfile> &out, std::string &err);

} // namespace loom::planner

#endif
