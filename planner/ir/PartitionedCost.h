//===- PartitionedCost.h - Costs read off a plan's partitioned IR -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// For a plan the compiler builds per rank (data, context, tensor, sequence
// and loss parallelism), what one rank's @train_step itself says: every
// collective it runs (kind, mesh axes, ranks, bytes, count per step) with
// its alpha-beta time on the plan's links, and, under context parallelism,
// the attention work of each cp rank: the query-key pairs its attention
// ops compute and the pairs a causal mask lets through, found by following
// each rank's sequence chunks through the expanded attention (ring shifts,
// all-gathers and per-rank picks) in the IR.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_IR_PARTITIONEDCOST_H
#define LOOM_PLANNER_IR_PARTITIONEDCOST_H

#include "planner/HardwareProfile.h"
#include "planner/Plan.h"

#include <string>
#include <vector>

namespace loom::planner {

struct IrCollective {
  std::string op;    // all_reduce, all_gather, reduce_scatter, collective_permute
  std::string axes;  // "cp", "tp", "dp_shard,cp", ...
  int ranks = 1;     // in its group
  std::string link;  // the link the group uses
  double bytes = 0;  // per call (the whole tensor for gathers and scatters)
  int count = 0;     // calls per step
  double seconds = 0; // per call
};

/// Query-key pairs (times batch and query heads) of one cp rank's
/// attention ops: what they compute and what a causal mask lets through.
struct CpRankAttention {
  double forward = 0, forwardVisible = 0;
  double backward = 0, backwardVisible = 0;
};

struct PartitionedCost {
  std::vector<IrCollective> collectives;
  double commSeconds = 0;               // every collective once per step, none overlapped
  std::vector<CpRankAttention> cpRanks; // per cp rank; empty without cp
};

bool partitionedCost(const std::string &path, int64_t microbatch, int64_t seq, const Plan &plan,
                     const HardwareProfile &hw, int gpusPerNode, PartitionedCost &out,
                     std::string &err);

} // namespace loom::planner

#endif
