//===- Planner.h - Rank every plan for a model and a cluster ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_PLANNER_H
#define LOOM_PLANNER_PLANNER_H

#include "planner/CostModel.h"

#include <vector>

namespace loom::planner {

struct PlanRanking {
  size_t candidates = 0;
  std::vector<PlanEstimate> feasible; // fastest first
  /// Rejected plans, best estimated throughput first; of plans rejected for
  /// the same reasons only the fastest is kept (for memory: per layout).
  std::vector<PlanEstimate> rejected;
};

/// Enumerates, evaluates, filters and sorts every plan.
PlanRanking rankPlans(const CostModel &model, const PlanRequest &req);

} // namespace loom::planner

#endif
