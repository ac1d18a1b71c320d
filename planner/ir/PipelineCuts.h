//===- PipelineCuts.h - loom train's stage cuts, as the planner sees them -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A pipeline plan's layers are cut where `loom plan` priced them: the
// cost model's per-layer time (CostModel::stageCuts), with the embedding
// in the first stage and the head and loss in the last. `loom train` and
// `loom verify` resolve --pp-split through here before compiling, so the
// stages that run are the stages the planner predicted, and a measured
// stage-cost profile records them.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_IR_PIPELINECUTS_H
#define LOOM_PLANNER_IR_PIPELINECUTS_H

#include "compiler/CompileTrainStep.h"

#include <string>

namespace loom::planner {

/// For a pipeline plan (o.pipeline.pp > 1), turns o.ppSplit into the
/// layers that begin stages 1..: "", "balanced" or "balanced:PROFILE" take
/// the planner's cuts for the model at each microbatch's rows (`batch`
/// split over the data-parallel ranks and the microbatches) and `seq`,
/// costed on the shipped h100 profile (or PROFILE: h100, h200 or a
/// profile JSON such as `loom calibrate` writes); "even" keeps
/// the pass's even split (o.ppSplit becomes ""); a list of layers is kept
/// as given. `note` says what was chosen ("pipeline stages: layers 0-5 |
/// 6-10 | 11-15 (balanced by loom plan's cost model; --pp-split 6,11)").
/// False with a one-line `err` when the model cannot be costed.
bool resolvePipelineSplit(const std::string &model, int64_t batch, int64_t seq,
                          compiler::TrainOptions &o, std::string &note, std::string &err);

/// resolvePipelineSplit, then compiler::compileTrainStep with those cuts;
/// the note on the cuts joins `out.notes`.
bool compileTrainStepWithCuts(const std::string &model, int64_t batch, int64_t seq,
                              compiler::TrainOptions &o, compiler::TrainProgram &out,
                              std::string &err);

} // namespace loom::planner

#endif
