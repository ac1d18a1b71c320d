//===- StageBalance.h - Where a pipeline cuts the layers --------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A pipeline runs at the pace of its costliest stage: every microbatch
// passes every stage, so the busiest stage's time per microbatch sets the
// steady state and, through the schedule, the bubble. Splitting the layers
// evenly ignores that the first stage also runs the embedding and the last
// one the final norm, the LM head and the loss, which on a large
// vocabulary cost several layers' worth (Llama-3.2-1B: the head's GEMMs
// alone are 4.3 layers). These functions choose the cuts from per-group
// costs instead. Cuts are whole layers, spelled as `loom train --pp-split`
// spells them: the first layer of each stage after the first.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_STAGEBALANCE_H
#define LOOM_PLANNER_STAGEBALANCE_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::planner {

/// The even split of `layers` layers into `stages` stages: the first
/// layers % stages stages take one layer more (as loom-split-pipeline-stages
/// deals them out). Empty when stages < 2 or stages > layers.
std::vector<int64_t> evenStageCuts(int layers, int stages);

/// Contiguous stages over `groupCost` = [embedding, layer 0, ..., layer
/// L-1, head] (L + 2 costs, any unit), the embedding in stage 0 and the
/// head in the last, that make the costliest stage as cheap as possible.
/// Among splits with that least maximum the even split is kept when it is
/// one, else the one whose stages' costs have the least sum of squares. Empty when stages < 2 or
/// stages > L (sub-layer stages are split evenly by the pass itself).
std::vector<int64_t> balanceStageCuts(const std::vector<double> &groupCost, int stages);

/// Each stage's cost under `cuts` (same groupCost as above).
std::vector<double> stageCostsOf(const std::vector<double> &groupCost,
                                 const std::vector<int64_t> &cuts);

/// "0-5 | 6-10 | 11-15" (layer ranges per stage); "" without cuts.
std::string describeStageCuts(const std::vector<int64_t> &cuts, int layers);

/// "6,11" (the --pp-split spelling).
std::string ppSplitSpelling(const std::vector<int64_t> &cuts);

} // namespace loom::planner

#endif
