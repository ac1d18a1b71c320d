//===- PipelineStageCosts.h - loom train --stage-costs-out ------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// After a pipeline run, the per-stage costs it measured as a stage-cost
// profile (loom/runtime/PipelineProfile.h) for `loom plan --stage-costs`.
// Meant for a run of the plan's unpipelined schedule (`loom schedule
// --serial --csv`, then `--plan pp=...,pp_schedule=FILE.csv`), whose
// actions never overlap another rank's and whose receives always wait for
// their send, so the medians are the stages' and the transfers' own times.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_PIPELINESTAGECOSTS_H
#define LOOM_TOOLS_PIPELINESTAGECOSTS_H

#include "StepRunner.h"

#include <string>

namespace loom::tools {

/// The CPU threads each of `localRanks` ranks of this host runs with
/// under --threads `threads` (0: all), as the pipeline runners split them.
int stageThreadsPerRank(int threads, int localRanks);

/// Writes the profile of the steps after the first to `path`; `transport`
/// names the communicator ("socket", "in-process"), `threadsPerRank` the
/// CPU threads each rank ran with. False with a one-line `err`.
bool writeStageCosts(const TrainProgram &tp, const StepRunner &r, const std::string &backend,
                     const std::string &transport, int threadsPerRank, const std::string &path,
                     std::string &err);

} // namespace loom::tools

#endif
