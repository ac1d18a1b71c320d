//===- PipelineProfile.h - Measured stage costs of a pipeline ---*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// What a pipeline schedule's timeline needs from the machine that runs it:
// per stage, how long its forward and backward (or input and weight
// gradient) take for one microbatch, and how long a transfer takes from
// the sender posting it to the receiver holding the data.
//
// They are measured on an unpipelined run (serialSchedule): every
// microbatch passes every stage one action at a time, so no action shares
// the machine with another rank's and every receive is already waiting
// when its send is posted. The medians of those durations are written as a
// stage-cost profile (JSON) that `loom plan --stage-costs` times the
// plan's schedule with (planner/CostModel.cpp), in place of the hardware
// profile's model of the stages: the prediction then describes the
// machine, backend and transport the run used (docs/planner.md).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_PIPELINEPROFILE_H
#define LOOM_RUNTIME_PIPELINEPROFILE_H

#include "loom/runtime/PipelineExecutor.h"
#include "loom/runtime/PipelineSchedule.h"

#include <string>
#include <vector>

namespace loom::rt {

/// The unpipelined counterpart of `s`: the same ranks, stages, stage
/// placement and backward (B, or I and W), run one microbatch at a time:
/// the forwards of stages 0..N-1, then the backwards of N-1..0 (each I
/// followed by its W), a transfer wherever consecutive stages live on
/// different ranks. A gradient is sent after its stage's W, so no two
/// ranks ever compute at once.
PipelineSchedule serialSchedule(const PipelineSchedule &s);

/// Timings of one step: per world rank, what PipelineRank::runStep
/// recorded (world rank r runs pipeline rank r / ranksPerStage).
using StepTimings = std::vector<std::vector<ActionTiming>>;

/// Per stage of `s`, the median seconds of each compute kind over `steps`
/// and every rank running the stage, and the median transfer time of the
/// stage's sends: from the sender posting it (its transfer group's start)
/// to the matching receive's group ending on the peer (the clocks must be
/// one clock, as on one host). A stage without a measured send takes the
/// median over all sends. False with `err` when a kind the schedule runs
/// has no sample.
bool measureStageCosts(const PipelineSchedule &s, int ranksPerStage,
                       const std::vector<StepTimings> &steps, std::vector<StageCost> &out,
                       std::string &err);

/// A stage-cost profile: the measured costs and what they are valid for.
struct StageCostProfile {
  std::string source;    // what measured it (schedule, host, date)
  std::string backend;   // "cpu"
  std::string transport; // "socket", "in-process"
  int ranks = 1;         // pp
  int stages = 1;        // pp * virtual stages
  bool splitBackward = false;
  int64_t microbatchRows = 1, seq = 1;
  int tp = 1, dpShard = 1, dpReplicate = 1;
  int threadsPerRank = 1;
  int steps = 0; // steps the medians are over
  // The first layer of stages 1.. the run was cut at ("cuts"; empty: the
  // even split). The planner times a plan with a profile only when its
  // own cuts for that plan are these.
  std::vector<int64_t> cuts;
  std::vector<StageCost> costs; // seconds; activationBytes unused
};

/// JSON text of `p` ("format": "loom-stage-costs", version 1).
std::string stageCostProfileJson(const StageCostProfile &p);
/// Reads a profile; false with a one-line `err` naming `path` and the
/// missing or bad field.
bool parseStageCostProfile(const std::string &text, const std::string &path,
                           StageCostProfile &out, std::string &err);

} // namespace loom::rt

#endif
