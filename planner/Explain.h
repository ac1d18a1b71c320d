//===- Explain.h - The plan `loom plan --explain` explains -------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_EXPLAIN_H
#define LOOM_PLANNER_EXPLAIN_H

#include "planner/CostModel.h"
#include "planner/Planner.h"

#include <string>

namespace loom::planner {

/// `--explain RANK` (1-based, rank > 0) picks that row of the ranking;
/// `--explain FILTER` (rank 0) the best feasible plan matching `filter`,
/// else the fastest candidate matching it (feasible or not). Sets `chosen`
/// (evaluated in detail) and `chosenRank` (0: not in the ranking). False
/// with a one-line `err` naming `explainText` when nothing fits.
bool choosePlanToExplain(const CostModel &cm, const PlanRequest &req, const PlanRanking &ranking,
                         int numLayers, int64_t rank, const PlanFilter &filter,
                         const std::string &explainText, PlanEstimate &chosen, size_t &chosenRank,
                         std::string &err);

/// --cp-rotate, --tp-sp and --loss-parallel (values as a plan spells them:
/// allgather|ring, on|off) into the explained plan; false with `err`.
bool applyPlanSwitches(const std::string &cpRotate, const std::string &tpSp,
                       const std::string &lossParallel, Plan &plan, std::string &err);

} // namespace loom::planner

#endif
