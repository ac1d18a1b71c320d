//===- StageBalance.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/StageBalance.h"

#include <algorithm>
#include <limits>

namespace loom::planner {

std::vector<int64_t> evenStageCuts(int layers, int stages) {
  std::vector<int64_t> cuts;
  if (stages < 2 || stages > layers)
    return cuts;
  int64_t base = layers / stages, extra = layers % stages, first = 0;
  for (int64_t k = 1; k < stages; ++k) {
    first += base + (k - 1 < extra);
    cuts.push_back(first);
  }
  return cuts;
}

std::vector<double> stageCostsOf(const std::vector<double> &groupCost,
                                 const std::vector<int64_t> &cuts) {
  int layers = int(groupCost.size()) - 2;
  std::vector<double> out(cuts.size() + 1, 0);
  if (layers < 0)
    return out;
  size_t s = 0;
  for (int l = 0; l < layers; ++l) {
    while (s < cuts.size() && l >= cuts[s]) ++s;
    out[s] += groupCost[size_t(l + 1)];
  }
  out.front() += groupCost.front();
  out.back() += groupCost.back();
  return out;
}

std::vector<int64_t> balanceStageCuts(const std::vector<double> &groupCost, int stages) {
  const int L = int(groupCost.size()) - 2;
  if (stages < 2 || L < stages)
    return {};
  const double embed = groupCost.front(), head = groupCost.back();
  // prefix[i]: the cost of layers 0..i-1.
  std::vector<double> prefix(size_t(L) + 1, 0);
  for (int i = 0; i < L; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + groupCost[size_t(i) + 1];
  auto stageCost = [&](int s, int a, int b) {
    return prefix[size_t(b)] - prefix[size_t(a)] + (s == 0 ? embed : 0) +
           (s == stages - 1 ? head : 0);
  };
  // best[s][b]: the least maximum over stages 0..s when they hold layers
  // 0..b-1 (each at least one layer); from[s][b]: where stage s begins.
  // O(stages x layers^2): a few million steps for 128 layers.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(size_t(stages), std::vector<double>(size_t(L) + 1, inf));
  std::vector<std::vector<int>> from(size_t(stages), std::vector<int>(size_t(L) + 1, 0));
  for (int b = 1; b <= L; ++b) best[0][size_t(b)] = stageCost(0, 0, b);
  for (int s = 1; s < stages; ++s)
    for (int b = s + 1; b <= L; ++b)
      for (int a = s; a < b; ++a) {
        double v = std::max(best[size_t(s - 1)][size_t(a)], stageCost(s, a, b));
        if (v < best[size_t(s)][size_t(b)]) {
          best[size_t(s)][size_t(b)] = v;
          from[size_t(s)][size_t(b)] = a;
        }
      }
  const double least = best[size_t(stages - 1)][size_t(L)];
  const double bound = least * (1 + 1e-9); // within rounding of the sums
  // The even split where it is as good: identical layers then keep the
  // split a user would expect.
  std::vector<int64_t> even = evenStageCuts(L, stages);
  std::vector<double> evenCosts = stageCostsOf(groupCost, even);
  if (*std::max_element(evenCosts.begin(), evenCosts.end()) <= bound)
    return even;
  // Among the splits whose every stage fits under that maximum, the one
  // with the least sum of squared stage costs: the other stages as even as
  // they can be too, so they wait least for the slowest (sq[s][b] like
  // best above; the first such split in the order of the loops).
  std::vector<std::vector<double>> sq(size_t(stages), std::vector<double>(size_t(L) + 1, inf));
  for (int b = 1; b <= L; ++b)
    if (double c = stageCost(0, 0, b); c <= bound)
      sq[0][size_t(b)] = c * c;
  for (int s = 1; s < stages; ++s)
    for (int b = s + 1; b <= L; ++b)
      for (int a = s; a < b; ++a) {
        double c = stageCost(s, a, b);
        if (c > bound)
          continue;
        double v = sq[size_t(s - 1)][size_t(a)] + c * c;
        if (v < sq[size_t(s)][size_t(b)]) {
          sq[size_t(s)][size_t(b)] = v;
          from[size_t(s)][size_t(b)] = a;
        }
      }
  std::vector<int64_t> cuts(size_t(stages - 1));
  int b = L;
  for (int s = stages - 1; s >= 1; --s) {
    b = from[size_t(s)][size_t(b)];
    cuts[size_t(s - 1)] = b;
  }
  return cuts;
}

std::string describeStageCuts(const std::vector<int64_t> &cuts, int layers) {
  if (cuts.empty())
    return "";
  std::string out;
  int64_t first = 0;
  for (size_t s = 0; s <= cuts.size(); ++s) {
    int64_t end = s < cuts.size() ? cuts[s] : layers;
    if (s)
      out += " | ";
    out += end - first == 1 ? std::to_string(first)
                            : std::to_string(first) + "-" + std::to_string(end - 1);
    first = end;
  }
  return out;
}

std::string ppSplitSpelling(const std::vector<int64_t> &cuts) {
  std::string out;
  for (size_t i = 0; i < cuts.size(); ++i) out += (i ? "," : "") + std::to_string(cuts[i]);
  return out;
}

} // namespace loom::planner
