//===- RankPinning.h - Which CPUs each local rank runs on -------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// `loom train --nproc N --pin-ranks auto|on|off`: before it starts the
// ranks, the launcher splits the CPUs it may use (its affinity mask) into
// N disjoint sets (rt::partitionCpus), one per rank, the same in every run
// with the same mask, N and --threads. A pipeline's stage costs measured
// by one run (--stage-costs-out) then describe the speed the ranks of
// another run have (docs/planner.md, "Measuring the bubble").
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_RANKPINNING_H
#define LOOM_TRAIN_RANKPINNING_H

#include <string>
#include <vector>

namespace loom::train {

enum class PinRanks {
  Auto, // pin when the CPUs suffice, else run unpinned and say why
  On,   // pin, or refuse the job
  Off,  // leave placement to the kernel
};

/// "auto", "on" or "off"; false with an error naming the value.
bool parsePinRanks(const std::string &text, PinRanks &out, std::string &err);

struct RankPinning {
  std::vector<std::vector<int>> cpus; // per rank; empty: the ranks are not pinned
  /// The ranks' --threads (all local ranks together) when pinned: with
  /// --threads 0 each rank gets its share of the allowed CPUs, not of the
  /// host's (a rank cannot see the launcher's mask).
  int threads = 0;
  std::string summary; // one line for the launcher to print
};

/// Places `nproc` ranks that run `threads` CPU threads in all (0: the CPUs
/// this process may use; each rank max(1, threads / nproc), as the runners
/// compute it). With On and too few CPUs, false with a one-line error.
bool planRankPinning(PinRanks mode, int nproc, int threads, RankPinning &out, std::string &err);

/// In a rank the launcher pinned: "rank CPUs: 3 (pinned by the launcher)",
/// from the affinity the rank really has; "" in a process it did not pin.
std::string describeRankCpus();

} // namespace loom::train

#endif
