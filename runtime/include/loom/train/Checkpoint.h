//===- Checkpoint.h - Training state on disk --------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A checkpoint is a folder DIR/step-NNNNNNNN holding
//   params.safetensors     parameters under the model's names (model layout)
//   optimizer.safetensors  exp_avg.<name>, exp_avg_sq.<name>
//   manifest.json          format, version, step, data position, batch and
//                          sequence, each file's size and FNV-1a 64 checksum
// It is written into a hidden temp folder and renamed into place, so a
// crash never leaves a half checkpoint under a real name; the manifest is
// the last file written inside it. Loading re-checks sizes and checksums
// and refuses a checkpoint that does not match.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_CHECKPOINT_H
#define LOOM_TRAIN_CHECKPOINT_H

#include "loom/train/TrainProgram.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace loom::train {

struct TrainState {
  std::vector<ParamSlot> params;         // values in the model's layout
  std::vector<std::vector<float>> expAvg, expAvgSq;
  int64_t step = 0;                      // the next step to run
  int64_t batch = 0, seq = 0;
  std::string dataRule;                  // e.g. "fixture"
};

/// Writes DIR/step-<step>; keeps the newest `keep` checkpoints (0: all).
bool saveCheckpoint(const std::string &dir, const TrainState &s, int keep, std::string &path,
                    std::string &err);

/// The same, as the state of step `step` (s.step may have moved on).
bool saveCheckpointAt(const std::string &dir, const TrainState &s, int64_t step, int keep,
                      std::string &path, std::string &err);

/// Fills a TrainState's parameters and moments on the host from a copy set
/// aside (StepRunner::snapshotState), on the checkpoint writer's thread.
using StateReader = std::function<bool(TrainState &, std::string &)>;

/// `path` is a checkpoint folder, or a DIR of them (the newest is taken).
/// Restores into `s`, whose params must already name and shape the model's
/// parameters: any mismatch is an error.
bool loadCheckpoint(const std::string &path, TrainState &s, std::string &loadedFrom,
                    std::string &err);

/// `--async-checkpoint`: writes a checkpoint on a thread of its own while
/// training goes on (torch.distributed.checkpoint's async_save), so the
/// step pays only for setting the state aside (a device-to-device copy with
/// a StateReader; else bringing it to the host). The caller leaves the
/// TrainState's tensors untouched until wait() returns (its step counter
/// may move on); one write is in flight at a time.
class AsyncCheckpointWriter {
public:
  AsyncCheckpointWriter() = default;
  AsyncCheckpointWriter(const AsyncCheckpointWriter &) = delete;
  AsyncCheckpointWriter &operator=(const AsyncCheckpointWriter &) = delete;
  ~AsyncCheckpointWriter();
  /// With `read`, the thread first fills `s`'s parameters and moments
  /// with it (a device snapshot copied to the host while training goes on).
  void start(const std::string &dir, TrainState &s, int keep, StateReader read = nullptr);
  bool busy() const { return thread_.joinable(); }
  /// Joins the write in flight (if any): false with its error. `path` is
  /// the checkpoint it wrote ("" when none was in flight).
  bool wait(std::string &path, std::string &err);

private:
  std::thread thread_;
  bool ok_ = true;
  std::string path_, err_;
};

/// Auto-resume (`--checkpoint-dir` without `--resume`): restores the newest
/// checkpoint in `dir` that loads, skipping unusable ones (each reason goes
/// to `skipped`). False with an empty `err` when `dir` holds no usable
/// checkpoint (a first launch: start fresh); false with `err` when a
/// checkpoint is intact but does not fit this run (another model, batch or
/// sequence), which a restart must not paper over.
bool resumeNewest(const std::string &dir, TrainState &s, std::string &loadedFrom,
                  std::vector<std::string> &skipped, std::string &err);

} // namespace loom::train

#endif
