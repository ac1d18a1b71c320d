//===- PipelineRunner.h - Training steps of a pipeline plan -----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// StepRunners for pipeline plans (TrainProgram::pipeline): every rank's
// rt::PipelineRank on a thread of this process (simulated ranks, an
// InProcessCommunicator), or this process's one rank (--nproc, torchrun:
// a SocketCommunicator). Rank r = pp_r * (R S T) + (r_replicate S +
// r_shard) T + r_tp holds the parameters of its pipeline rank's stages,
// sliced as RankSlices.h slices them; data-parallel rank d takes rows
// [d B/dp, (d+1) B/dp) of the global batch, microbatch i the i-th block of
// those. The step's loss is the mean of the microbatches' losses; full
// tensors (gradients, checkpoints) come from the lowest pipeline rank that
// holds each parameter.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_PIPELINERUNNER_H
#define LOOM_TRAIN_PIPELINERUNNER_H

#include "loom/train/StepRunner.h"
#include "loom/runtime/PipelineExecutor.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::train {

std::unique_ptr<StepRunner> createPipelineRunner(const TrainProgram &tp, int threads,
                                                 const std::string &backend, std::string &err);

std::unique_ptr<StepRunner> createDistributedPipelineRunner(const TrainProgram &tp, int threads,
                                                            const std::string &backend,
                                                            std::unique_ptr<rt::Rendezvous> rv,
                                                            int localRanks,
                                                            double collectiveTimeoutS,
                                                            std::string &err);

/// What the schedule executors recorded, per step and rank (with one
/// process per rank, gathered on rank 0).
struct PipelineStats {
  struct Rank {
    std::vector<rt::ActionTiming> timings; // seconds on the host's steady clock
    uint64_t peakActivationBytes = 0;
    uint64_t peakBufferBytes = 0; // simulated ranks only (PipelineStepResult)
  };
  std::vector<std::vector<Rank>> steps; // [step][world rank]
};

/// The stats of a pipeline runner (null for other runners).
const PipelineStats *pipelineStats(const StepRunner &r);

/// Parameter, gradient and optimizer bytes of world rank 0 (what
/// StepRunner::perRank reports for pipeline plans).
RankMemory pipelineRankMemory(const TrainProgram &tp);

/// Chrome tracing JSON (chrome://tracing, Perfetto) of the recorded steps:
/// one track per rank, one slice per action, times in microseconds from
/// the first step's start.
std::string pipelineTraceJson(const TrainProgram &tp, const PipelineStats &stats);

/// Measured idle fraction per world rank over `steps` (skipping the first,
/// which pays for warm-up): 1 - (time in compute actions) / (the span of
/// the step's schedule, first action start to last action end over all
/// ranks; the optimizer excluded).
std::vector<double> measuredIdleFraction(const TrainProgram &tp, const PipelineStats &stats);

/// After training: each rank's measured idle fraction beside the
/// schedule's own timeline with this run's mean action times and, for
/// GPipe and 1F1B, (P - 1) / (M + P - 1); the peak of saved activations
/// each rank held beside the schedule's prediction from the programs'
/// saved bytes; and, with `tracePath`, the chrome-tracing file.
bool reportPipelineRun(const TrainProgram &tp, const StepRunner &r, const std::string &tracePath,
                       std::string &err);

} // namespace loom::train

#endif
