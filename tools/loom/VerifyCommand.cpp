//===- VerifyCommand.cpp - `loom verify`: every plan equals one device ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Compiles the model under each plan (compiler/CompileTrainStep.h) and
// hands the programs to the training runtime's comparison
// (loom/train/PlanComparison.h), which trains each from the same weights
// on the same batches and compares it with the first. Writes the JSON
// report and SVG plot through a temp file and a rename so a reader never
// sees half a file. With --max-loss-rel / --max-grad-rel it is a check:
// exit 1 when a plan is outside the bounds.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "compiler/CompileTrainStep.h"
#include "compiler/SpmdPlan.h"
#include "loom/runtime/AtomicFile.h"
#include "loom/train/PlanComparison.h"
#include "planner/BufferPlanMemory.h"
#include "planner/ir/PipelineCuts.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace loom::tools {
using namespace compiler;
using namespace train;
namespace {

/// `--plans A B C` (or `--plans=A B C`): the values up to the next option,
/// taken out of argv. The model path therefore goes before --plans.
std::vector<std::string> takePlans(int &argc, char **argv) {
  std::vector<std::string> plans;
  int w = 0;
  for (int k = 0; k < argc; ++k) {
    bool inlineFirst = !std::strncmp(argv[k], "--plans=", 8);
    if (inlineFirst || !std::strcmp(argv[k], "--plans")) {
      if (inlineFirst)
        plans.push_back(argv[k] + 8);
      while (k + 1 < argc && std::strncmp(argv[k + 1], "--", 2) != 0) plans.push_back(argv[++k]);
      continue;
    }
    argv[w++] = argv[k];
  }
  argc = w;
  return plans;
}

} // namespace

int runVerify(int argc, char **argv) {
  std::vector<std::string> planTexts = takePlans(argc, argv);
  Args args("verify", "MODEL.onnx --plans P1 P2 ... --data TOKENS.bin --batch B --seq T "
                      "--steps N --init-weights W [options]");
  args.flag("plans", "plans to compare, the first is the reference (e.g. 1 dp_shard=2)");
  args.flag("data", "token file (uint16, uint32 if named *.u32.bin, or a 1-D .npy of integer ids)");
  args.flag("batch", "global sequences per step (the same for every plan)");
  args.flag("seq", "tokens per sequence");
  args.flag("steps", "steps per plan", false, "20");
  args.flag("batching", "sequential or fixture", false, "sequential");
  args.flag("init-weights", "HF-named .safetensors with the initial weights");
  args.flag("lr", "peak learning rate", false, "1e-3");
  args.flag("warmup", "linear warmup steps", false, "0");
  args.flag("weight-decay", "AdamW decoupled weight decay", false, "0.1");
  args.flag("max-grad-norm", "clip the global gradient norm (0: off)", false, "1.0");
  args.flag("precision", "fp32 or bf16", false, "fp32");
  args.flag("threads", "CPU threads (0: all)", false, "0");
  args.flag("backend", "cpu, or cuda: every plan's ranks on this machine's one GPU", false, "cpu");
  args.flag("pp-split", "pipeline cuts: balanced[:PROFILE], even or layers (2,4,6)", false, "balanced");
  args.flag("ddp-bucket-mib", "gradient MiB per dp_replicate all-reduce (0: one per gradient)",
            false, "25");
  args.flag("fsdp-prefetch", "issue each FSDP all-gather this many parameters early", false, "1");
  args.flag("fsdp-keep-gathered", "keep forward's gathered parameters for backward (no reshard)",
            true);
  args.flag("json", "write the report to this .json file");
  args.flag("svg", "write the loss curves to this .svg file");
  args.flag("max-loss-rel", "fail when a plan's loss differs from the first by more (relative)");
  args.flag("max-grad-rel", "fail when a step-0 gradient differs by more (relative L2)");
  args.flag("max-abs-loss", "fail when a plan's |loss - reference loss| exceeds this at any step");
  args.flag("max-mean-abs-loss", "fail when a plan's mean |loss - reference loss| exceeds this");
  if (!planTexts.empty()) {
    std::string joined;
    for (const std::string &p : planTexts) joined += (joined.empty() ? "" : "\n") + p;
    args.fromCommandLine("plans", joined);
  }
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  if (planTexts.empty() && args.has("plans")) // from --config: one plan per line
    for (size_t from = 0; from <= args.get("plans").size();) {
      size_t nl = args.get("plans").find('\n', from);
      planTexts.push_back(args.get("plans").substr(from, nl == std::string::npos ? nl : nl - from));
      from = nl == std::string::npos ? std::string::npos : nl + 1;
    }
  if (args.positional().size() != 1)
    return fail("verify", "expected one MODEL.onnx (see loom verify --help)");
  if (planTexts.empty())
    return fail("verify", "--plans needs at least one plan (e.g. --plans 1 dp_shard=2)");
  for (const char *need : {"data", "batch", "seq"})
    if (!args.has(need))
      return fail("verify", std::string("--") + need + " is required");
  int64_t B = args.getInt("batch"), T = args.getInt("seq"), steps = args.getInt("steps");
  if (B <= 0 || T <= 0 || steps <= 0)
    return fail("verify", "--batch, --seq and --steps must be positive");
  std::string batching = args.get("batching"), precision = args.get("precision");
  if (batching != "sequential" && batching != "fixture")
    return fail("verify", "--batching must be sequential or fixture, not '" + batching + "'");
  if (precision != "fp32" && precision != "bf16")
    return fail("verify", "--precision must be fp32 or bf16, not '" + precision + "'");
  if (args.getDouble("ddp-bucket-mib") < 0)
    return fail("verify", "--ddp-bucket-mib must not be negative");
  if (args.getInt("fsdp-prefetch") < 0)
    return fail("verify", "--fsdp-prefetch must not be negative");
  BatchRule rule = batching == "fixture" ? BatchRule::Fixture : BatchRule::Sequential;
  const std::string model = args.positional()[0];

  std::string err;
  TokenFile data;
  if (!data.load(args.get("data"), err))
    return fail("verify", err);
  // Parse every plan before running any, so a typo fails fast.
  std::vector<PlanRun> runs;
  std::vector<planner::Plan> plans;
  for (const std::string &text : planTexts) {
    PlanRun r;
    planner::Plan plan;
    if (!parseSpmdPlan(text, 0, plan, err))
      return fail("verify", err);
    r.name = planner::meshPlanName(plan);
    r.ranks = plan.gpus();
    runs.push_back(std::move(r));
    plans.push_back(plan);
  }

  for (size_t k = 0; k < runs.size(); ++k) {
    PlanRun &r = runs[k];
    const planner::Plan &plan = plans[k];
    TrainOptions opts;
    opts.lr = args.getDouble("lr");
    opts.warmup = args.getInt("warmup");
    opts.totalSteps = steps;
    opts.weightDecay = args.getDouble("weight-decay");
    opts.maxGradNorm = args.getDouble("max-grad-norm");
    opts.bf16 = precision == "bf16";
    opts.returnGradients = true;
    opts.returnActivationSums = true;
    applyPlan(plan, opts);
    opts.ddpBucketBytes = int64_t(args.getDouble("ddp-bucket-mib") * (1 << 20));
    opts.fsdpPrefetch = args.getInt("fsdp-prefetch");
    opts.fsdpReshardAfterForward = !args.has("fsdp-keep-gathered");
    TrainProgram tp;
    opts.ppSplit = args.get("pp-split");
    if (!planner::compileTrainStepWithCuts(model, B, T, opts, tp, err))
      return fail("verify", "plan " + r.name + ": " + err);
    if (!runPlan(tp, args.get("init-weights"), int(args.getInt("threads")), args.get("backend"),
                 data, B, T, steps, rule, r, err))
      return fail("verify", err);
    planner::MemoryBreakdown peak;
    if (!r.device.empty() && !planner::bufferPlanMemory(*tp.program, peak, err))
      return fail("verify", "plan " + r.name + ": " + err);
    r.bufferPlan = {peak.params, peak.grads, peak.optimizer, peak.activations, peak.comm,
                    peak.workspace};
  }

  compareWithFirst(runs, steps);
  printComparison(model, B, T, precision, steps, args.get("backend"), runs);
  if (args.has("json")) {
    if (!rt::writeAtomically(args.get("json"), comparisonJson(model, steps, runs), err))
      return fail("verify", err);
    std::printf("wrote %s\n", args.get("json").c_str());
  }
  if (args.has("svg")) {
    if (!rt::writeAtomically(args.get("svg"), comparisonSvg(model, runs), err))
      return fail("verify", err);
    std::printf("wrote %s\n", args.get("svg").c_str());
  }
  bool pass = true;
  if (args.has("max-loss-rel") || args.has("max-grad-rel") || args.has("max-abs-loss") ||
      args.has("max-mean-abs-loss")) {
    auto bound = [&](const char *flag) { return args.has(flag) ? args.getDouble(flag) : INFINITY; };
    double lossTol = bound("max-loss-rel"), gradTol = bound("max-grad-rel");
    double absTol = bound("max-abs-loss"), meanTol = bound("max-mean-abs-loss");
    pass = checkComparisonBounds(runs, steps, lossTol, gradTol, absTol, meanTol);
  }
  return pass ? 0 : 1;
}

} // namespace loom::tools
