//===- Planner.cpp --------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Planner.h"

#include <algorithm>
#include <map>

namespace loom::planner {

namespace {

bool faster(const PlanEstimate &a, const PlanEstimate &b) {
  if (a.tokensPerSecond != b.tokensPerSecond)
    return a.tokensPerSecond > b.tokensPerSecond;
  if (a.memory.total() != b.memory.total())
    return a.memory.total() < b.memory.total();
  return a.plan.id() < b.plan.id();
}

/// Plans rejected for the same reasons are shown once (the fastest); a
/// memory rejection is the same reason only for the same layout.
std::string reasonKey(const PlanEstimate &e) {
  const Plan &p = e.plan;
  std::string key;
  for (const std::string &r : e.rejections) {
    if (r.rfind("memory ", 0) == 0)
      key += "|memory:" + std::to_string(p.dpReplicate) + "," + std::to_string(p.dpShard) + "," +
             std::to_string(p.cp) + "," + std::to_string(p.tp) + "," + std::to_string(p.pp);
    else
      key += "|" + r;
  }
  return key;
}

} // namespace

PlanRanking rankPlans(const CostModel &cm, const PlanRequest &req) {
  PlanRanking out;
  std::vector<Plan> plans = enumeratePlans(req, cm.model().numLayers);
  out.candidates = plans.size();
  std::map<std::string, PlanEstimate> bestRejected;
  for (const Plan &p : plans) {
    PlanEstimate e = cm.evaluate(p);
    if (e.feasible()) {
      out.feasible.push_back(std::move(e));
      continue;
    }
    std::string key = reasonKey(e);
    auto it = bestRejected.find(key);
    if (it == bestRejected.end() || faster(e, it->second))
      bestRejected[key] = std::move(e);
  }
  std::sort(out.feasible.begin(), out.feasible.end(), faster);
  for (auto &kv : bestRejected)
    out.rejected.push_back(std::move(kv.second));
  std::sort(out.rejected.begin(), out.rejected.end(), faster);
  return out;
}

} // namespace loom::planner
