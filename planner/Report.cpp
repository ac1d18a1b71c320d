//===- Report.cpp ---------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Report.h"
#include "planner/StageBalance.h"
#include "planner/Collectives.h"
#include "loom/runtime/PipelineProfile.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>

namespace loom::planner {

namespace {

std::string fmt(const char *f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;

std::string tokens(double t) {
  if (t >= 1e9) return fmt("%.2fG", t / 1e9);
  if (t >= 1e6) return fmt("%.2fM", t / 1e6);
  if (t >= 1e3) return fmt("%.1fk", t / 1e3);
  return fmt("%.0f", t);
}

std::string groupName(int layer, int numLayers) {
  if (layer <= kEmbedLayer) return "embed";
  if (layer == numLayers) return "head";
  if (layer > numLayers) return "step";
  return "layer " + std::to_string(layer);
}

std::string scheduleLabel(const Plan &p) {
  if (p.schedule == Schedule::Interleaved)
    return "interl-v" + std::to_string(p.virtualStages);
  if (p.schedule == Schedule::ZeroBubble && p.virtualStages == 2)
    return "zbv";
  return p.schedule == Schedule::None ? "-" : scheduleName(p.schedule);
}

/// The parameter name with its layer index replaced, to spot identical layers.
std::string layerPattern(const ParamInfo &p) {
  std::string s = p.name, idx = std::to_string(p.layer);
  std::string needle = "." + idx + ".";
  auto at = s.find(needle);
  if (at != std::string::npos)
    s.replace(at, needle.size(), ".#.");
  std::string shape;
  for (int64_t d : p.shape) shape += std::to_string(d) + "x";
  return s + "|" + shape + "|" + tpRuleName(p.rule);
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "scalar" : s;
}

std::vector<int64_t> tpLocalShape(const ParamInfo &p, int tp) {
  std::vector<int64_t> s = p.shape;
  if (p.rule != TpRule::Replicated && p.shardAxis >= 0 && p.shardAxis < int(s.size()))
    s[p.shardAxis] = (s[p.shardAxis] + tp - 1) / tp;
  return s;
}

json::Value memoryJson(const MemoryBreakdown &m) {
  json::Value o = json::Value::object();
  o.set("params", m.params);
  o.set("grads", m.grads);
  o.set("optimizer", m.optimizer);
  o.set("activations", m.activations);
  o.set("comm", m.comm);
  o.set("workspace", m.workspace);
  o.set("total", m.total());
  return o;
}

/// The priced program per opcode class: seconds, instructions, bytes,
/// FLOPs and the rate each was priced at.
json::Value programTimeJson(const ProgramTime &t) {
  json::Value o = json::Value::object();
  for (const auto &[cls, c] : t.classes) {
    json::Value q = json::Value::object();
    q.set("seconds", c.seconds);
    q.set("instrs", c.instrs);
    q.set("bytes", c.bytes);
    q.set("flops", c.flops);
    q.set("rate", c.rate);
    q.set("fallback", c.fallback);
    o.set(cls, q);
  }
  return o;
}

/// The priced program per opcode class, largest first, in the layout of
/// LOOM_CUDA_PROFILE=1's table so the two can be read side by side.
void printProgramTime(std::ostream &os, const ProgramTime &t) {
  std::vector<std::pair<double, std::string>> rows;
  for (const auto &[cls, c] : t.classes) rows.push_back({c.seconds, cls});
  std::sort(rows.rbegin(), rows.rend());
  os << "compute by opcode class (the compiled step, priced per instruction; compare "
        "LOOM_CUDA_PROFILE=1):\n"
     << fmt("  %-22s %6s %12s %7s %12s  %s\n", "opcode", "instrs", "ms/run", "share", "MiB/GFLOP",
            "priced at");
  for (const auto &[sec, cls] : rows) {
    const ClassTime &c = t.classes.at(cls);
    std::string amount = c.flops > 0 ? fmt("%.1f GF", c.flops / 1e9) : fmt("%.1f MiB", c.bytes / (1 << 20));
    os << fmt("  %-22s %6d %12.3f %6.1f%% %12s  %s\n", cls.c_str(), c.instrs, sec * 1e3,
              t.seconds > 0 ? 100 * sec / t.seconds : 0.0, amount.c_str(), c.rate.c_str());
  }
  std::vector<std::string> fb = t.fallbacks();
  if (!fb.empty()) {
    std::string list;
    for (const std::string &c : fb) list += (list.empty() ? "" : ", ") + c;
    os << "  note: no calibrated figure of their own in the profile (priced at the copy "
          "bandwidth or the bf16 GEMM curve; rerun loom calibrate): "
       << list << "\n";
  }
}

json::Value planJson(const PlanEstimate &e) {
  const Plan &p = e.plan;
  json::Value o = json::Value::object();
  o.set("id", p.id());
  o.set("dp_replicate", p.dpReplicate);
  o.set("dp_shard", p.dpShard);
  o.set("cp", p.cp);
  o.set("tp", p.tp);
  o.set("pp", p.pp);
  o.set("schedule", scheduleName(p.schedule));
  o.set("virtual_stages", p.virtualStages);
  o.set("microbatches", p.microbatches);
  o.set("checkpoint", checkpointName(p.checkpoint));
  o.set("fp8", p.fp8);
  o.set("memory_source", e.memorySource);
  o.set("memory_device", e.worstDevice);
  o.set("memory", memoryJson(e.memory));
  if (e.memorySource != "analytical")
    o.set("memory_analytical", memoryJson(e.analytical));
  json::Value t = json::Value::object();
  t.set("compute", e.time.compute);
  t.set("comm", e.time.comm);
  t.set("bubble", e.time.bubble);
  if (!e.bubbleFraction.empty()) {
    json::Value idle = json::Value::array();
    for (double f : e.bubbleFraction) idle.push(f);
    t.set("idle_fraction_per_pipeline_rank", idle);
    t.set("stage_costs", e.stageCostSource.empty() ? std::string("model") : e.stageCostSource);
  }
  if (!e.stageCuts.empty()) {
    json::Value cuts = json::Value::array();
    for (int64_t c : e.stageCuts) cuts.push(c);
    o.set("stage_cuts", cuts);
  }
  if (!e.activationsPerRank.empty()) {
    json::Value act = json::Value::array();
    for (double b : e.activationsPerRank) act.push(b);
    o.set("activations_per_pipeline_rank", act);
  }
  t.set("optimizer", e.time.optimizer);
  t.set("total", e.time.total());
  t.set("compute_source", e.timeSource);
  if (e.timeSource == "program")
    t.set("compute_by_class", programTimeJson(e.programTime));
  o.set("time", t);
  o.set("tokens_per_s", e.tokensPerSecond);
  o.set("mfu", e.mfu);
  o.set("model_flops_per_step", e.modelFlopsPerStep);
  o.set("sequences_per_step", e.sequencesPerStep);
  if (!e.rejections.empty()) {
    json::Value r = json::Value::array();
    for (const std::string &s : e.rejections) r.push(s);
    o.set("reasons", r);
  }
  return o;
}

void printHeader(std::ostream &os, const CostModel &cm, const PlanRequest &req) {
  const ModelCost &m = cm.model();
  const HardwareProfile &hw = cm.hardware();
  size_t fwd = 0, bwd = 0, opt = 0;
  for (const CostOp &op : m.ops) {
    if (op.kind == OpKind::View) continue;
    (op.phase == Phase::Forward ? fwd : op.phase == Phase::Backward ? bwd : opt)++;
  }
  os << "loom plan: " << m.model << " on " << req.gpus << " x " << hw.name << " ("
     << req.gpusPerNode << " per node), microbatch " << m.batch << " x seq " << m.seq
     << ", global batch " << cm.globalBatch() << " sequences\n";
  os << fmt("model: %d layers, %lld heads (%lld KV), hidden %lld, vocab %lld, %.0f parameters\n",
            m.numLayers, (long long)m.heads, (long long)m.kvHeads, (long long)m.hidden,
            (long long)m.vocab, m.totalParams());
  os << "costs: " << m.costSource << " (" << fwd << " forward, " << bwd << " backward, " << opt
     << " optimizer ops)\n";
  os << "memory: " << (m.hasBufferPlan ? "the compiler's buffer plan (as loom train --precision bf16 compiles it, plus the CUDA backend's scratch and GEMM workspace) for plans it can compile "
                                          "(tp=cp=pp=1, no FSDP, 1 microbatch, no fp8; each recompute policy applied by the compiler's pass); analytical otherwise"
                                        : "analytical (" + m.bufferPlanNote + ")")
     << "\n";
  for (const std::string &n : m.notes) os << "note: " << n << "\n";
  if (const std::vector<rt::StageCostProfile> *profiles = cm.stageCostProfiles())
    for (const rt::StageCostProfile &p : *profiles)
      os << fmt("stage costs: pp=%d plans with %d stages and a %s backward are timed with "
                "those measured by %s\n",
                p.ranks, p.stages, p.splitBackward ? "split" : "whole", p.source.c_str());
}

} // namespace

std::string formatBytes(double b) {
  if (b >= kGiB) return fmt("%.2f GiB", b / kGiB);
  if (b >= kMiB) return fmt("%.1f MiB", b / kMiB);
  if (b >= 1024) return fmt("%.1f KiB", b / 1024);
  return fmt("%.0f B", b);
}

std::string formatSeconds(double s) {
  if (s >= 1) return fmt("%.3f s", s);
  if (s >= 1e-3) return fmt("%.3f ms", s * 1e3);
  return fmt("%.1f us", s * 1e6);
}

void printRanking(std::ostream &os, const CostModel &cm, const PlanRequest &req,
                  const PlanRanking &r, const ReportOptions &opts) {
  printHeader(os, cm, req);
  os << r.candidates << " candidate plans, " << r.feasible.size() << " feasible, "
     << r.candidates - r.feasible.size() << " rejected\n\n";
  size_t shown = std::min(opts.top, r.feasible.size());
  double maxMem = 0, maxTime = 0;
  for (size_t i = 0; i < shown; ++i) {
    maxMem = std::max(maxMem, r.feasible[i].memory.total());
    maxTime = std::max(maxTime, r.feasible[i].time.total());
  }
  bool useGiB = maxMem >= 4 * kGiB;
  double memUnit = useGiB ? kGiB : kMiB;
  const char *memFmt = useGiB ? " %6.2f" : " %6.1f";
  bool useSec = maxTime >= 10;
  double timeUnit = useSec ? 1.0 : 1e-3;
  if (shown) {
    os << fmt("%-4s %3s %3s %2s %2s %2s %-10s %3s %-9s %-3s | %s | %s |\n", "", "", "", "", "", "",
              "", "", "", "", useGiB ? "memory per GPU (GiB)                                       "
                                     : "memory per GPU (MiB)                                       ",
              useSec ? "step time (s)                  " : "step time (ms)                 ");
    os << fmt("%-4s %3s %3s %2s %2s %2s %-10s %3s %-9s %-3s | %6s %6s %6s %6s %6s %6s %6s %-4s | %7s %7s %7s %7s | %8s %6s\n",
              "rank", "dpr", "dps", "cp", "tp", "pp", "schedule", "mb", "ckpt", "fp8", "params",
              "grads", "optim", "act", "comm", "work", "total", "src", "compute", "comm", "bubble",
              "total", "tok/s", "MFU");
  }
  for (size_t i = 0; i < shown; ++i) {
    const PlanEstimate &e = r.feasible[i];
    const Plan &p = e.plan;
    std::string line = fmt("%-4zu %3d %3d %2d %2d %2d %-10s %3d %-9s %-3s |", i + 1, p.dpReplicate,
                           p.dpShard, p.cp, p.tp, p.pp, scheduleLabel(p).c_str(), p.microbatches,
                           checkpointName(p.checkpoint), p.fp8 ? "on" : "off");
    const MemoryBreakdown &m = e.memory;
    for (double v : {m.params, m.grads, m.optimizer, m.activations, m.comm, m.workspace, m.total()})
      line += fmt(memFmt, v / memUnit);
    line += fmt(" %-4s |", e.memorySource == "buffer-plan" ? "plan" : "model");
    for (double v : {e.time.compute, e.time.comm, e.time.bubble, e.time.total()})
      line += fmt(" %7.3f", v / timeUnit);
    line += fmt(" | %8s %5.1f%%", tokens(e.tokensPerSecond).c_str(), e.mfu * 100);
    os << line << "\n";
  }
  if (r.feasible.empty())
    os << "no feasible plan (see the rejections below)\n";
  if (!r.rejected.empty() && opts.rejected) {
    os << "\nbest rejected plans (estimated throughput first):\n";
    for (size_t i = 0; i < std::min(opts.rejected, r.rejected.size()); ++i) {
      const PlanEstimate &e = r.rejected[i];
      std::string why;
      for (const std::string &s : e.rejections) why += (why.empty() ? "" : "; ") + s;
      os << "  " << e.plan.id() << " (" << tokens(e.tokensPerSecond) << " tok/s, "
         << formatBytes(e.memory.total()) << "): " << why << "\n";
    }
  }
}

json::Value rankingJson(const CostModel &cm, const PlanRequest &req, const PlanRanking &r,
                        const ReportOptions &opts) {
  const ModelCost &m = cm.model();
  const HardwareProfile &hw = cm.hardware();
  json::Value o = json::Value::object();
  o.set("model", m.model);
  json::Value model = json::Value::object();
  model.set("layers", m.numLayers);
  model.set("heads", m.heads);
  model.set("kv_heads", m.kvHeads);
  model.set("hidden", m.hidden);
  model.set("vocab", m.vocab);
  model.set("parameters", m.totalParams());
  model.set("cost_source", m.costSource);
  model.set("backward_from_ir", m.backwardFromIr);
  model.set("buffer_plan", m.hasBufferPlan);
  if (!m.hasBufferPlan)
    model.set("buffer_plan_note", m.bufferPlanNote);
  json::Value notes = json::Value::array();
  for (const std::string &n : m.notes) notes.push(n);
  model.set("notes", notes);
  o.set("model_summary", model);
  json::Value rq = json::Value::object();
  rq.set("gpus", req.gpus);
  rq.set("gpus_per_node", req.gpusPerNode);
  rq.set("microbatch", req.microbatch);
  rq.set("seq", req.seq);
  rq.set("global_batch", cm.globalBatch());
  json::Value prec = json::Value::array();
  if (req.allowBf16) prec.push("bf16");
  if (req.allowFp8) prec.push("fp8");
  rq.set("precision", prec);
  o.set("request", rq);
  json::Value prof = json::Value::object();
  prof.set("name", hw.name);
  prof.set("source", hw.source);
  prof.set("usable_memory", hw.memoryBytes);
  o.set("profile", prof);
  o.set("candidates", uint64_t(r.candidates));
  o.set("feasible", uint64_t(r.feasible.size()));
  json::Value plans = json::Value::array();
  for (size_t i = 0; i < std::min(opts.top, r.feasible.size()); ++i) {
    json::Value p = planJson(r.feasible[i]);
    p.set("rank", uint64_t(i + 1));
    plans.push(p);
  }
  o.set("plans", plans);
  json::Value rej = json::Value::array();
  for (size_t i = 0; i < std::min(opts.rejected, r.rejected.size()); ++i)
    rej.push(planJson(r.rejected[i]));
  o.set("rejected", rej);
  return o;
}

namespace {

/// "rms_norm input_layernorm, matmul k_proj, rotary x2, ...".
std::string countedList(const std::vector<std::string> &items) {
  std::vector<std::pair<std::string, int>> counts;
  for (const std::string &i : items) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto &c) { return c.first == i; });
    if (it == counts.end())
      counts.push_back({i, 1});
    else
      ++it->second;
  }
  std::string s;
  for (auto &[what, n] : counts)
    s += (s.empty() ? "" : ", ") + what + (n > 1 ? fmt(" x%d", n) : "");
  return s.empty() ? "nothing" : s;
}

/// What each checkpoint policy keeps and re-runs (the recompute pass's
/// decisions), the plan's own marked.
void printRecompute(std::ostream &os, const ModelCost &m, Checkpoint chosen, bool compiled) {
  if (m.recompute.empty()) {
    os << "\nactivation checkpointing: no recompute pass decisions (the training step was not "
          "built); the analytical rule is used\n";
    return;
  }
  os << "\nactivation checkpointing (the compiler's recompute pass on the training step; layer "
     << m.recompute.front().layer << " shown, one microbatch, activations at 2 B):\n";
  for (const RecomputeReport &r : m.recompute) {
    double bytes = 0;
    std::vector<std::string> kept;
    for (auto &[what, b] : r.kept) {
      bytes += b;
      kept.push_back(what);
    }
    bool mine = r.policy == checkpointName(chosen);
    os << fmt("  %-10s%s keeps %zu tensors, %s: ", r.policy.c_str(), mine ? "*" : " ", kept.size(),
              formatBytes(bytes).c_str())
       << countedList(kept) << "\n";
    if (r.policy != "none")
      os << fmt("  %-11s re-runs %d ops per microbatch (%s); in layer %d: ", "", r.recomputedOps,
                (r.recomputeFlops >= 1e12   ? fmt("%.2f TFLOP", r.recomputeFlops / 1e12)
                 : r.recomputeFlops >= 1e9 ? fmt("%.2f GFLOP", r.recomputeFlops / 1e9)
                                           : fmt("%.2f MFLOP", r.recomputeFlops / 1e6))
                    .c_str(),
                r.layer)
         << countedList(r.recomputed) << "\n";
  }
  os << "  (* this plan; its memory above is "
     << (compiled ? "the compiled step's, with the policy applied" : "the analytical model's, from these kept tensors")
     << ")\n";
}

struct CollectiveLine {
  std::string label, text;
};

/// Collectives, with those identical in every transformer layer folded into one line.
std::vector<CollectiveLine> collectiveLines(const CostModel &cm, const PlanEstimate &e) {
  const ModelCost &m = cm.model();
  std::vector<CollectiveLine> out;
  std::map<std::string, std::set<int>> layersOf;
  std::vector<std::pair<std::string, const CollectiveUse *>> order;
  for (const CollectiveUse &c : e.collectives) {
    bool inLayer = c.layer >= 0 && c.layer < m.numLayers;
    std::string key = c.group + "|" + phaseName(c.phase) + "|" + commKindName(c.kind) + "|" +
                      fmt("%.0f|%.0f", c.bytes, c.callsPerStep) + "|" + c.what +
                      (inLayer ? "" : "|" + std::to_string(c.layer));
    if (!layersOf.count(key))
      order.push_back({key, &c});
    layersOf[key].insert(c.layer);
  }
  for (auto &[key, c] : order) {
    const std::set<int> &ls = layersOf[key];
    std::string label;
    if (c->layer >= 0 && c->layer < m.numLayers)
      label = ls.size() == 1 ? groupName(*ls.begin(), m.numLayers)
              : int(ls.size()) == m.numLayers
                  ? "each layer"
                  : fmt("%zu layers", ls.size());
    else
      label = groupName(c->layer, m.numLayers);
    std::string text = fmt("%-4s %-20s %-15s %3d ranks %10s x %-5.0f %10s  %s [%s]", phaseName(c->phase),
                           c->group.c_str(), commKindName(c->kind), c->ranks,
                           formatBytes(c->bytes).c_str(), c->callsPerStep,
                           formatSeconds(c->seconds).c_str(), c->what.c_str(), c->link.c_str());
    out.push_back({label, text});
  }
  return out;
}

} // namespace

void printExplain(std::ostream &os, const CostModel &cm, const PlanEstimate &e, size_t rank,
                  size_t feasible) {
  const ModelCost &m = cm.model();
  const Plan &p = e.plan;
  const HardwareProfile &hw = cm.hardware();
  os << "plan " << p.id() << "\n";
  if (rank)
    os << "  rank " << rank << " of " << feasible << " feasible plans\n";
  else
    for (const std::string &r : e.rejections) os << "  REJECTED: " << r << "\n";
  int gpn = cm.request().gpusPerNode;
  os << fmt("\ndevice mesh [pp %d, dp_replicate %d, dp_shard %d, cp %d, tp %d] = %d GPUs, "
            "tp innermost, %d per node\n",
            p.pp, p.dpReplicate, p.dpShard, p.cp, p.tp, p.gpus(), gpn);
  struct Dim { const char *name; int size, stride; };
  Dim dims[] = {{"tp", p.tp, 1},
                {"cp", p.cp, p.tp},
                {"dp_shard", p.dpShard, p.tp * p.cp},
                {"dp_replicate", p.dpReplicate, p.tp * p.cp * p.dpShard},
                {"pp", p.pp, p.tp * p.cp * p.dpShard * p.dpReplicate}};
  for (const Dim &d : dims)
    if (d.size > 1)
      os << fmt("  %-13s %3d ranks, stride %3d: %s\n", d.name, d.size, d.stride,
                groupInsideNode(d.size, d.stride, gpn)
                    ? ("inside a node, " + hw.intraNode.name).c_str()
                    : ("across nodes, " + hw.interNode.name).c_str());
  os << "\npipeline: " << p.pp << " stage(s)";
  if (p.pp > 1)
    os << ", schedule " << scheduleName(p.schedule)
       << (p.virtualStages > 1 ? " with " + std::to_string(p.virtualStages) + " chunks per rank" : "");
  os << ", " << p.microbatches << " microbatch(es) of " << m.batch << " x " << m.seq
     << " per step per data-parallel rank\n";
  if (!e.stageCuts.empty()) {
    std::vector<int64_t> even = evenStageCuts(m.numLayers, int(e.stageCuts.size()) + 1);
    os << "  stages: layers " << describeStageCuts(e.stageCuts, m.numLayers)
       << (e.stageCuts == even ? " (the even split is as balanced as any)"
                               : " (balanced by per-layer cost; evenly: " +
                                     describeStageCuts(even, m.numLayers) + ")")
       << "; loom train --pp-split " << ppSplitSpelling(e.stageCuts) << "\n";
  }
  for (size_t d = 0; d < e.deviceGroups.size(); ++d) {
    std::string groups;
    for (int g : e.deviceGroups[d])
      groups += (groups.empty() ? " " : ", ") + groupName(g, m.numLayers);
    os << "  rank " << d << ":" << groups;
    os << fmt("  (activations of %.2f microbatch(es) in flight", cm.inFlight(int(d), p));
    if (d < e.bubbleFraction.size())
      os << fmt("; idle %.1f%% of the step's pipeline time", 100 * e.bubbleFraction[d]);
    if (d < e.bubbleFraction.size() && !e.stageCostSource.empty())
      os << " (measured stage costs: " << e.stageCostSource << ")";
    os << ")\n";
  }

  os << "\nsharding (parameter: full shape -> shape on each GPU after tp";
  if (p.dpShard > 1) os << "; FSDP then keeps 1/" << p.dpShard << " of it, flattened";
  os << "):\n";
  std::map<int, std::vector<const ParamInfo *>> byLayer;
  for (const ParamInfo &prm : m.params) byLayer[prm.layer].push_back(&prm);
  std::vector<std::string> firstLayerPattern;
  int sameAsFirst = 0;
  for (auto &[layer, params] : byLayer) {
    std::vector<std::string> pattern;
    for (const ParamInfo *prm : params) pattern.push_back(layerPattern(*prm));
    bool isLayer = layer >= 0 && layer < m.numLayers;
    if (isLayer && layer > 0 && pattern == firstLayerPattern) {
      ++sameAsFirst;
      continue;
    }
    if (sameAsFirst) {
      os << "  " << (sameAsFirst == 1 ? "layer 1" : "layers 1-" + std::to_string(sameAsFirst))
         << ": same parameters, shapes and rules as layer 0\n";
      sameAsFirst = 0;
    }
    if (isLayer && firstLayerPattern.empty())
      firstLayerPattern = pattern;
    os << "  " << groupName(layer, m.numLayers) << ":\n";
    for (const ParamInfo *prm : params) {
      std::string rule = tpRuleName(prm->rule);
      if (prm->ruleFromDataflow) rule += " (from dataflow)";
      if (prm->tiedToHead) rule += ", tied to LM head";
      os << fmt("    %-52s %-10s %-30s -> %s\n", prm->name.c_str(), shapeText(prm->shape).c_str(),
                rule.c_str(), shapeText(tpLocalShape(*prm, p.tp)).c_str());
    }
  }
  if (sameAsFirst)
    os << "  " << (sameAsFirst == 1 ? "layer 1" : "layers 1-" + std::to_string(sameAsFirst))
       << ": same parameters, shapes and rules as layer 0\n";

  os << "\ncollectives per step on one GPU (bytes per call x calls per step, time per call):\n";
  std::vector<CollectiveLine> lines = collectiveLines(cm, e);
  if (lines.empty())
    os << "  none (one GPU does everything)\n";
  for (const CollectiveLine &l : lines) os << fmt("  %-11s %s\n", l.label.c_str(), l.text.c_str());
  if (p.tp > 1 || p.cp > 1)
    os << "  (tp: Megatron column/row parallel with sequence parallelism; all-gather before "
          "column-parallel GEMMs, reduce-scatter after row-parallel ones, mirrored in backward)\n";

  const MemoryBreakdown &mem = e.memory;
  os << "\nmemory on pipeline rank " << e.worstDevice << " (the fullest; " << e.memorySource
     << "): params " << formatBytes(mem.params) << ", grads " << formatBytes(mem.grads)
     << ", optimizer " << formatBytes(mem.optimizer) << ", activations "
     << formatBytes(mem.activations) << ", comm buffers " << formatBytes(mem.comm)
     << ", workspace " << formatBytes(mem.workspace) << " = " << formatBytes(mem.total()) << " of "
     << formatBytes(hw.memoryBytes) << "\n";
  if (e.memorySource != "analytical")
    os << "  (analytical model for comparison: " << formatBytes(e.analytical.total()) << ")\n";
  os << "step: compute " << formatSeconds(e.time.compute) << " (optimizer "
     << formatSeconds(e.time.optimizer) << "), exposed comm " << formatSeconds(e.time.comm)
     << ", bubble " << formatSeconds(e.time.bubble) << " = " << formatSeconds(e.time.total())
     << "; " << tokens(e.tokensPerSecond) << " tokens/s, MFU " << fmt("%.1f%%", e.mfu * 100)
     << "\n";
  if (e.timeSource == "program")
    printProgramTime(os, e.programTime);
  printRecompute(os, m, p.checkpoint, e.memorySource != "analytical");
}

namespace {

json::Value recomputeJson(const ModelCost &m) {
  json::Value out = json::Value::array();
  for (const RecomputeReport &r : m.recompute) {
    json::Value o = json::Value::object();
    o.set("policy", r.policy);
    o.set("layer", r.layer);
    json::Value kept = json::Value::array();
    for (auto &[what, bytes] : r.kept) {
      json::Value k = json::Value::object();
      k.set("what", what);
      k.set("bytes", bytes);
      kept.push(k);
    }
    o.set("kept", kept);
    json::Value re = json::Value::array();
    for (const std::string &what : r.recomputed) re.push(what);
    o.set("recomputed_in_layer", re);
    o.set("recomputed_ops", r.recomputedOps);
    o.set("recompute_flops", r.recomputeFlops);
    out.push(o);
  }
  return out;
}

} // namespace

json::Value modelCostJson(const ModelCost &m) {
  json::Value o = json::Value::object();
  o.set("model", m.model);
  o.set("cost_source", m.costSource);
  o.set("batch", m.batch);
  o.set("seq", m.seq);
  o.set("layers", m.numLayers);
  o.set("boundary_elements", m.boundaryElements);
  json::Value groups = json::Value::array();
  for (int layer = kEmbedLayer; layer <= m.numLayers; ++layer) {
    json::Value g = json::Value::object();
    g.set("group", groupName(layer, m.numLayers));
    for (Phase ph : {Phase::Forward, Phase::Backward}) {
      double flops = 0, elements = 0, matmuls = 0, attention = 0, kernels = 0, recompute = 0,
             recomputeFull = 0;
      for (const CostOp &op : m.ops) {
        if (op.layer != layer || op.phase != ph || op.kind == OpKind::View)
          continue;
        ++kernels;
        flops += op.flops;
        elements += op.elements;
        matmuls += op.kind == OpKind::Matmul;
        attention += op.kind == OpKind::Attention;
        recompute += op.recomputeSelective;
        recomputeFull += op.recomputeFull;
      }
      json::Value p = json::Value::object();
      p.set("kernels", kernels);
      p.set("matmuls", matmuls);
      p.set("attention", attention);
      p.set("flops", flops);
      p.set("elements", elements);
      if (ph == Phase::Forward) {
        p.set("selective_recompute_kernels", recompute);
        p.set("full_recompute_kernels", recomputeFull);
      }
      g.set(phaseName(ph), p);
    }
    double saved[4] = {0, 0, 0, 0};
    for (const SavedTensor &s : m.saved) {
      if (s.layer != layer)
        continue;
      saved[0] += s.none ? s.elements : 0;
      saved[1] += s.selective ? s.elements : 0;
      saved[2] += s.full ? s.elements : 0;
      saved[3] += 1;
    }
    json::Value sv = json::Value::object();
    sv.set("tensors", saved[3]);
    sv.set("none", saved[0]);
    sv.set("selective", saved[1]);
    sv.set("full", saved[2]);
    g.set("saved_elements", sv);
    json::Value tpc = json::Value::array();
    for (const TpCollective &c : m.tpCollectives)
      if (c.layer == layer)
        tpc.push(std::string(phaseName(c.phase)) + " " + commKindName(c.kind) + " " +
                 fmt("%.0f", c.elements) + (c.fp32 ? " fp32 " : " ") + c.what);
    g.set("tp_collectives", tpc);
    groups.push(g);
  }
  o.set("groups", groups);
  json::Value params = json::Value::array();
  for (const ParamInfo &p : m.params)
    params.push(p.name + " " + groupName(p.layer, m.numLayers) + " " + shapeText(p.shape) + " " +
                tpRuleName(p.rule) + (p.shardAxis >= 0 ? " axis " + std::to_string(p.shardAxis) : "") +
                (p.tiedToHead ? " tied" : "") + (p.ruleFromDataflow ? " (dataflow)" : ""));
  o.set("params", params);
  double opt = 0;
  for (const CostOp &op : m.ops) opt += op.phase == Phase::Optimizer ? op.elements : 0;
  o.set("optimizer_elements", opt);
  o.set("recompute", recomputeJson(m));
  return o;
}

json::Value explainJson(const CostModel &cm, const PlanEstimate &e, size_t rank) {
  const ModelCost &m = cm.model();
  json::Value o = planJson(e);
  o.set("rank", uint64_t(rank));
  json::Value stages = json::Value::array();
  for (const std::vector<int> &groups : e.deviceGroups) {
    json::Value s = json::Value::array();
    for (int g : groups) s.push(groupName(g, m.numLayers));
    stages.push(s);
  }
  o.set("stages", stages);
  json::Value params = json::Value::array();
  for (const ParamInfo &prm : m.params) {
    json::Value q = json::Value::object();
    q.set("name", prm.name);
    q.set("layer", groupName(prm.layer, m.numLayers));
    json::Value shape = json::Value::array(), local = json::Value::array();
    for (int64_t d : prm.shape) shape.push(d);
    for (int64_t d : tpLocalShape(prm, e.plan.tp)) local.push(d);
    q.set("shape", shape);
    q.set("rule", tpRuleName(prm.rule));
    q.set("rule_from_dataflow", prm.ruleFromDataflow);
    q.set("tp_local_shape", local);
    q.set("local_elements", cm.localElements(prm, e.plan));
    params.push(q);
  }
  o.set("params", params);
  json::Value colls = json::Value::array();
  for (const CollectiveUse &c : e.collectives) {
    json::Value q = json::Value::object();
    q.set("group", c.group);
    q.set("layer", groupName(c.layer, m.numLayers));
    q.set("phase", phaseName(c.phase));
    q.set("kind", commKindName(c.kind));
    q.set("ranks", c.ranks);
    q.set("link", c.link);
    q.set("bytes", c.bytes);
    q.set("seconds", c.seconds);
    q.set("calls_per_step", c.callsPerStep);
    q.set("what", c.what);
    colls.push(q);
  }
  o.set("collectives", colls);
  o.set("recompute", recomputeJson(m));
  return o;
}

} // namespace loom::planner
