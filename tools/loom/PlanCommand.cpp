//===- PlanCommand.cpp - `loom plan` --------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Ranks every parallelism plan for a model on a cluster. The cost model
// lives in planner/ (docs/planner.md); this file parses flags, builds the
// model's costs from its IR and prints the table, JSON or one plan's
// explanation.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "loom/runtime/AtomicFile.h"
#include "planner/Explain.h"
#include "planner/MeasuredStageCosts.h"
#include "planner/Planner.h"
#include "planner/Report.h"
#include "planner/ir/IrCost.h"
#include "planner/ir/PartitionedReport.h"
#include "loom/io/Json.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <ostream>

namespace loom::tools {

namespace {

/// A whole-string positive integer, or false.
bool positiveInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || v <= 0)
    return false;
  out = v;
  return true;
}

} // namespace

int runPlan(int argc, char **argv) {
  using namespace planner;
  Args args("plan", "MODEL.onnx|MODEL.mlir --gpus N --gpu h100|h200|FILE.json --batch B --seq T "
                    "[options]");
  args.flag("gpus", "GPUs in the cluster (every factorization of it is tried)");
  args.flag("gpus-per-node", "GPUs per node (default: the profile's)");
  args.flag("gpu", "hardware profile: h100, h200 (shipped) or a profile JSON file");
  args.flag("batch", "microbatch: sequences per GPU per forward/backward");
  args.flag("seq", "sequence length");
  args.flag("global-batch", "sequences per optimizer step (default: batch x gpus)");
  args.flag("precision", "bf16 or fp8 to consider only that (default: both)");
  args.flag("activation-bytes", "bytes per saved activation element: 2 (bf16 autocast) or 4 (to "
            "compare with an fp32 run)", false, "2");
  args.flag("top", "plans in the table", false, "10");
  args.flag("rejected", "rejected plans listed with their reasons", false, "8");
  args.flag("explain", "PLAN: a rank from the table or a plan id, whole or in part (tp=2,pp=2)");
  args.flag("json", "print JSON instead of the table", true);
  args.flag("stage-costs", "FILE[,FILE...]: measured stage costs (loom train --stage-costs-out) "
                           "to time the pipeline plans they fit with, instead of the profile");
  args.flag("cost-from", "train-step (default; falls back to forward) or forward (backward = 2x)",
            false, "train-step");
  args.flag("dump-costs", "print what the planner read off the IR (JSON) and stop", true);
  args.flag("rank-buffer-plan",
            "with --explain: memory of a data/tensor-parallel plan from the compiler's per-rank "
            "program (0: the analytical model)",
            false, "1");
  args.flag("cp-rotate", "with --explain: how a cp plan's ranks exchange keys (allgather, ring)",
            false, "allgather");
  args.flag("tp-sp", "with --explain: sequence parallelism of a tp plan (on, off)", false, "on");
  args.flag("loss-parallel", "with --explain: vocabulary-parallel loss of a tp plan (on, off)", false,
            "on");
  args.flag("dump-rank-buffers",
            "with --explain: write the per-rank program's buffers (name, shape, dtype, bytes) to "
            "this JSON file");
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  if (args.positional().size() != 1)
    return fail("plan", "expected one model file (see loom plan --help)");
  const std::string model = args.positional()[0];

  PlanRequest req;
  int64_t v = 0;
  if (!args.has("gpus") || !positiveInt(args.get("gpus"), v))
    return fail("plan", "--gpus needs a positive integer (the cluster's GPU count)");
  req.gpus = int(v);
  if (!args.has("gpu"))
    return fail("plan", "--gpu needs a profile: h100, h200 or a JSON file");
  HardwareProfile hw;
  std::string err;
  if (!loadProfile(args.get("gpu"), hw, err))
    return fail("plan", err);
  req.gpusPerNode = hw.gpusPerNode;
  if (args.has("gpus-per-node")) {
    if (!positiveInt(args.get("gpus-per-node"), v))
      return fail("plan", "--gpus-per-node needs a positive integer");
    req.gpusPerNode = int(v);
  }
  if (req.gpus > req.gpusPerNode && req.gpus % req.gpusPerNode)
    return fail("plan", "--gpus " + std::to_string(req.gpus) + " is not a whole number of " +
                            std::to_string(req.gpusPerNode) + "-GPU nodes");
  if (!args.has("batch") || !positiveInt(args.get("batch"), req.microbatch))
    return fail("plan", "--batch needs a positive integer (the per-GPU microbatch)");
  if (!args.has("seq") || !positiveInt(args.get("seq"), req.seq))
    return fail("plan", "--seq needs a positive integer");
  if (args.has("global-batch")) {
    if (!positiveInt(args.get("global-batch"), req.globalBatch))
      return fail("plan", "--global-batch needs a positive integer");
    if (req.globalBatch % req.microbatch)
      return fail("plan", "--global-batch " + std::to_string(req.globalBatch) +
                              " is not a multiple of --batch " + std::to_string(req.microbatch));
  }
  if (args.has("precision")) {
    std::string p = args.get("precision");
    if (p != "bf16" && p != "fp8")
      return fail("plan", "--precision must be bf16 or fp8, not '" + p + "'");
    req.allowBf16 = p == "bf16";
    req.allowFp8 = p == "fp8";
  }
  if (args.get("activation-bytes") != "2" && args.get("activation-bytes") != "4")
    return fail("plan", "--activation-bytes must be 2 or 4, not '" + args.get("activation-bytes") + "'");
  req.activationBytes = int(args.getInt("activation-bytes"));
  std::vector<rt::StageCostProfile> stageCosts;
  if (args.has("stage-costs") &&
      !loadStageCostProfiles(args.get("stage-costs"), req, stageCosts, err))
    return fail("plan", err);
  ReportOptions opts;
  int64_t top = 0, rejected = 0;
  if (!positiveInt(args.get("top"), top))
    return fail("plan", "--top needs a positive integer");
  if (args.get("rejected") != "0" && !positiveInt(args.get("rejected"), rejected))
    return fail("plan", "--rejected needs a non-negative integer");
  opts.top = size_t(top);
  opts.rejected = size_t(rejected);
  std::string costFrom = args.get("cost-from");
  if (costFrom != "train-step" && costFrom != "forward")
    return fail("plan", "--cost-from must be train-step or forward");
  PlanFilter filter;
  int64_t explainRank = 0;
  bool explain = args.has("explain");
  if (explain && !positiveInt(args.get("explain"), explainRank) &&
      !parsePlanFilter(args.get("explain"), filter, err))
    return fail("plan", err);

  IrCostOptions irOpts;
  irOpts.batch = req.microbatch;
  irOpts.seq = req.seq;
  irOpts.forwardOnly = costFrom == "forward";
  irOpts.fp8Program = req.allowFp8; // fp8 one-GPU plans are priced from their own program
  ModelCost cost;
  if (!buildModelCost(model, irOpts, cost, err))
    return fail("plan", err);
  if (args.get("dump-costs") == "1") {
    std::cout << modelCostJson(cost).dump(2) << "\n";
    return 0;
  }
  CostModel cm(cost, hw, req);
  if (!stageCosts.empty())
    cm.useStageCosts(std::move(stageCosts));
  PlanRanking ranking = rankPlans(cm, req);

  // The plan to explain: a rank, or the best candidate matching the filter.
  PlanEstimate chosen;
  size_t chosenRank = 0;
  if (explain && !choosePlanToExplain(cm, req, ranking, cost.numLayers, explainRank, filter,
                                      args.get("explain"), chosen, chosenRank, err))
    return fail("plan", err);

  // The explained plan's memory from the compiler's own per-rank program
  // where it can build one: what each of its ranks allocates.
  PartitionedCost irCost;
  bool haveIrCost = false;
  if (explain && CostModel::compilesPerRank(chosen.plan) && args.get("rank-buffer-plan") == "1") {
    rt::Program program;
    if (!applyPlanSwitches(args.get("cp-rotate"), args.get("tp-sp"), args.get("loss-parallel"),
                           chosen.plan, err))
      return fail("plan", err);
    haveIrCost = explainWithRankProgram(model, req, hw, cm, chosen, irCost, program, err);
    if (!haveIrCost)
      std::fprintf(stderr, "loom plan: the per-rank buffer plan is not available (%s); memory "
                           "stays %s\n", err.c_str(), chosen.memorySource.c_str());
    else if (args.has("dump-rank-buffers") &&
             !rt::writeAtomically(args.get("dump-rank-buffers"),
                              programBuffersJson(program).dump(1) + "\n", err))
      return fail("plan", err);
  }

  if (args.get("json") == "1") {
    json::Value out = rankingJson(cm, req, ranking, opts);
    if (explain) {
      json::Value e = explainJson(cm, chosen, chosenRank);
      if (haveIrCost)
        e.set("partitioned_ir", partitionedJson(irCost));
      out.set("explain", e);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  printRanking(std::cout, cm, req, ranking, opts);
  if (explain) {
    std::cout << "\n";
    printExplain(std::cout, cm, chosen, chosenRank, ranking.feasible.size());
    if (haveIrCost)
      printPartitioned(std::cout, irCost);
  }
  return 0;
}

} // namespace loom::tools
