//===- PipelineProfile.cpp - Measured stage costs of a pipeline -----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/PipelineProfile.h"
#include "lib/Diagnostics.h"
#include "loom/io/Json.h"

#include <algorithm>
#include <array>
#include <map>

namespace loom::rt {

namespace {

bool sends(PipeOp op) { return op == PipeOp::SendActivation || op == PipeOp::SendGradient; }

/// The receive a send meets: (kind, the stage that receives it, microbatch).
PipeAction receiveOf(const PipeAction &send) {
  return send.op == PipeOp::SendActivation
             ? PipeAction{PipeOp::RecvActivation, send.stage + 1, send.microbatch}
             : PipeAction{PipeOp::RecvGradient, send.stage - 1, send.microbatch};
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

} // namespace

PipelineSchedule serialSchedule(const PipelineSchedule &s) {
  PipelineSchedule out;
  out.kind = ScheduleKind::Custom;
  out.name = "serial " + s.name;
  out.ranks = s.ranks;
  out.stages = s.stages;
  out.microbatches = s.microbatches;
  out.splitBackward = s.splitBackward;
  out.stageRank = s.stageRank;
  out.actions.assign(size_t(s.ranks), {});
  const int N = s.stages;
  auto rankOf = [&](int st) { return s.stageRank[size_t(st)]; };
  auto on = [&](int st, PipeOp op, int i) { out.actions[size_t(rankOf(st))].push_back({op, st, i}); };
  // One global order in which every action depends on the one before it
  // (through the rank's order or a transfer): nothing overlaps.
  for (int i = 0; i < s.microbatches; ++i) {
    for (int st = 0; st < N; ++st) {
      if (st > 0 && rankOf(st - 1) != rankOf(st))
        on(st, PipeOp::RecvActivation, i);
      on(st, PipeOp::Forward, i);
      if (st + 1 < N && rankOf(st + 1) != rankOf(st))
        on(st, PipeOp::SendActivation, i);
    }
    for (int st = N - 1; st >= 0; --st) {
      if (st + 1 < N && rankOf(st + 1) != rankOf(st))
        on(st, PipeOp::RecvGradient, i);
      if (s.splitBackward) {
        on(st, PipeOp::BackwardInput, i);
        on(st, PipeOp::BackwardWeight, i);
      } else {
        on(st, PipeOp::Backward, i);
      }
      if (st > 0 && rankOf(st - 1) != rankOf(st))
        on(st, PipeOp::SendGradient, i);
    }
  }
  return out;
}

bool measureStageCosts(const PipelineSchedule &s, int ranksPerStage,
                       const std::vector<StepTimings> &steps, std::vector<StageCost> &out,
                       std::string &err) {
  const int N = s.stages;
  // samples[stage][F, B, I, W]; transfer samples per sending stage.
  std::vector<std::array<std::vector<double>, 4>> samples(static_cast<size_t>(N));
  std::vector<std::vector<double>> transfer(static_cast<size_t>(N));
  std::vector<double> allTransfers;
  for (const StepTimings &step : steps) {
    const int world = int(step.size());
    // When each transfer action was posted (sends) or done (receives), per
    // world rank, from its transfer group's timing.
    std::vector<std::vector<double>> posted(static_cast<size_t>(world)),
        done(static_cast<size_t>(world));
    for (int w = 0; w < world; ++w) {
      int r = w / std::max(1, ranksPerStage);
      if (r >= s.ranks)
        continue;
      const std::vector<PipeAction> &acts = s.actions[size_t(r)];
      posted[size_t(w)].assign(acts.size(), -1);
      done[size_t(w)].assign(acts.size(), -1);
      for (const ActionTiming &t : step[size_t(w)]) {
        if (t.action < 0 || size_t(t.action) >= acts.size())
          continue;
        const PipeAction &a = acts[size_t(t.action)];
        if (!isTransfer(a.op)) {
          samples[size_t(a.stage)][size_t(a.op)].push_back(t.end - t.start);
          continue;
        }
        for (size_t k = size_t(t.action); k < acts.size() && isTransfer(acts[k].op); ++k) {
          posted[size_t(w)][k] = t.start;
          done[size_t(w)][k] = t.end;
        }
      }
    }
    // The k-th send from a to b meets the k-th receive on b from a (world
    // ranks of the same position within their pipeline ranks).
    for (int w = 0; w < world; ++w) {
      int r = w / std::max(1, ranksPerStage), inner = w % std::max(1, ranksPerStage);
      if (r >= s.ranks)
        continue;
      const std::vector<PipeAction> &acts = s.actions[size_t(r)];
      std::map<int, int> nth; // per peer pipeline rank
      for (size_t k = 0; k < acts.size(); ++k) {
        if (!sends(acts[k].op))
          continue;
        int peer = s.peerOf(acts[k]), n = nth[peer]++;
        int pw = peer * std::max(1, ranksPerStage) + inner;
        if (pw >= world || posted[size_t(w)][k] < 0)
          continue;
        const std::vector<PipeAction> &pacts = s.actions[size_t(peer)];
        int seen = 0;
        for (size_t j = 0; j < pacts.size(); ++j) {
          if (!isTransfer(pacts[j].op) || sends(pacts[j].op) || s.peerOf(pacts[j]) != r)
            continue;
          if (seen++ != n)
            continue;
          if (pacts[j] == receiveOf(acts[k]) && done[size_t(pw)][j] >= 0) {
            double dt = std::max(0.0, done[size_t(pw)][j] - posted[size_t(w)][k]);
            transfer[size_t(acts[k].stage)].push_back(dt);
            allTransfers.push_back(dt);
          }
          break;
        }
      }
    }
  }
  out.assign(static_cast<size_t>(N), StageCost());
  for (int st = 0; st < N; ++st) {
    StageCost &c = out[size_t(st)];
    double *field[4] = {&c.forward, &c.backward, &c.backwardInput, &c.backwardWeight};
    for (PipeOp op : {PipeOp::Forward, PipeOp::Backward, PipeOp::BackwardInput,
                      PipeOp::BackwardWeight}) {
      bool runs = op == PipeOp::Forward || (op == PipeOp::Backward) != s.splitBackward;
      const std::vector<double> &v = samples[size_t(st)][size_t(op)];
      if (runs && v.empty()) {
        err = cat("no measured ", pipeOpName(op), " of stage ", st, " (no step after the first?)");
        return false;
      }
      *field[size_t(op)] = median(v);
    }
    if (s.splitBackward)
      c.backward = c.backwardInput + c.backwardWeight;
    c.transfer = transfer[size_t(st)].empty() ? median(allTransfers) : median(transfer[size_t(st)]);
  }
  return true;
}

std::string stageCostProfileJson(const StageCostProfile &p) {
  json::Value v = json::Value::object();
  v.set("format", "loom-stage-costs");
  v.set("version", 1);
  v.set("source", p.source);
  v.set("backend", p.backend);
  v.set("transport", p.transport);
  v.set("pp", p.ranks);
  v.set("stages", p.stages);
  v.set("split_backward", p.splitBackward);
  v.set("microbatch_rows", p.microbatchRows);
  v.set("seq", p.seq);
  v.set("tp", p.tp);
  v.set("dp_shard", p.dpShard);
  v.set("dp_replicate", p.dpReplicate);
  v.set("threads_per_rank", p.threadsPerRank);
  v.set("steps", p.steps);
  if (!p.cuts.empty()) {
    json::Value cuts = json::Value::array();
    for (int64_t c : p.cuts) cuts.push(c);
    v.set("cuts", std::move(cuts));
  }
  json::Value costs = json::Value::array();
  for (size_t st = 0; st < p.costs.size(); ++st) {
    const StageCost &c = p.costs[st];
    json::Value e = json::Value::object();
    e.set("stage", int64_t(st));
    e.set("forward_s", c.forward);
    e.set("backward_s", c.backward);
    e.set("backward_input_s", c.backwardInput);
    e.set("backward_weight_s", c.backwardWeight);
    e.set("transfer_s", c.transfer);
    costs.push(std::move(e));
  }
  v.set("stage_costs", std::move(costs));
  return v.dump(2) + "\n";
}

bool parseStageCostProfile(const std::string &text, const std::string &path,
                           StageCostProfile &out, std::string &err) {
  json::Value v;
  std::string why;
  if (!json::parse(text, v, why)) {
    err = cat(path, ": not JSON (", why, ")");
    return false;
  }
  auto bad = [&](const std::string &what) {
    err = cat(path, ": ", what);
    return false;
  };
  const json::Value *format = v.isObject() ? v.get("format") : nullptr;
  if (!format || !format->isString() || format->str() != "loom-stage-costs")
    return bad("not a stage-cost profile (\"format\": \"loom-stage-costs\" missing; "
               "loom train --stage-costs-out writes one)");
  auto number = [&](const json::Value &o, const char *key, double &x) {
    const json::Value *f = o.get(key);
    if (!f || !f->isNumber())
      return bad(cat("\"", key, "\" is missing or not a number"));
    x = f->number();
    return true;
  };
  auto integer = [&](const char *key, auto &x, int64_t lo) {
    double d = 0;
    if (!number(v, key, d))
      return false;
    if (d < double(lo) || d != double(int64_t(d)))
      return bad(cat("\"", key, "\" must be an integer >= ", lo, ", not ", d));
    x = static_cast<std::remove_reference_t<decltype(x)>>(d);
    return true;
  };
  out = StageCostProfile();
  auto str = [&](const char *key, std::string &x) {
    if (const json::Value *f = v.get(key); f && f->isString())
      x = f->str();
  };
  str("source", out.source);
  str("backend", out.backend);
  str("transport", out.transport);
  if (!integer("pp", out.ranks, 1) || !integer("stages", out.stages, 1) ||
      !integer("microbatch_rows", out.microbatchRows, 1) || !integer("seq", out.seq, 1) ||
      !integer("tp", out.tp, 1) || !integer("dp_shard", out.dpShard, 1) ||
      !integer("dp_replicate", out.dpReplicate, 1) ||
      !integer("threads_per_rank", out.threadsPerRank, 1) || !integer("steps", out.steps, 0))
    return false;
  const json::Value *split = v.get("split_backward");
  if (!split || split->kind() != json::Value::Kind::Bool)
    return bad("\"split_backward\" is missing or not true/false");
  out.splitBackward = split->boolean();
  if (const json::Value *cuts = v.get("cuts")) {
    if (!cuts->isArray() || int(cuts->items().size()) != out.stages - 1)
      return bad(cat("\"cuts\" must list the first layer of each of the ", out.stages - 1,
                     " stages after the first"));
    for (const json::Value &c : cuts->items()) {
      if (!c.isNumber() || c.number() < 1 || c.number() != double(int64_t(c.number())) ||
          (!out.cuts.empty() && int64_t(c.number()) <= out.cuts.back()))
        return bad("\"cuts\" must be increasing layer numbers >= 1");
      out.cuts.push_back(int64_t(c.number()));
    }
  }
  if (out.stages % out.ranks)
    return bad(cat(out.stages, " stages do not spread evenly over pp=", out.ranks));
  const json::Value *costs = v.get("stage_costs");
  if (!costs || !costs->isArray() || int(costs->items().size()) != out.stages)
    return bad(cat("\"stage_costs\" must list the ", out.stages, " stages"));
  for (const json::Value &e : costs->items()) {
    StageCost c;
    if (!e.isObject())
      return bad("a \"stage_costs\" entry is not an object");
    if (!number(e, "forward_s", c.forward) || !number(e, "backward_s", c.backward) ||
        !number(e, "backward_input_s", c.backwardInput) ||
        !number(e, "backward_weight_s", c.backwardWeight) || !number(e, "transfer_s", c.transfer))
      return false;
    for (double x : {c.forward, c.backward, c.backwardInput, c.backwardWeight, c.transfer})
      if (!(x >= 0))
        return bad(cat("stage ", out.costs.size(), ": a time is negative"));
    out.costs.push_back(c);
  }
  return true;
}

} // namespace loom::rt
