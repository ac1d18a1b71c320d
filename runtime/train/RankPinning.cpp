//===- RankPinning.cpp ----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/RankPinning.h"
#include "loom/runtime/CpuAffinity.h"

#include <algorithm>

namespace loom::train {

bool parsePinRanks(const std::string &text, PinRanks &out, std::string &err) {
  if (text == "auto")
    out = PinRanks::Auto;
  else if (text == "on")
    out = PinRanks::On;
  else if (text == "off")
    out = PinRanks::Off;
  else {
    err = "--pin-ranks must be auto, on or off, not '" + text + "'";
    return false;
  }
  return true;
}

bool planRankPinning(PinRanks mode, int nproc, int threads, RankPinning &out, std::string &err) {
  out = RankPinning();
  if (mode == PinRanks::Off) {
    out.summary = "ranks not pinned (--pin-ranks off)";
    return true;
  }
  const char *flag = mode == PinRanks::On ? "on" : "auto";
  std::vector<rt::LogicalCpu> allowed;
  std::string why;
  rt::RankCpuSets sets;
  int perRank = std::max(1, (threads > 0 ? threads : 0) / std::max(1, nproc));
  bool ok = rt::readAllowedCpus(allowed, why);
  if (ok && threads <= 0)
    perRank = std::max(1, int(allowed.size()) / std::max(1, nproc));
  ok = ok && rt::partitionCpus(allowed, nproc, perRank, sets, why);
  if (!ok) {
    if (mode == PinRanks::On) {
      err = std::string("--pin-ranks on: ") + why;
      return false;
    }
    out.summary = std::string("ranks not pinned (--pin-ranks ") + flag + "): " + why;
    return true;
  }
  out.cpus = sets.ranks;
  out.threads = perRank * nproc;
  std::string list;
  for (size_t r = 0; r < sets.ranks.size(); ++r)
    list += (r ? ", rank " : "rank ") + std::to_string(r) + " on CPU" +
            (sets.ranks[r].size() > 1 ? "s " : " ") + rt::formatCpuList(sets.ranks[r]);
  out.summary = "pinned ranks (--pin-ranks " + std::string(flag) + "): " + list + " (" +
                (sets.wholeCores ? "a physical core per CPU" : "SMT siblings shared") + ", " +
                std::to_string(sets.nodes) + " memory node" + (sets.nodes == 1 ? "" : "s") +
                "; " + std::to_string(allowed.size()) + " CPUs allowed)";
  return true;
}

std::string describeRankCpus() {
  if (rt::pinnedRankCpus().empty())
    return "";
  return "rank CPUs: " + rt::formatCpuList(rt::currentThreadCpus()) + " (pinned by the launcher)";
}

} // namespace loom::train
