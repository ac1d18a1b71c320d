//===- CpuAffinity.cpp ----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/CpuAffinity.h"
#include "lib/Diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <map>
#include <sched.h>
#include <set>
#include <tuple>

namespace loom::rt {

namespace {

/// An integer from a one-line sysfs file; `fallback` when it is missing.
int readSysInt(const std::string &path, int fallback) {
  std::ifstream in(path);
  int v = fallback;
  if (!(in >> v))
    return fallback;
  return v;
}

/// The memory node of CPU `id`: sysfs links cpuN/nodeM when the kernel
/// knows NUMA; node 0 otherwise.
int nodeOf(int id) {
  std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(id);
  DIR *d = opendir(dir.c_str());
  if (!d)
    return 0;
  int node = 0;
  while (dirent *e = readdir(d)) {
    const char *n = e->d_name;
    if (std::strncmp(n, "node", 4) == 0 && n[4] >= '0' && n[4] <= '9') {
      node = std::atoi(n + 4);
      break;
    }
  }
  closedir(d);
  return node;
}

/// A physical core: its SMT siblings, ascending.
struct Core {
  int node = 0, package = 0, core = 0;
  std::vector<int> cpus;
};

/// The allowed CPUs grouped into physical cores, ordered by memory node,
/// package and core, so that neighbours in the list share a node.
std::vector<Core> physicalCores(const std::vector<LogicalCpu> &allowed) {
  std::map<std::tuple<int, int, int>, Core> byKey; // (node, package, core)
  for (const LogicalCpu &c : allowed) {
    Core &core = byKey[{c.node, c.package, c.core}];
    core.node = c.node, core.package = c.package, core.core = c.core;
    core.cpus.push_back(c.id);
  }
  std::vector<Core> cores;
  for (auto &[key, core] : byKey) {
    std::sort(core.cpus.begin(), core.cpus.end());
    cores.push_back(std::move(core));
  }
  return cores;
}

cpu_set_t maskOf(const std::vector<int> &cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE)
      CPU_SET(c, &set);
  return set;
}

} // namespace

bool readAllowedCpus(std::vector<LogicalCpu> &cpus, std::string &err) {
  cpus.clear();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    err = cat("cannot read this process's CPU affinity: ", std::strerror(errno));
    return false;
  }
  for (int id = 0; id < CPU_SETSIZE; ++id) {
    if (!CPU_ISSET(id, &set))
      continue;
    std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(id) + "/topology/";
    LogicalCpu c;
    c.id = id;
    c.package = readSysInt(topo + "physical_package_id", 0);
    // Without topology a CPU is a core of its own: a negative id cannot
    // collide with a real core's.
    c.core = readSysInt(topo + "core_id", -1 - id);
    c.node = nodeOf(id);
    cpus.push_back(c);
  }
  return true;
}

bool partitionCpus(const std::vector<LogicalCpu> &allowed, int ranks, int perRank,
                   RankCpuSets &out, std::string &err) {
  out = RankCpuSets();
  if (ranks < 1 || perRank < 1) {
    err = cat("cannot pin ", ranks, " ranks of ", perRank, " threads each");
    return false;
  }
  std::vector<int> ids;
  for (const LogicalCpu &c : allowed) ids.push_back(c.id);
  std::sort(ids.begin(), ids.end());
  size_t need = size_t(ranks) * size_t(perRank);
  if (ids.size() < need) {
    err = cat("pinning ", ranks, " ranks x ", perRank, perRank == 1 ? " thread" : " threads",
              " needs ", need,
              " CPUs; this process may run on ", ids.size(), " (", formatCpuList(ids), ")");
    return false;
  }
  std::vector<Core> cores = physicalCores(allowed);
  std::map<int, int> nodeOfCpu;
  for (const LogicalCpu &c : allowed) nodeOfCpu[c.id] = c.node;
  out.ranks.assign(size_t(ranks), {});
  if (cores.size() >= need) {
    // One CPU per physical core. A rank's cores come from the first node
    // with enough left (its memory then stays local); else the first ones
    // left anywhere.
    out.wholeCores = true;
    std::vector<bool> used(cores.size(), false);
    for (auto &set : out.ranks) {
      std::vector<size_t> pick;
      for (size_t k = 0; k < cores.size() && pick.size() < size_t(perRank); ++k) {
        if (used[k])
          continue;
        if (!pick.empty() && cores[k].node != cores[pick[0]].node)
          pick.clear(); // this node had too few; start again in the next
        pick.push_back(k);
      }
      if (pick.size() < size_t(perRank)) { // no node has enough: take any
        pick.clear();
        for (size_t k = 0; k < cores.size() && pick.size() < size_t(perRank); ++k)
          if (!used[k])
            pick.push_back(k);
      }
      for (size_t k : pick) {
        used[k] = true;
        set.push_back(cores[k].cpus[0]);
      }
    }
  } else {
    // SMT siblings too, in core order: a core's siblings land in one rank
    // unless a rank's count splits them.
    std::vector<int> order;
    for (const Core &c : cores) order.insert(order.end(), c.cpus.begin(), c.cpus.end());
    for (size_t r = 0; r < out.ranks.size(); ++r)
      out.ranks[r].assign(order.begin() + long(r * size_t(perRank)),
                          order.begin() + long((r + 1) * size_t(perRank)));
  }
  std::set<int> nodes;
  for (auto &set : out.ranks) {
    std::sort(set.begin(), set.end());
    for (int c : set) nodes.insert(nodeOfCpu[c]);
  }
  out.nodes = int(nodes.size());
  return true;
}

std::string formatCpuList(const std::vector<int> &cpus) {
  std::vector<int> s = cpus;
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j + 1 < s.size() && s[j + 1] == s[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(s[i]);
    if (j > i)
      out += "-" + std::to_string(s[j]);
    i = j + 1;
  }
  return out;
}

bool parseCpuList(const std::string &text, std::vector<int> &cpus, std::string &err) {
  cpus.clear();
  auto bad = [&] {
    err = "'" + text + "' is not a CPU list such as 0-3,8";
    cpus.clear();
    return false;
  };
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t dash = item.find('-');
    char *end = nullptr;
    long lo = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || end == item.c_str())
      return bad();
    long hi = lo;
    if (dash != std::string::npos) {
      if (end != item.c_str() + dash)
        return bad();
      const char *h = item.c_str() + dash + 1;
      hi = std::strtol(h, &end, 10);
      if (end == h)
        return bad();
    }
    if (*end || lo < 0 || hi < lo || hi >= CPU_SETSIZE)
      return bad();
    for (long c = lo; c <= hi; ++c) cpus.push_back(int(c));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
    if (at == text.size())
      return bad(); // a trailing comma
  }
  if (cpus.empty())
    return bad();
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return true;
}

bool pinCurrentThread(const std::vector<int> &cpus, std::string &err) {
  cpu_set_t set = maskOf(cpus);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    err = cat("cannot pin to CPUs ", formatCpuList(cpus), ": ", std::strerror(errno));
    return false;
  }
  return true;
}

std::vector<int> currentThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set))
      out.push_back(c);
  return out;
}

const std::vector<int> &pinnedRankCpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> out;
    std::string err;
    const char *v = std::getenv(kRankCpusVar);
    if (v && *v && !parseCpuList(v, out, err))
      out.clear();
    return out;
  }();
  return cpus;
}

} // namespace loom::rt
