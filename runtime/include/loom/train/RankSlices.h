//===- RankSlices.h - Which piece of the training state a rank holds -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Ranks are laid out row-major over (pp, dp_replicate, dp_shard, cp, tp):
// rank = ((r_replicate * S + r_shard) * C + r_cp) * T + r_tp. Parameters
// are whole along cp (every cp rank holds the same). A parameter-shaped tensor
// on a rank is the tp slice of the full tensor (along ParamSlot::tpDim,
// block by block for fused q|k|v), then FSDP's dim-0 slice r_shard of
// that. Simulated ranks and one-process-per-rank runs slice and reassemble
// the same way.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_RANKSLICES_H
#define LOOM_TRAIN_RANKSLICES_H

#include "loom/train/Checkpoint.h"
#include "loom/train/TrainProgram.h"

#include <functional>
#include <vector>

namespace loom::train {

inline int rankOfCoords(const TrainProgram &tp, int rep, int shard, int t, int c = 0) {
  return ((rep * tp.dpShard + shard) * tp.cp + c) * tp.tp + t;
}

/// Rank (shard, t)'s piece of the full tensor `full` shaped like `slot`.
std::vector<float> localSlice(const TrainProgram &tp, const std::vector<float> &full,
                              const ParamSlot &slot, int shard, int t);

/// Number of floats in one rank's piece of `slot`.
size_t localSize(const TrainProgram &tp, const ParamSlot &slot);

/// Rebuilds `full` from the pieces of one replica: getPiece(shard, t,
/// piece) fills `piece` (already sized) for every (shard, t) that holds a
/// distinct piece. False when a getPiece does.
bool assembleFull(const TrainProgram &tp, const ParamSlot &slot, std::vector<float> &full,
                  const std::function<bool(int shard, int t, std::vector<float> &piece)> &getPiece);

/// Refreshes `st` from a gather per kind of state (0: parameter values,
/// 1: exp_avg, 2: exp_avg_sq), each filling one full tensor per parameter
/// (already sized); the values land in `st` only where `holdsFull` (rank 0
/// of a multi-process job). False when a gather is.
bool gatherTrainState(TrainState &st, bool holdsFull,
                      const std::function<bool(int kind, std::vector<std::vector<float>> &full)> &gather);

/// The token ids (or targets) of the rank with data-parallel index
/// `dataIndex`, cp index `c` and tp index `t`, cut from the global batch
/// `global` [B, T]: its rows, then its chunks c and 2 cp - 1 - c of every
/// row, then (tokensSplitOverTp) its tp part of those positions.
std::vector<int64_t> rankTokens(const TrainProgram &tp, const std::vector<int64_t> &global,
                                int dataIndex, int c, int t);

} // namespace loom::train

#endif
