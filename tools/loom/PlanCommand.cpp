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
#include "AtomicFile.h"
#include "planner/MeasuredStageCosts.h"
#include "planner/Planner.h"
#include "planner/Report.h"
#include "planner/ir/IrCost.h"
#include "planner/ir/PartitionedCost.h"
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

/// --cp-rotate, --tp-sp and --loss-parallel into the explained plan.
bool applyExplainSwitches(const Args &args, planner::Plan &plan, std::string &err) {
  std::string text = "cp_rotate=" + args.get("cp-rotate") + ",tp_sp=" + args.get("tp-sp") +
                     ",loss_parallel=" + args.get("loss-parallel");
  planner::Plan parsed;
  if (!planner::parseMeshPlan(text, parsed, err))
    return false;
  plan.cpRotate = parsed.cpRotate;
  plan.tpSp = parsed.tpSp;
  plan.lossParallel = parsed.lossParallel;
  return true;
}

/// The rank program's buffers as JSON (what one rank holds), written whole.
bool writeRankBuffers(const std::string &path, const rt::Program &p, std::string &err) {
  json::Value list = json::Value::array();
  for (const rt::BufferDesc &b : p.buffers) {
    json::Value shape = json::Value::array();
    for (int64_t d : b.shape) shape.push(json::Value(double(d)));
    json::Value o = json::Value::object();
    o.set("name", json::Value(b.name));
    o.set("shape", shape);
    o.set("dtype", json::Value(std::string(rt::dtypeName(b.dtype))));
    o.set("bytes", json::Value(double(b.bytes)));
    o.set("kind", json::Value(b.kind == rt::BufferKind::Constant ? "constant"
                              : b.kind == rt::BufferKind::Input ? "input"
                              : b.kind == rt::BufferKind::Output ? "output"
                                                                 : "temp"));
    list.push(o);
  }
  return writeAtomically(path, list.dump(1) + "\n", err);
}

json::Value partitionedJson(const planner::PartitionedCost &c) {
  json::Value o = json::Value::object(), list = json::Value::array();
  for (const planner::IrCollective &k : c.collectives) {
    json::Value v = json::Value::object();
    v.set("op", json::Value(k.op));
    v.set("axes", json::Value(k.axes));
    v.set("ranks", json::Value(k.ranks));
    v.set("link", json::Value(k.link));
    v.set("bytes", json::Value(k.bytes));
    v.set("count", json::Value(k.count));
    v.set("seconds", json::Value(k.seconds));
    list.push(v);
  }
  o.set("collectives", list);
  o.set("comm_seconds", json::Value(c.commSeconds));
  json::Value ranks = json::Value::array();
  for (const planner::CpRankAttention &r : c.cpRanks) {
    json::Value v = json::Value::object();
    v.set("forward", json::Value(r.forward));
    v.set("forward_visible", json::Value(r.forwardVisible));
    v.set("backward", json::Value(r.backward));
    v.set("backward_visible", json::Value(r.backwardVisible));
    ranks.push(v);
  }
  o.set("attention_per_cp_rank", ranks);
  return o;
}

/// The per-rank step's own collectives and, under cp, each cp rank's
/// attention work.
void printPartitioned(std::ostream &os, const planner::PartitionedCost &c) {
  char line[256];
  os << "\ncollectives of one rank's step, read off its partitioned IR (alpha-beta on the plan's "
        "links, none overlapped):\n";
  std::snprintf(line, sizeof line, "  %-20s %-20s %5s %-10s %12s %6s %12s\n", "op", "axes",
                "ranks", "link", "bytes/call", "calls", "ms/step");
  os << line;
  for (const planner::IrCollective &k : c.collectives) {
    std::snprintf(line, sizeof line, "  %-20s %-20s %5d %-10s %12.0f %6d %12.4f\n", k.op.c_str(),
                  k.axes.c_str(), k.ranks, k.link.c_str(), k.bytes, k.count,
                  k.seconds * k.count * 1e3);
    os << line;
  }
  std::snprintf(line, sizeof line, "  total %.4f ms per step\n", c.commSeconds * 1e3);
  os << line;
  if (c.cpRanks.empty())
    return;
  os << "attention work per cp rank (query-key pairs x batch x query heads its attention ops "
        "compute; visible: not masked by causality):\n";
  double lo = 0, hi = 0;
  for (size_t r = 0; r < c.cpRanks.size(); ++r) {
    const planner::CpRankAttention &a = c.cpRanks[r];
    double total = a.forward + a.backward;
    lo = r ? std::min(lo, total) : total;
    hi = r ? std::max(hi, total) : total;
    std::snprintf(line, sizeof line,
                  "  cp rank %zu: forward %.0f (visible %.0f), backward %.0f (visible %.0f)\n", r,
                  a.forward, a.forwardVisible, a.backward, a.backwardVisible);
    os << line;
  }
  std::snprintf(line, sizeof line, "  balance: max / min over cp ranks %.4f\n", lo > 0 ? hi / lo : 0.0);
  os << line;
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
  if (explain) {
    if (explainRank) {
      if (size_t(explainRank) > ranking.feasible.size())
        return fail("plan", "--explain " + std::to_string(explainRank) + ": only " +
                                std::to_string(ranking.feasible.size()) + " feasible plans");
      chosenRank = size_t(explainRank);
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
        for (const Plan &p : enumeratePlans(req, cost.numLayers)) {
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
          return fail("plan", "--explain '" + args.get("explain") + "' matches none of the " +
                                  std::to_string(ranking.candidates) + " candidate plans for " +
                                  std::to_string(req.gpus) +
                                  " GPUs (dpr*dps*cp*tp*pp must equal --gpus)");
      }
    }
  }

  // The explained plan's memory from the compiler's own per-rank program
  // where it can build one: what each of its ranks allocates.
  PartitionedCost irCost;
  bool haveIrCost = false;
  if (explain && CostModel::compilesPerRank(chosen.plan) && args.get("rank-buffer-plan") == "1") {
    MemoryBreakdown rankMem;
    rt::Program program;
    if (!applyExplainSwitches(args, chosen.plan, err))
      return fail("plan", err);
    RankIrCosts irCosts;
    irCosts.partitioned = &irCost;
    irCosts.hw = &hw;
    irCosts.gpusPerNode = req.gpusPerNode;
    if (rankBufferPlan(model, req.microbatch, req.seq, chosen.plan, rankMem, err, &program,
                       irCosts)) {
      haveIrCost = true;
      cm.useRankBufferPlan(chosen, rankMem);
      if (args.has("dump-rank-buffers") &&
          !writeRankBuffers(args.get("dump-rank-buffers"), program, err))
        return fail("plan", err);
    } else
      std::fprintf(stderr, "loom plan: the per-rank buffer plan is not available (%s); memory "
                           "stays %s\n", err.c_str(), chosen.memorySource.c_str());
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
