//===- CpuAffinity.h - Disjoint CPU sets for the local ranks -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A pipeline's bubble is predicted from stage costs measured in one run
// and compared with the idle time of another. On a many-core host the two
// agree only when every rank computes at the same speed in both, and an
// unpinned rank does not: the kernel moves its threads between cores, onto
// a core whose SMT sibling runs the other rank, or away from the memory
// node its buffers were first touched on. So the launcher (loom train
// --nproc) gives each rank a disjoint set of CPUs, the same in every run,
// preferring whole physical cores within one memory node, and a rank's
// CPU thread pool puts one thread on each CPU of its set.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPUAFFINITY_H
#define LOOM_RUNTIME_CPUAFFINITY_H

#include <string>
#include <vector>

namespace loom::rt {

/// A logical CPU and where it sits: SMT siblings share (package, core).
struct LogicalCpu {
  int id = 0;
  int package = 0;
  int core = 0;
  int node = 0; // memory (NUMA) node
};

/// The CPUs this process may run on (its affinity mask, e.g. under
/// taskset), with their topology from /sys/devices/system/cpu; a CPU whose
/// topology sysfs lacks counts as its own core on node 0.
bool readAllowedCpus(std::vector<LogicalCpu> &cpus, std::string &err);

/// Each rank's CPUs, disjoint.
struct RankCpuSets {
  std::vector<std::vector<int>> ranks; // logical CPU ids per rank
  /// Every CPU handed out is on a physical core of its own (its SMT
  /// siblings stay idle), so no two threads of the job share a core.
  bool wholeCores = false;
  int nodes = 0; // memory nodes the sets span
};

/// Splits `allowed` into `ranks` sets of `perRank` CPUs. With at least
/// ranks x perRank physical cores, each CPU is the first thread of its own
/// core, and a rank's cores come from one memory node where one has enough;
/// otherwise SMT siblings are used, a core's siblings kept in one rank where
/// the counts allow. False, with a one-line error naming the counts, when
/// there are fewer than ranks x perRank CPUs.
bool partitionCpus(const std::vector<LogicalCpu> &allowed, int ranks, int perRank,
                   RankCpuSets &out, std::string &err);

/// "0-3,8,10-11".
std::string formatCpuList(const std::vector<int> &cpus);
/// Parses formatCpuList's form (sorted or not); false with an error naming
/// the text.
bool parseCpuList(const std::string &text, std::vector<int> &cpus, std::string &err);

/// Restricts the calling thread (and threads it starts later) to `cpus`.
bool pinCurrentThread(const std::vector<int> &cpus, std::string &err);
/// The calling thread's affinity mask, ascending.
std::vector<int> currentThreadCpus();

/// The variable through which the launcher tells a rank its CPU set.
constexpr const char *kRankCpusVar = "LOOM_RANK_CPUS";
/// This process's CPU set from LOOM_RANK_CPUS; empty when the launcher did
/// not pin it (or the value does not parse: then nothing is pinned).
const std::vector<int> &pinnedRankCpus();

} // namespace loom::rt

#endif
