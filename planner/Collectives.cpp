//===- Collectives.cpp ----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Collectives.h"

namespace loom::planner {

double allGatherTime(int n, double bytes, const Link &l) {
  if (n <= 1 || bytes <= 0)
    return 0;
  return (n - 1) * l.alpha + double(n - 1) / n * bytes / l.bandwidth;
}

double reduceScatterTime(int n, double bytes, const Link &l) {
  return allGatherTime(n, bytes, l); // same ring, same traffic
}

double allReduceTime(int n, double bytes, const Link &l) {
  return 2 * allGatherTime(n, bytes, l);
}

double sendRecvTime(double bytes, const Link &l) {
  if (bytes <= 0)
    return 0;
  return l.alpha + bytes / l.bandwidth;
}

double collectiveTime(CommKind kind, int n, double bytes, const Link &l) {
  switch (kind) {
  case CommKind::AllGather: return allGatherTime(n, bytes, l);
  case CommKind::ReduceScatter: return reduceScatterTime(n, bytes, l);
  case CommKind::AllReduce: return allReduceTime(n, bytes, l);
  case CommKind::SendRecv: return n > 1 ? sendRecvTime(bytes, l) : 0;
  }
  return 0;
}

bool groupInsideNode(int size, int stride, int gpusPerNode) {
  long span = long(size) * stride;
  return span <= gpusPerNode && gpusPerNode % span == 0;
}

const Link &groupLink(const HardwareProfile &hw, int size, int stride, int gpusPerNode) {
  return groupInsideNode(size, stride, gpusPerNode) ? hw.intraNode : hw.interNode;
}

} // namespace loom::planner
