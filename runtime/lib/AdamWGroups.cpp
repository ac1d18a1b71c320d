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

struct Range {
  uint64_t from = 0, to = 0;
};

bool overlaps(Range a, Range b) { return a.from < b.to && b.from < a.to; }

/// What an instruction reads and writes, as arena byte ranges (constants
/// are never written, so they take no part).
struct Touches {
  std::vector<Range> reads, writes;
};

class Grouper {
public:
  explicit Grouper(const Program &p) : p_(p), touches_(p.instrs.size()) {
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      for (uint32_t id : p.instrs[i].in)
        if (Range r = range(id); r.to > r.from) touches_[i].reads.push_back(r);
      for (uint32_t id : p.instrs[i].out)
        if (Range r = range(id); r.to > r.from) touches_[i].writes.push_back(r);
    }
  }

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
  Range range(uint32_t id) const {
    const BufferDesc &b = p_.buffers[id];
    if (b.kind == BufferKind::Constant) return {};
    return {b.offset, b.offset + b.bytes};
  }

  static bool anyOverlap(const std::vector<Range> &a, const std::vector<Range> &b) {
    for (Range x : a)
      for (Range y : b)
        if (overlaps(x, y)) return true;
    return false;
  }

  /// Whether instruction j may move up to the group's first member and run
  /// beside its members.
  bool canJoin(const AdamWGroup &g, size_t j) const {
    const Touches &tj = touches_[j];
    size_t m = 1; // the next member after the first, walked along
    for (size_t k = g.members.front() + 1; k < j; ++k) {
      if (m < g.members.size() && g.members[m] == k) {
        ++m;
        continue;
      }
      const Touches &tk = touches_[k];
      if (anyOverlap(tk.writes, tj.reads) || anyOverlap(tk.writes, tj.writes) ||
          anyOverlap(tk.reads, tj.writes))
        return false;
    }
    for (size_t a : g.members) {
      const Touches &ta = touches_[a];
      if (anyOverlap(ta.writes, tj.reads) || anyOverlap(ta.writes, tj.writes) ||
          anyOverlap(ta.reads, tj.writes))
        return false;
    }
    return true;
  }

  const Program &p_;
  std::vector<Touches> touches_;
};

} // namespace

std::vector<AdamWGroup> smallAdamWGroups(const Program &p, int64_t maxElements) {
  for (const Instr &I : p.instrs)
    if (isCollectiveOp(I.op)) return {};
  return Grouper(p).run(maxElements);
}

} // namespace loom::rt
