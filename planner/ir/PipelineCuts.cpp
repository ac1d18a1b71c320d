//===- PipelineCuts.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/ir/PipelineCuts.h"
#include "compiler/PipelinePlan.h"
#include "planner/CostModel.h"
#include "planner/HardwareProfile.h"
#include "planner/StageBalance.h"
#include "planner/ir/IrCost.h"

namespace loom::planner {

bool resolvePipelineSplit(const std::string &model, int64_t batch, int64_t seq,
                          compiler::TrainOptions &o, std::string &note, std::string &err) {
  note.clear();
  const Plan &plan = o.pipeline;
  if (plan.pp <= 1)
    return true;
  if (o.ppSplit == "even") {
    o.ppSplit.clear();
    note = "pipeline stages: the layers split evenly (--pp-split even)";
    return true;
  }
  const std::string kBalanced = "balanced";
  std::string profile = "h100";
  if (o.ppSplit.compare(0, kBalanced.size() + 1, kBalanced + ":") == 0)
    profile = o.ppSplit.substr(kBalanced.size() + 1);
  else if (!o.ppSplit.empty() && o.ppSplit != kBalanced)
    return true; // the user's cuts; planPipelineLayout checks them
  int64_t dp = int64_t(o.dpReplicate) * o.dpShard, rows = batch / std::max<int64_t>(1, dp);
  rows /= std::max(1, plan.microbatches);
  if (rows < 1) // planPipelineLayout refuses the batch with its own message
    return o.ppSplit.clear(), true;
  HardwareProfile hw;
  if (!loadProfile(profile, hw, err)) {
    err = "--pp-split " + o.ppSplit + ": " + err;
    return false;
  }
  IrCostOptions irOpts;
  irOpts.batch = rows;
  irOpts.seq = seq;
  irOpts.bufferPlan = false;
  ModelCost cost;
  if (!buildModelCost(model, irOpts, cost, err)) {
    err = "--pp-split balanced: " + err;
    return false;
  }
  PlanRequest req;
  req.gpus = plan.gpus();
  req.gpusPerNode = hw.gpusPerNode;
  req.microbatch = rows;
  req.seq = seq;
  CostModel cm(cost, hw, req);
  // The stages are the schedule's (a custom CSV schedule's count is its
  // own: `loom schedule --serial` of an interleaved plan has pp x v).
  rt::PipelineSchedule schedule;
  if (!compiler::planSchedule(plan, schedule, err))
    return false;
  Plan costed = plan;
  costed.virtualStages = std::max(1, schedule.stages / plan.pp);
  costed.dpReplicate = o.dpReplicate;
  costed.dpShard = o.dpShard;
  costed.tp = o.tp;
  const std::vector<int64_t> &cuts = cm.stageCuts(costed);
  if (cuts.empty()) { // more stages than layers: the pass splits inside layers
    o.ppSplit.clear();
    return true;
  }
  o.ppSplit = ppSplitSpelling(cuts);
  bool even = cuts == evenStageCuts(cost.numLayers, int(cuts.size()) + 1);
  note = "pipeline stages: layers " + describeStageCuts(cuts, cost.numLayers) + " (" +
         (even ? "even: as balanced as" : "balanced by") + " loom plan's " + hw.name +
         " cost model; --pp-split " + o.ppSplit + ")";
  return true;
}

bool compileTrainStepWithCuts(const std::string &model, int64_t batch, int64_t seq,
                              compiler::TrainOptions &o, compiler::TrainProgram &out,
                              std::string &err) {
  std::string note;
  if (!resolvePipelineSplit(model, batch, seq, o, note, err) ||
      !compiler::compileTrainStep(model, batch, seq, o, out, err))
    return false;
  if (!note.empty())
    out.notes.push_back(note);
  return true;
}

} // namespace loom::planner
