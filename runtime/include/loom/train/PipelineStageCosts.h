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
#ifndef LOOM_TRAIN_PIPELINESTAGECOSTS_H
#define LOOM_TRAIN_PIPELINESTAGECOSTS_H

#include "loom/train/StepRunner.h"

#include <string>

namespace loom::train {

/// The CPU threads each of `localRanks` ranks of this host runs with
/// under --threads `threads` (0: all), as the pipeline runners split them.
int stageThreadsPerRank(int threads, int localRanks);

/// Writes the profile of the steps after the first to `path`, naming the
/// communicator (sockets between processes, or in-process) and the CPU
/// threads each rank ran with (--threads `threads`, 0: all). False with a
/// one-line `err`.
bool writeStageCosts(const TrainProgram &tp, const StepRunner &r, const std::string &backend,
                     bool multiProcess, int threads, const std::string &path, std::string &err);

} // namespace loom::train

#endif
