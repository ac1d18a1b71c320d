//===- Explain.cpp --------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Explain.h"

namespace loom::planner {

bool choosePlanToExplain(const CostModel &cm, const PlanRequest &req, const PlanRanking &ranking,
                         int numLayers, int64_t rank, const PlanFilter &filter,
                         const std::string &explainText, PlanEstimate &chosen, size_t &chosenRank,
                         std::string &err) {
  auto fail = [&](const std::string &msg) {
    err = msg;
    return false;
  };
  chosenRank = 0;
  if (rank) {
    if (size_t(rank) > ranking.feasible.size())
      return fail("--explain " + std::to_string(rank) + ": only " +
                  std::to_string(ranking.feasible.size()) + " feasible plans");
    chosenRank = size_t(rank);
    chosen = cm.evaluate(ranking.feasible[chosenRank - 1].plan, true);
  } else {
    for (size_t i = 0; i < ranking.feasible.size() && !chosenRank; ++i)
      if (planMatches(ranking.feasible[i].plan, filter)) {
        chosenRank = i + 1;
        chosen = cm.evaluate(ranking.feasible[i].plan, true);
      }
    if (!chosenRank) {
      bool found = false;
      double best = -1;
      for (const Plan &p : enumeratePlans(req, numLayers)) {
        if (!planMatches(p, filter))
          continue;
        PlanEstimate e = cm.evaluate(p, true);
        if (!found || e.tokensPerSecond > best) {
          chosen = e;
          best = e.tokensPerSecond;
          found = true;
        }
      }
      if (!found)
        return fail("--explain '" + explainText + "' matches none of the " +
                    std::to_string(ranking.candidates) + " candidate plans for " +
                    std::to_string(req.gpus) + " GPUs (dpr*dps*cp*tp*pp must equal --gpus)");
    }
  }
  return true;
}

bool applyPlanSwitches(const std::string &cpRotate, const std::string &tpSp,
                       const std::string &lossParallel, Plan &plan, std::string &err) {
  Plan parsed;
  if (!parseMeshPlan("cp_rotate=" + cpRotate + ",tp_sp=" + tpSp + ",loss_parallel=" + lossParallel,
                     parsed, err))
    return false;
  plan.cpRotate = parsed.cpRotate;
  plan.tpSp = parsed.tpSp;
  plan.lossParallel = parsed.lossParallel;
  return true;
}

} // namespace loom::planner
