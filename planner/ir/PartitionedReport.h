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

} // namespace loom::planner

#endif
