//===- RecomputeFlags.cpp -------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/RecomputeFlags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace loom::compiler {

bool readRecomputeFlags(const std::string &ac, const std::string &layers,
                        const std::string &memoryBudget, const std::string &backend,
                        TrainOptions &o, std::string &err) {
  o.ac = ac;
  if (o.ac != "none" && o.ac != "full" && o.ac != "selective" && o.ac != "budget") {
    err = "--ac must be none, full, selective or budget, not '" + o.ac + "'";
    return false;
  }
  const std::string key = "every=";
  char *end = nullptr;
  long long every = layers.rfind(key, 0) == 0 ? std::strtoll(layers.c_str() + key.size(), &end, 10) : 0;
  if (layers.rfind(key, 0) != 0 || end == layers.c_str() + key.size() || *end || every < 1) {
    err = "--ac-layers must be every=N with N >= 1, not '" + layers + "'";
    return false;
  }
  o.acEvery = every;
  if (o.ac == "budget") {
    if (memoryBudget.empty()) {
      err = "--ac budget needs --ac-memory-budget GiB";
      return false;
    }
    o.acMemoryBudgetGiB = std::strtod(memoryBudget.c_str(), nullptr);
    if (!(o.acMemoryBudgetGiB > 0) || !std::isfinite(o.acMemoryBudgetGiB)) {
      err = "--ac-memory-budget must be a positive number of GiB, not '" +
            memoryBudget + "'";
      return false;
    }
  } else if (!memoryBudget.empty()) {
    err = "--ac-memory-budget is for --ac budget (here --ac " + o.ac + ")";
    return false;
  }
  o.acBackend = backend;
  return true;
}

std::string recomputeSummary(const TrainOptions &o, const TrainProgram &tp) {
  if (o.ac == "none")
    return "";
  std::map<std::string, int> byOp;
  for (const std::string &op : tp.recomputedOps) ++byOp[op];
  std::vector<std::pair<int, std::string>> counts;
  for (auto &[op, n] : byOp) counts.push_back({n, op});
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto &a, const auto &b) { return a.first > b.first; });
  std::string s = "recompute: --ac " + o.ac;
  if (o.ac == "budget") {
    char buf[48];
    std::snprintf(buf, sizeof buf, " %.3f GiB", o.acMemoryBudgetGiB);
    s += buf;
  }
  s += o.acEvery == 1 ? " (every layer)" : " (one layer in every " + std::to_string(o.acEvery) + ")";
  s += ": the backward re-runs " + std::to_string(tp.recomputedOps.size()) + " forward ops";
  for (size_t i = 0; i < counts.size(); ++i)
    s += (i ? ", " : " (") + std::to_string(counts[i].first) + " " + counts[i].second +
         (i + 1 == counts.size() ? ")" : "");
  return s + "\n";
}

} // namespace loom::compiler
