//===- Plan.cpp -----------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Plan.h"

#include <sstream>

namespace loom::planner {

const char *scheduleName(Schedule s) {
  switch (s) {
  case Schedule::None: return "none";
  case Schedule::GPipe: return "gpipe";
  case Schedule::OneFOneB: return "1f1b";
  case Schedule::Interleaved: return "interleaved";
  case Schedule::ZeroBubble: return "zb";
  }
  return "?";
}

const char *checkpointName(Checkpoint c) {
  switch (c) {
  case Checkpoint::None: return "none";
  case Checkpoint::Selective: return "selective";
  case Checkpoint::Full: return "full";
  }
  return "?";
}

const char *cpRotateName(CpRotate r) { return r == CpRotate::Ring ? "ring" : "allgather"; }

std::string Plan::id() const {
  std::ostringstream s;
  s << "dpr=" << dpReplicate << ",dps=" << dpShard << ",cp=" << cp << ",tp=" << tp
    << ",pp=" << pp << ",sched=" << scheduleName(schedule) << ",v=" << virtualStages
    << ",mb=" << microbatches << ",ac=" << checkpointName(checkpoint)
    << ",fp8=" << (fp8 ? "on" : "off");
  return s.str();
}

std::vector<Plan> factorizations(int n) {
  std::vector<Plan> out;
  std::vector<int> divisors;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0)
      divisors.push_back(d);
  for (int pp : divisors)
    for (int tp : divisors) {
      if ((n / pp) % tp)
        continue;
      int rest = n / pp / tp;
      for (int cp : divisors) {
        if (rest % cp)
          continue;
        int dp = rest / cp;
        for (int dps : divisors) {
          if (dp % dps)
            continue;
          Plan p;
          p.pp = pp;
          p.tp = tp;
          p.cp = cp;
          p.dpShard = dps;
          p.dpReplicate = dp / dps;
          out.push_back(p);
        }
      }
    }
  return out;
}

std::vector<Plan> enumeratePlans(const PlanRequest &req, int numLayers) {
  std::vector<Plan> out;
  int64_t globalBatch = req.globalBatch > 0 ? req.globalBatch : req.microbatch * req.gpus;
  for (Plan base : factorizations(req.gpus)) {
    int64_t perStep = req.microbatch * base.dp();
    base.microbatches = int((globalBatch + perStep - 1) / perStep);
    std::vector<std::pair<Schedule, int>> schedules;
    if (base.pp == 1) {
      schedules.push_back({Schedule::None, 1});
    } else {
      schedules.push_back({Schedule::GPipe, 1});
      schedules.push_back({Schedule::OneFOneB, 1});
      for (int v = 2; v <= req.maxVirtualStages && base.pp * v <= numLayers; ++v)
        schedules.push_back({Schedule::Interleaved, v});
      // Zero bubble: ZB-H1 (one stage per rank) and ZBV (two, in a V).
      schedules.push_back({Schedule::ZeroBubble, 1});
      if (base.pp * 2 <= numLayers)
        schedules.push_back({Schedule::ZeroBubble, 2});
    }
    for (auto [schedule, v] : schedules)
      for (Checkpoint ac : {Checkpoint::None, Checkpoint::Selective, Checkpoint::Full})
        for (bool fp8 : {false, true}) {
          if ((fp8 && !req.allowFp8) || (!fp8 && !req.allowBf16))
            continue;
          Plan p = base;
          p.schedule = schedule;
          p.virtualStages = v;
          p.checkpoint = ac;
          p.fp8 = fp8;
          out.push_back(p);
        }
  }
  return out;
}

bool parsePlanFilter(const std::string &text, PlanFilter &out, std::string &err) {
  static const char *keys[] = {"dpr", "dps", "cp", "tp", "pp", "sched", "v", "mb", "ac", "fp8"};
  out.clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty())
      continue;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      err = "plan '" + text + "': expected key=value items (e.g. tp=2,pp=2)";
      return false;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    bool known = false;
    for (const char *k : keys)
      known |= key == k;
    if (!known) {
      err = "plan '" + text + "': unknown key '" + key +
            "' (dpr, dps, cp, tp, pp, sched, v, mb, ac, fp8)";
      return false;
    }
    out[key] = value;
  }
  if (out.empty()) {
    err = "plan '" + text + "' is empty";
    return false;
  }
  return true;
}

bool planMatches(const Plan &p, const PlanFilter &f) {
  PlanFilter have;
  std::stringstream ss(p.id());
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    have[item.substr(0, eq)] = item.substr(eq + 1);
  }
  for (const auto &[k, v] : f)
    if (have[k] != v)
      return false;
  return true;
}

namespace {

/// cp_rotate=allgather|ring, tp_sp=on|off, loss_parallel=on|off.
bool parseChoice(const std::string &text, const std::string &key, const std::string &value,
                 Plan &out, std::string &err) {
  if (key == "cp_rotate") {
    if (value != "allgather" && value != "ring") {
      err = "plan '" + text + "': cp_rotate must be allgather or ring, not '" + value + "'";
      return false;
    }
    out.cpRotate = value == "ring" ? CpRotate::Ring : CpRotate::AllGather;
    return true;
  }
  if (value != "on" && value != "off") {
    err = "plan '" + text + "': " + key + " must be on or off, not '" + value + "'";
    return false;
  }
  (key == "tp_sp" ? out.tpSp : out.lossParallel) = value == "on";
  return true;
}

} // namespace

bool parseMeshPlan(const std::string &text, Plan &out, std::string &err) {
  out = Plan();
  if (text == "1")
    return true;
  if (text.empty()) {
    err = "plan is empty (e.g. dp_shard=2, or 1 for one device)";
    return false;
  }
  std::map<std::string, int *> keys = {{"dp_replicate", &out.dpReplicate},
                                       {"dp_shard", &out.dpShard},
                                       {"cp", &out.cp},
                                       {"tp", &out.tp},
                                       {"pp", &out.pp}};
  std::map<std::string, bool> seen;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (item.empty() || eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      err = "plan '" + text + "': expected key=value items such as dp_shard=2, not '" + item + "'";
      return false;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto it = keys.find(key);
    bool choice = key == "cp_rotate" || key == "tp_sp" || key == "loss_parallel";
    if (seen[key]) {
      err = "plan '" + text + "': '" + key + "' is given twice";
      return false;
    }
    if (key == "pp_schedule") {
      seen[key] = true;
      if (value.size() > 4 && value.substr(value.size() - 4) == ".csv") {
        out.scheduleFile = value;
        continue;
      }
      bool known = false;
      for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved,
                         Schedule::ZeroBubble})
        if (value == scheduleName(s))
          out.schedule = s, known = true;
      if (!known) {
        err = "plan '" + text + "': pp_schedule must be gpipe, 1f1b, interleaved, zb or a "
              "FILE.csv, not '" + value + "'";
        return false;
      }
      continue;
    }
    if (key == "pp_virtual")
      it = keys.insert({key, &out.virtualStages}).first;
    if (key == "microbatches")
      it = keys.insert({key, &out.microbatches}).first;
    if (it == keys.end() && !choice) {
      err = "plan '" + text + "': unknown key '" + key +
            "' (dp_replicate, dp_shard, cp, tp, pp, cp_rotate, tp_sp, loss_parallel, "
            "pp_schedule, pp_virtual, microbatches)";
      return false;
    }
    seen[key] = true;
    if (choice) {
      if (!parseChoice(text, key, value, out, err))
        return false;
      continue;
    }
    bool digits = value.size() <= 6 && value.find_first_not_of("0123456789") == std::string::npos;
    int v = digits ? std::stoi(value) : 0;
    if (v <= 0) {
      err = "plan '" + text + "': " + key + " must be a positive integer, not '" + value + "'";
      return false;
    }
    *it->second = v;
  }
  if (!text.empty() && text.back() == ',') {
    err = "plan '" + text + "': trailing comma";
    return false;
  }
  bool pipelineKeys = seen["pp_schedule"] || seen["pp_virtual"] || seen["microbatches"];
  if (out.pp == 1 && pipelineKeys) {
    err = "plan '" + text + "': pp_schedule, pp_virtual and microbatches need pp > 1";
    return false;
  }
  out.tpSpChosen = seen["tp_sp"];
  out.lossParallelChosen = seen["loss_parallel"];
  if (out.pp > 1) {
    // Defaults: 1F1B (interleaved when virtual stages are asked for), one
    // microbatch per stage.
    if (out.schedule == Schedule::None)
      out.schedule = out.virtualStages > 1 ? Schedule::Interleaved : Schedule::OneFOneB;
    if (!seen["pp_virtual"] && out.schedule == Schedule::Interleaved)
      out.virtualStages = 2;
    if (!seen["microbatches"])
      out.microbatches = out.pp;
    // Pipeline stages run tp without sequence parallelism or the
    // vocabulary-parallel loss (not combined yet): off unless asked for,
    // and asking is refused by checkExecutable.
    if (!seen["tp_sp"])
      out.tpSp = false;
    if (!seen["loss_parallel"])
      out.lossParallel = false;
  }
  return true;
}

std::string meshPlanName(const Plan &p) {
  std::string s;
  auto add = [&](const char *k, int v) {
    if (v > 1) s += (s.empty() ? "" : ",") + std::string(k) + "=" + std::to_string(v);
  };
  add("dp_replicate", p.dpReplicate);
  add("dp_shard", p.dpShard);
  add("cp", p.cp);
  add("tp", p.tp);
  add("pp", p.pp);
  if (s.empty())
    return "1";
  if (p.pp > 1) {
    s += ",pp_schedule=" + (p.scheduleFile.empty() ? std::string(scheduleName(p.schedule))
                                                    : p.scheduleFile);
    if (p.virtualStages > 1)
      s += ",pp_virtual=" + std::to_string(p.virtualStages);
    s += ",microbatches=" + std::to_string(p.microbatches);
  }
  // The choices that differ from the defaults, where they apply (sequence
  // and loss parallelism are on by default, except in pipeline plans).
  bool tpChoices = p.pp == 1;
  if (p.cp > 1 && p.cpRotate == CpRotate::Ring)
    s += ",cp_rotate=ring";
  if (p.tp > 1 && p.tpSp != tpChoices)
    s += p.tpSp ? ",tp_sp=on" : ",tp_sp=off";
  if (p.tp > 1 && p.lossParallel != tpChoices)
    s += p.lossParallel ? ",loss_parallel=on" : ",loss_parallel=off";
  return s;
}

std::string checkWorldSize(const Plan &p, int worldSize) {
  if (p.gpus() == worldSize)
    return "";
  std::string product;
  auto add = [&](const char *k, int v) {
    product += (product.empty() ? "" : " x ") + std::string(k) + "=" + std::to_string(v);
  };
  add("dp_replicate", p.dpReplicate);
  add("dp_shard", p.dpShard);
  add("cp", p.cp);
  add("tp", p.tp);
  add("pp", p.pp);
  return "plan '" + meshPlanName(p) + "' needs " + product + " = " + std::to_string(p.gpus()) +
         " ranks, but the world size is " + std::to_string(worldSize) +
         " (dp_replicate * dp_shard * cp * tp * pp must equal it)";
}

std::string checkExecutable(const Plan &p) {
  // Pipeline stages of context-parallel ranks, or of tp ranks with
  // sequence parallelism or the vocabulary-parallel loss: not combined yet.
  if (p.pp > 1 && p.cp > 1)
    return "plan '" + meshPlanName(p) + "': pp (pipeline parallel) with cp (context parallel) is "
           "not executable yet";
  if (p.pp > 1 && p.tp > 1 && (p.tpSp || p.lossParallel))
    return "plan '" + meshPlanName(p) + "': pp (pipeline parallel) with " +
           (p.tpSp ? "tp_sp=on (sequence parallel)" : "loss_parallel=on (vocabulary-parallel loss)") +
           " is not executable yet";
  return "";
}

} // namespace loom::planner
