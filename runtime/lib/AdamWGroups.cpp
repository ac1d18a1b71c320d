//===- AdamWGroups.cpp - Small AdamW instructions launched together -------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/AdamWGroups.h"
#include "loom/runtime/Communicator.h"
#include "loom/runtime/RoundedCopies.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace loom::rt {
namespace {

class Grouper {
public:
  explicit Grouper(const Program &p) : p_(p) {}

  std::vector<AdamWGroup> run(int64_t maxElements) {
    // The group each key has open: floats, lr, step and scale (or none).
    using Key = std::tuple<std::vector<double>, uint32_t, uint32_t, uint32_t>;
    std::map<Key, size_t> open;
    std::vector<AdamWGroup> groups;
    for (size_t j = 0; j < p_.instrs.size(); ++j) {
      const Instr &I = p_.instrs[j];
      if (I.op != OpCode::AdamW || adamwKeepsAmax(I) || I.in.size() < 6 ||
          p_.buffers[I.in[0]].numElements() > maxElements)
        continue;
      Key key{I.floats, I.in[4], I.in[5], I.in.size() > 6 ? I.in[6] : UINT32_MAX};
      auto it = open.find(key);
      if (it != open.end() && canJoin(groups[it->second], j)) {
        groups[it->second].members.push_back(j);
        continue;
      }
      groups.push_back({{j}});
      open[key] = groups.size() - 1;
    }
    groups.erase(std::remove_if(groups.begin(), groups.end(),
                                [](const AdamWGroup &g) { return g.members.size() < 2; }),
                 groups.end());
    return groups;
  }

private:
  bool anyOverlap(const std::vector<uint32_t> &a, const std::vector<uint32_t> &b) const {
    for (uint32_t x : a)
      for (uint32_t y : b)
        if (buffersOverlap(p_.buffers[x], p_.buffers[y])) return true;
    return false;
  }

  /// Whether instructions a and b may not swap or run side by side: one
  /// writes bytes the other reads or writes (arena bytes, buffersOverlap).
  bool conflict(size_t a, size_t b) const {
    const Instr &A = p_.instrs[a], &B = p_.instrs[b];
    return anyOverlap(A.out, B.in) || anyOverlap(A.out, B.out) || anyOverlap(A.in, B.out);
  }

  /// Whether instruction j may move up to the group's first member (past
  /// every other instruction in between) and run beside its members.
  bool canJoin(const AdamWGroup &g, size_t j) const {
    size_t m = 1; // the next member after the first, walked along
    for (size_t k = g.members.front() + 1; k < j; ++k) {
      if (m < g.members.size() && g.members[m] == k) {
        ++m;
        continue;
      }
      if (conflict(k, j))
        return false;
    }
    for (size_t a : g.members)
      if (conflict(a, j))
        return false;
    return true;
  }

  const Program &p_;
};

} // namespace

std::vector<AdamWGroup> smallAdamWGroups(const Program &p, int64_t maxElements) {
  for (const Instr &I : p.instrs)
    if (isCollectiveOp(I.op)) return {};
  return Grouper(p).run(maxElements);
}

} // namespace loom::rt
