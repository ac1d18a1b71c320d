//===- VerifyCommand.cpp - `loom verify`: every plan equals one device ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Trains the same model from the same initial weights on the same batches
// under each plan, then compares every plan with the first: per-step loss
// (max, mean and final |delta|, and the largest relative difference) and
// the step-0 gradients gathered to full tensors (relative L2 error per
// parameter; the per-parameter gradient norms are printed side by side).
// Writes a JSON report and an SVG loss-curve plot, each through a temp file
// and a rename so a reader never sees half a file. With --max-loss-rel /
// --max-grad-rel it is a check: exit 1 when a plan is outside the bounds.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "AtomicFile.h"
#include "GradientError.h"
#include "SequencePlan.h"
#include "SpmdPlan.h"
#include "StepRunner.h"
#include "TokenData.h"
#include "TrainProgram.h"
#include "WeightFiles.h"
#include "planner/BufferPlanMemory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace loom::tools {
namespace {

struct PlanRun {
  std::string name;
  planner::Plan plan;
  std::vector<double> loss, gradNorm;
  std::vector<std::vector<float>> grads0; // full step-0 gradients
  std::vector<double> activationNorms0;   // residual stream entering each norm
  std::vector<std::string> paramNames;
  RankMemory perRank;
  std::vector<RankDeviceMemory> device; // per rank, on a GPU
  planner::MemoryBreakdown bufferPlan;  // one rank's program, at its peak
  // Against the first plan.
  double maxAbs = 0, meanAbs = 0, finalAbs = 0, maxRel = 0, worstGradRel = 0;
  std::vector<double> gradRel;
};

double l2(const std::vector<float> &v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

std::string jsonString(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string num(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string jsonReport(const std::string &model, int64_t steps, const std::vector<PlanRun> &runs) {
  std::ostringstream j;
  j << "{\n  \"model\": " << jsonString(model) << ",\n  \"steps\": " << steps
    << ",\n  \"reference_plan\": " << jsonString(runs[0].name) << ",\n  \"plans\": [\n";
  for (size_t k = 0; k < runs.size(); ++k) {
    const PlanRun &r = runs[k];
    auto list = [&](const std::vector<double> &v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
      return s + "]";
    };
    double mn = *std::min_element(r.loss.begin(), r.loss.end()), mean = 0;
    for (double v : r.loss) mean += v / double(r.loss.size());
    j << "    {\"plan\": " << jsonString(r.name) << ", \"ranks\": " << r.plan.gpus()
      << ",\n     \"initial_loss\": " << num(r.loss.front()) << ", \"final_loss\": "
      << num(r.loss.back()) << ", \"min_loss\": " << num(mn) << ", \"mean_loss\": " << num(mean)
      << ",\n     \"loss\": " << list(r.loss) << ",\n     \"grad_norm\": " << list(r.gradNorm)
      << ",\n     \"max_abs_loss_diff\": " << num(r.maxAbs)
      << ", \"mean_abs_loss_diff\": " << num(r.meanAbs)
      << ", \"final_abs_loss_diff\": " << num(r.finalAbs)
      << ", \"max_rel_loss_diff\": " << num(r.maxRel)
      << ", \"worst_grad_rel_l2\": " << num(r.worstGradRel)
      << ",\n     \"bytes_per_rank\": {\"parameters\": " << r.perRank.params
      << ", \"gradients\": " << r.perRank.grads << ", \"optimizer\": " << r.perRank.optimizer
      << "},\n     \"device_memory_per_rank\": [";
    for (size_t k = 0; k < r.device.size(); ++k) {
      const RankDeviceMemory &d = r.device[k];
      const planner::MemoryBreakdown &b = r.bufferPlan;
      j << (k ? ", " : "") << "{\"parameters\": " << num(b.params) << ", \"gradients\": "
        << num(b.grads) << ", \"optimizer\": " << num(b.optimizer) << ", \"activations\": "
        << num(b.activations) << ", \"communication\": "
        << num(b.comm + double(d.allocated.communication)) << ", \"workspace\": "
        << num(b.workspace + double(d.allocated.workspace)) << ", \"allocated\": "
        << d.allocated.total() << ", \"measured\": " << d.measured << "}";
    }
    j << "],\n     \"step0_grad_norms\": {";
    for (size_t i = 0; i < r.grads0.size(); ++i)
      j << (i ? ", " : "") << jsonString(r.paramNames[i]) << ": " << num(l2(r.grads0[i]));
    j << "},\n     \"step0_activation_norms\": [";
    for (size_t k = 0; k < r.activationNorms0.size(); ++k)
      j << (k ? ", " : "") << num(r.activationNorms0[k]);
    j << "],\n     \"step0_grad_rel_l2\": {";
    for (size_t i = 0; i < r.gradRel.size(); ++i)
      j << (i ? ", " : "") << jsonString(r.paramNames[i]) << ": " << num(r.gradRel[i]);
    j << "}}" << (k + 1 < runs.size() ? "," : "") << "\n";
  }
  j << "  ]\n}\n";
  return j.str();
}

std::string xmlText(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else o += c;
  }
  return o;
}

/// Loss curves, one polyline per plan; later plans dashed so that curves
/// lying on top of each other (the expected outcome) stay visible. Below
/// them a panel of |loss - reference loss| per step for every other plan,
/// on a log scale (fp32 plans differ by rounding, bf16 ones by far more).
std::string svgPlot(const std::string &model, const std::vector<PlanRun> &runs) {
  const double W = 720, H = 420, left = 70, right = 200, top = 40, bottom = 50;
  const double panelTop = H + 10, panelH = 200; // the |delta| panel, below
  double lo = INFINITY, hi = -INFINITY;
  size_t steps = 0;
  for (const PlanRun &r : runs) {
    steps = std::max(steps, r.loss.size());
    for (double v : r.loss)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(hi > lo)) hi = lo + 1;
  double pad = 0.05 * (hi - lo);
  lo -= pad, hi += pad;
  auto x = [&](size_t s) {
    return left + (steps > 1 ? double(s) / double(steps - 1) : 0.5) * (W - left - right);
  };
  auto y = [&](double v) { return top + (hi - v) / (hi - lo) * (H - top - bottom); };
  static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\""
    << panelTop + panelH + 40 << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << left << "\" y=\"22\" font-size=\"14\">loom verify: " << xmlText(model)
    << " loss per step</text>\n"
    << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\""
    << H - bottom << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom
    << "\" stroke=\"black\"/>\n";
  for (int t = 0; t <= 4; ++t) {
    double v = lo + (hi - lo) * t / 4;
    s << "<text x=\"" << left - 6 << "\" y=\"" << y(v) + 4 << "\" text-anchor=\"end\">" << num(v).substr(0, 6)
      << "</text>\n";
  }
  for (size_t t = 0; t < steps; t += std::max<size_t>(1, steps / 5))
    s << "<text x=\"" << x(t) << "\" y=\"" << H - bottom + 16 << "\" text-anchor=\"middle\">" << t
      << "</text>\n";
  s << "<text x=\"" << (left + W - right) / 2 << "\" y=\"" << H - 10
    << "\" text-anchor=\"middle\">step</text>\n";
  for (size_t k = 0; k < runs.size(); ++k) {
    const char *c = colors[k % 6];
    s << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"" << (k ? 1.5 : 3)
      << "\"" << (k ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t t = 0; t < runs[k].loss.size(); ++t)
      if (std::isfinite(runs[k].loss[t]))
        s << x(t) << "," << y(runs[k].loss[t]) << " ";
    s << "\"/>\n<text x=\"" << W - right + 10 << "\" y=\"" << top + 18 * k + 10 << "\" fill=\"" << c
      << "\">" << xmlText(runs[k].name) << "</text>\n";
  }
  // |delta loss| against the first plan, log10 from 1e-9 up to the largest.
  double dmax = 1e-9;
  for (size_t k = 1; k < runs.size(); ++k)
    for (size_t t = 0; t < runs[k].loss.size() && t < runs[0].loss.size(); ++t)
      dmax = std::max(dmax, std::fabs(runs[k].loss[t] - runs[0].loss[t]));
  double lhi = std::ceil(std::log10(dmax)), llo = std::min(lhi - 1, -9.0);
  auto yd = [&](double d) {
    double l = std::log10(std::max(d, 1e-9));
    return panelTop + (lhi - l) / (lhi - llo) * panelH;
  };
  s << "<text x=\"" << left << "\" y=\"" << panelTop - 4 << "\">|loss - loss(" << xmlText(runs[0].name)
    << ")| per step, log scale</text>\n"
    << "<line x1=\"" << left << "\" y1=\"" << panelTop + panelH << "\" x2=\"" << W - right << "\" y2=\""
    << panelTop + panelH << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << panelTop
    << "\" x2=\"" << left << "\" y2=\"" << panelTop + panelH << "\" stroke=\"black\"/>\n";
  for (double l = llo; l <= lhi; l += std::max(1.0, std::floor((lhi - llo) / 4)))
    s << "<text x=\"" << left - 6 << "\" y=\"" << yd(std::pow(10.0, l)) + 4
      << "\" text-anchor=\"end\">1e" << int(l) << "</text>\n";
  for (size_t k = 1; k < runs.size(); ++k) {
    s << "<polyline fill=\"none\" stroke=\"" << colors[k % 6] << "\" stroke-width=\"1.5\" points=\"";
    for (size_t t = 0; t < runs[k].loss.size() && t < runs[0].loss.size(); ++t)
      if (std::isfinite(runs[k].loss[t]))
        s << x(t) << "," << yd(std::fabs(runs[k].loss[t] - runs[0].loss[t])) << " ";
    s << "\"/>\n";
  }
  s << "</svg>\n";
  return s.str();
}

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
  for (const std::string &text : planTexts) {
    PlanRun r;
    if (!parseSpmdPlan(text, 0, r.plan, err))
      return fail("verify", err);
    r.name = planner::meshPlanName(r.plan);
    runs.push_back(std::move(r));
  }

  for (PlanRun &r : runs) {
    TrainOptions opts;
    opts.lr = args.getDouble("lr");
    opts.warmup = args.getInt("warmup");
    opts.totalSteps = steps;
    opts.weightDecay = args.getDouble("weight-decay");
    opts.maxGradNorm = args.getDouble("max-grad-norm");
    opts.bf16 = precision == "bf16";
    opts.returnGradients = true;
    opts.returnActivationSums = true;
    opts.dpReplicate = r.plan.dpReplicate;
    opts.dpShard = r.plan.dpShard;
    opts.tp = r.plan.tp;
    applySequencePlan(r.plan, opts);
    opts.pipeline = r.plan;
    opts.ddpBucketBytes = int64_t(args.getDouble("ddp-bucket-mib") * (1 << 20));
    opts.fsdpPrefetch = args.getInt("fsdp-prefetch");
    opts.fsdpReshardAfterForward = !args.has("fsdp-keep-gathered");
    TrainProgram tp;
    if (!compileTrainStep(model, B, T, opts, tp, err))
      return fail("verify", "plan " + r.name + ": " + err);
    std::vector<std::string> hfNames;
    std::map<std::string, std::string> aliases;
    if (args.has("init-weights") &&
        !loadInitWeights(args.get("init-weights"), tp.params, hfNames, aliases, err))
      return fail("verify", err);
    auto runner = StepRunner::create(tp, int(args.getInt("threads")), err, args.get("backend"));
    if (!runner)
      return fail("verify", "plan " + r.name + ": " + err);
    r.perRank = runner->perRank();
    r.device = runner->deviceMemoryPerRank();
    if (!r.device.empty() && !planner::bufferPlanMemory(*tp.program, r.bufferPlan, err))
      return fail("verify", "plan " + r.name + ": " + err);
    TrainState st;
    st.params = tp.params;
    for (const ParamSlot &p : st.params) {
      st.expAvg.emplace_back(p.value.size(), 0.0f);
      st.expAvgSq.emplace_back(p.value.size(), 0.0f);
      r.paramNames.push_back(p.name);
    }
    for (int64_t s = 0; s < steps; ++s) {
      Batch batch;
      if (!makeBatch(data, s, B, T, batch, err, rule))
        return fail("verify", err);
      StepResult out;
      if (!runner->step(st, s, batch, s == 0, out, err))
        return fail("verify", "plan " + r.name + ", step " + std::to_string(s) + ": " + err);
      r.loss.push_back(out.loss);
      r.gradNorm.push_back(out.gradNorm);
      if (s == 0) {
        r.grads0 = std::move(out.grads);
        r.activationNorms0 = std::move(out.activationNorms);
      }
    }
  }

  // Against the first plan.
  const PlanRun &ref = runs[0];
  for (PlanRun &r : runs) {
    double sum = 0;
    for (int64_t s = 0; s < steps; ++s) {
      double d = std::fabs(r.loss[s] - ref.loss[s]);
      r.maxAbs = std::max(r.maxAbs, d);
      r.maxRel = std::max(r.maxRel, d / std::max(1e-30, std::fabs(ref.loss[s])));
      sum += d;
    }
    r.meanAbs = sum / double(steps);
    r.finalAbs = std::fabs(r.loss.back() - ref.loss.back());
    double largest = 0; // for the floor of gradients that are zero (GradientError.h)
    for (const std::vector<float> &g : ref.grads0) {
      double r2 = 0;
      for (float x : g) r2 += double(x) * x;
      largest = std::max(largest, std::sqrt(r2));
    }
    for (size_t i = 0; i < r.grads0.size(); ++i) {
      double d2 = 0, r2 = 0;
      for (size_t k = 0; k < r.grads0[i].size(); ++k) {
        double d = double(r.grads0[i][k]) - ref.grads0[i][k];
        d2 += d * d;
        r2 += double(ref.grads0[i][k]) * ref.grads0[i][k];
      }
      bool floored;
      double rel = relativeGradientError(d2, r2, gradientErrorFloor(largest), floored);
      r.gradRel.push_back(rel);
      r.worstGradRel = std::max(r.worstGradRel, rel);
    }
  }

  std::printf("loom verify: %s, batch %lld x seq %lld, %s, %lld steps, %s backend, reference "
              "plan %s\n",
              model.c_str(), (long long)B, (long long)T, precision.c_str(), (long long)steps,
              args.get("backend").c_str(), ref.name.c_str());
  std::printf("%-28s %5s %11s %11s %11s %11s %10s %10s %10s %10s %10s\n", "plan", "ranks",
              "loss0", "final", "min", "mean", "max|d|", "mean|d|", "final|d|", "max rel",
              "grad rel");
  for (const PlanRun &r : runs) {
    double mn = *std::min_element(r.loss.begin(), r.loss.end()), mean = 0;
    for (double v : r.loss) mean += v / double(steps);
    std::printf("%-28s %5d %11.7f %11.7f %11.7f %11.7f %10.3e %10.3e %10.3e %10.3e %10.3e\n",
                r.name.c_str(), r.plan.gpus(), r.loss[0], r.loss.back(), mn, mean, r.maxAbs,
                r.meanAbs, r.finalAbs, r.maxRel, r.worstGradRel);
  }
  std::printf("step-0 gradient norms per parameter:\n%-48s", "parameter");
  for (const PlanRun &r : runs) std::printf(" %16s", r.name.substr(0, 16).c_str());
  std::printf("\n");
  for (size_t i = 0; i < ref.paramNames.size(); ++i) {
    std::printf("%-48s", ref.paramNames[i].substr(0, 48).c_str());
    for (const PlanRun &r : runs) std::printf(" %16.9g", l2(r.grads0[i]));
    std::printf("\n");
  }
  std::printf("step-0 activation norms (residual stream entering each norm, global batch):\n"
              "%-48s", "activation");
  for (const PlanRun &r : runs) std::printf(" %16s", r.name.substr(0, 16).c_str());
  std::printf("\n");
  for (size_t k = 0; k < ref.activationNorms0.size(); ++k) {
    std::printf("%-48s", ("norm input " + std::to_string(k)).c_str());
    for (const PlanRun &r : runs)
      std::printf(" %16.9g", k < r.activationNorms0.size() ? r.activationNorms0[k] : NAN);
    std::printf("\n");
  }
  for (const PlanRun &r : runs)
    for (size_t k = 0; k < r.device.size(); ++k) {
      const RankDeviceMemory &d = r.device[k];
      auto gib = [](double b) { return b / double(1ull << 30); };
      if (k == 0)
        std::printf("device memory per rank, GiB (parameters gradients optimizer activations "
                    "communication workspace | allocated measured): %s\n", r.name.c_str());
      std::printf("  rank %zu: %.4f %.4f %.4f %.4f %.4f %.4f | %.4f %.4f\n", k, gib(r.bufferPlan.params),
                  gib(r.bufferPlan.grads), gib(r.bufferPlan.optimizer), gib(r.bufferPlan.activations),
                  gib(r.bufferPlan.comm + double(d.allocated.communication)),
                  gib(r.bufferPlan.workspace + double(d.allocated.workspace)),
                  gib(double(d.allocated.total())), gib(double(d.measured)));
    }
  std::printf("per-rank bytes (parameters / gradients / optimizer state):\n");
  for (const PlanRun &r : runs)
    std::printf("  %-28s %llu / %llu / %llu\n", r.name.c_str(), (unsigned long long)r.perRank.params,
                (unsigned long long)r.perRank.grads, (unsigned long long)r.perRank.optimizer);

  if (args.has("json")) {
    if (!writeAtomically(args.get("json"), jsonReport(model, steps, runs), err))
      return fail("verify", err);
    std::printf("wrote %s\n", args.get("json").c_str());
  }
  if (args.has("svg")) {
    if (!writeAtomically(args.get("svg"), svgPlot(model, runs), err))
      return fail("verify", err);
    std::printf("wrote %s\n", args.get("svg").c_str());
  }
  bool pass = true;
  if (args.has("max-loss-rel") || args.has("max-grad-rel") || args.has("max-abs-loss") ||
      args.has("max-mean-abs-loss")) {
    auto bound = [&](const char *flag) { return args.has(flag) ? args.getDouble(flag) : INFINITY; };
    double lossTol = bound("max-loss-rel"), gradTol = bound("max-grad-rel");
    double absTol = bound("max-abs-loss"), meanTol = bound("max-mean-abs-loss");
    for (const PlanRun &r : runs) {
      bool ok = r.maxRel <= lossTol && r.worstGradRel <= gradTol && r.maxAbs <= absTol &&
                r.meanAbs <= meanTol;
      std::printf("%s: %s: max relative loss difference %.3e over %lld steps, worst step-0 "
                  "gradient relative L2 %.3e, |loss diff| max %.3e mean %.3e\n",
                  ok ? "PASS" : "FAIL", r.name.c_str(), r.maxRel, (long long)steps,
                  r.worstGradRel, r.maxAbs, r.meanAbs);
      pass &= ok;
    }
  }
  return pass ? 0 : 1;
}

} // namespace loom::tools
