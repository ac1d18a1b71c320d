//===- PartitionedReport.cpp ----------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/ir/PartitionedReport.h"
#include "planner/ir/IrCost.h"

#include <algorithm>
#include <cstdio>

namespace loom::planner {

json::Value programBuffersJson(const rt::Program &p) {
  json::Value list = json::Value::array();
  for (const rt::BufferDesc &b : p.buffers) {
    json::Value shape = json::Value::array();
    for (int64_t d : b.shape) shape.push(json::Value(double(d)));
    json::Value o = json::Value::object();
    o.set("name", json::Value(b.name));
    o.set("shape", shape);
    o.set("dtype", json::Value(std::string(rt::dtypeName(b.dtype))));
    o.set("bytes", json::Value(double(b.bytes)));
    o.set("kind", json::Value(b.kind == rt::BufferKind::Constant ? "constant"
                              : b.kind == rt::BufferKind::Input ? "input"
                              : b.kind == rt::BufferKind::Output ? "output"
                                                                 : "temp"));
    list.push(o);
  }
  return list;
}

json::Value partitionedJson(const PartitionedCost &c) {
  json::Value o = json::Value::object(), list = json::Value::array();
  for (const IrCollective &k : c.collectives) {
    json::Value v = json::Value::object();
    v.set("op", json::Value(k.op));
    v.set("axes", json::Value(k.axes));
    v.set("ranks", json::Value(k.ranks));
    v.set("link", json::Value(k.link));
    v.set("bytes", json::Value(k.bytes));
    v.set("count", json::Value(k.count));
    v.set("seconds", json::Value(k.seconds));
    list.push(v);
  }
  o.set("collectives", list);
  o.set("comm_seconds", json::Value(c.commSeconds));
  json::Value ranks = json::Value::array();
  for (const CpRankAttention &r : c.cpRanks) {
    json::Value v = json::Value::object();
    v.set("forward", json::Value(r.forward));
    v.set("forward_visible", json::Value(r.forwardVisible));
    v.set("backward", json::Value(r.backward));
    v.set("backward_visible", json::Value(r.backwardVisible));
    ranks.push(v);
  }
  o.set("attention_per_cp_rank", ranks);
  return o;
}

/// The per-rank step's own collectives and, under cp, each cp rank's
/// attention work.
void printPartitioned(std::ostream &os, const PartitionedCost &c) {
  char line[256];
  os << "\ncollectives of one rank's step, read off its partitioned IR (alpha-beta on the plan's "
        "links, none overlapped):\n";
  std::snprintf(line, sizeof line, "  %-20s %-20s %5s %-10s %12s %6s %12s\n", "op", "axes",
                "ranks", "link", "bytes/call", "calls", "ms/step");
  os << line;
  for (const IrCollective &k : c.collectives) {
    std::snprintf(line, sizeof line, "  %-20s %-20s %5d %-10s %12.0f %6d %12.4f\n", k.op.c_str(),
                  k.axes.c_str(), k.ranks, k.link.c_str(), k.bytes, k.count,
                  k.seconds * k.count * 1e3);
    os << line;
  }
  std::snprintf(line, sizeof line, "  total %.4f ms per step\n", c.commSeconds * 1e3);
  os << line;
  if (c.cpRanks.empty())
    return;
  os << "attention work per cp rank (query-key pairs x batch x query heads its attention ops "
        "compute; visible: not masked by causality):\n";
  double lo = 0, hi = 0;
  for (size_t r = 0; r < c.cpRanks.size(); ++r) {
    const CpRankAttention &a = c.cpRanks[r];
    double total = a.forward + a.backward;
    lo = r ? std::min(lo, total) : total;
    hi = r ? std::max(hi, total) : total;
    std::snprintf(line, sizeof line,
                  "  cp rank %zu: forward %.0f (visible %.0f), backward %.0f (visible %.0f)\n", r,
                  a.forward, a.forwardVisible, a.backward, a.backwardVisible);
    os << line;
  }
  std::snprintf(line, sizeof line, "  balance: max / min over cp ranks %.4f\n", lo > 0 ? hi / lo : 0.0);
  os << line;
}

bool explainWithRankProgram(const std::string &path, const PlanRequest &req,
                            const HardwareProfile &hw, CostModel &cm, PlanEstimate &chosen,
                            PartitionedCost &irCost, rt::Program &program, std::string &err) {
  MemoryBreakdown rankMem;
  RankIrCosts irCosts;
  irCosts.partitioned = &irCost;
  irCosts.hw = &hw;
  irCosts.gpusPerNode = req.gpusPerNode;
  if (!rankBufferPlan(path, req.microbatch, req.seq, chosen.plan, rankMem, err, &program, irCosts))
    return false;
  cm.useRankBufferPlan(chosen, rankMem);
  return true;
}

} // namespace loom::planner
