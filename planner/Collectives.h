//===- Collectives.h - Alpha-beta cost of NCCL-style collectives -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Ring algorithms over n ranks, each link costing alpha + bytes / bandwidth
// per step:
//   all-gather / reduce-scatter of a B-byte (full) tensor:
//       (n-1) alpha + (n-1)/n * B / bw
//   all-reduce = reduce-scatter + all-gather:
//       2 (n-1) alpha + 2 (n-1)/n * B / bw
//   send/recv (pipeline, context-parallel ring step): alpha + B / bw
// Which link a group uses follows from where its ranks sit: the device mesh
// is [pp, dp_replicate, dp_shard, cp, tp] with tp innermost, so a group of
// `size` ranks `stride` apart stays inside a node when size * stride fits
// in (and divides) the GPUs of a node, and otherwise crosses the network,
// whose per-GPU bandwidth then bounds the ring.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_COLLECTIVES_H
#define LOOM_PLANNER_COLLECTIVES_H

#include "planner/HardwareProfile.h"
#include "planner/ModelCost.h"

namespace loom::planner {

double allGatherTime(int ranks, double bytes, const Link &link);
double reduceScatterTime(int ranks, double bytes, const Link &link);
double allReduceTime(int ranks, double bytes, const Link &link);
double sendRecvTime(double bytes, const Link &link);
double collectiveTime(CommKind kind, int ranks, double bytes, const Link &link);

/// Whether a group of `size` ranks, `stride` apart, stays inside one node.
bool groupInsideNode(int size, int stride, int gpusPerNode);

/// The link a group uses (intra-node when it fits a node).
const Link &groupLink(const HardwareProfile &hw, int size, int stride, int gpusPerNode);

} // namespace loom::planner

#endif
