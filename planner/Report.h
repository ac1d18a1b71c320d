//===- Report.h - The planner's table, JSON and --explain -------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_REPORT_H
#define LOOM_PLANNER_REPORT_H

#include "loom/io/Json.h"
#include "planner/Planner.h"

#include <ostream>

namespace loom::planner {

struct ReportOptions {
  size_t top = 10;     // plans in the table
  size_t rejected = 8; // rejected plans listed with their reasons
};

/// The ranked table with memory and time breakdowns, then the rejections.
void printRanking(std::ostream &os, const CostModel &cm, const PlanRequest &req,
                  const PlanRanking &ranking, const ReportOptions &opts);

/// The same data as JSON (bytes, seconds, FLOPs).
json::Value rankingJson(const CostModel &cm, const PlanRequest &req, const PlanRanking &ranking,
                        const ReportOptions &opts);

/// One plan in depth: mesh, stages, per-layer sharding, collectives,
/// memory and time. `rank` is its place among feasible plans (0: rejected).
void printExplain(std::ostream &os, const CostModel &cm, const PlanEstimate &detailed, size_t rank,
                  size_t feasible);
json::Value explainJson(const CostModel &cm, const PlanEstimate &detailed, size_t rank);

/// What the planner read off the IR: per layer group the op counts, FLOPs
/// and bytes by phase, the saved activations under each checkpoint policy,
/// the parameters with their rules and the tensor-parallel collectives.
json::Value modelCostJson(const ModelCost &m);

/// "1.5 GiB", "12.0 MiB", "512 B".
std::string formatBytes(double bytes);
/// "1.23 s", "4.56 ms", "7.8 us".
std::string formatSeconds(double seconds);

} // namespace loom::planner

#endif
