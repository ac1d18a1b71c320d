//===- PartitionedReport.h - `loom plan --explain`'s per-rank IR costs -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// What the explained plan's own per-rank step says, as JSON and as text:
// its collectives (alpha-beta on the plan's links), each cp rank's
// attention work, and the rank program's buffers.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_IR_PARTITIONEDREPORT_H
#define LOOM_PLANNER_IR_PARTITIONEDREPORT_H

#include "loom/io/Json.h"
#include "loom/runtime/Program.h"
#include "planner/CostModel.h"
#include "planner/ir/PartitionedCost.h"

#include <ostream>

namespace loom::planner {

/// The rank program's buffers (name, shape, dtype, bytes, kind): what one
/// rank holds.
json::Value programBuffersJson(const rt::Program &p);

/// The collectives and the cp ranks' attention work as JSON.
json::Value partitionedJson(const PartitionedCost &c);

/// The same as text, after the plan's explanation.
void printPartitioned(std::ostream &os, const PartitionedCost &c);

/// `loom plan --explain`'s memory from the compiler's own per-rank program
/// of `chosen` (model at `path`): the cost model takes the rank's buffer
/// plan for it, `irCost` gets the costs read off the rank's IR and
/// `program` the rank's program. False with `err` when the compiler cannot
/// build it (the explanation then keeps the cost model's memory).
bool explainWithRankProgram(const std::string &path, const PlanRequest &req,
                            const HardwareProfile &hw, CostModel &cm, PlanEstimate &chosen,
                            PartitionedCost &irCost, rt::Program &program, std::string &err);

} // namespace loom::planner

#endif
