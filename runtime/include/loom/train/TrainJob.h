//===- TrainJob.h - The training loop of `loom train` ------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Runs a compiled training step (TrainProgram) for a job: the state to
// start from (fresh, an explicit checkpoint, or the newest usable one in
// the checkpoint folder: one command for a preemptible job's first launch
// and every restart), then the loop that feeds the step batches, checks the
// first step against reference values, prints progress, logs JSON lines and
// TensorBoard scalars, and writes checkpoints (in the background with
// asyncCheckpoint). The caller compiles the step, creates the runner and
// exports the result.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_TRAINJOB_H
#define LOOM_TRAIN_TRAINJOB_H

#include "loom/train/Checkpoint.h"
#include "loom/train/StepRunner.h"
#include "loom/train/TokenData.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::train {

struct TrainLoopOptions {
  int64_t batch = 0, seq = 0, steps = 0; // global batch; train until `steps` are done
  BatchRule rule = BatchRule::Sequential;
  bool lead = true; // this process prints, logs and checkpoints (rank 0)
  std::string logPath, tensorboardDir;
  std::string checkpointDir;     // "" : no checkpoints
  int64_t checkpointEvery = 0;   // steps between checkpoints (0: none)
  int keepCheckpoints = 3;       // newest to keep (0: all)
  bool asyncCheckpoint = false;  // write them on a thread of their own
  std::optional<double> expectLoss; // the first step's loss must match
  double lossTolerance = 1e-5;      // relative
  std::string expectGrads;          // .npz of HF-named reference gradients
  double gradTolerance = 1e-4;      // worst relative L2 error
  std::vector<std::string> hfNames;           // from loadInitWeights (may be empty)
  std::map<std::string, std::string> aliases; // from loadInitWeights
  int64_t printEvery = 1;   // without a terminal: every K-th step (and the last)
  int64_t dieAfterStep = -1; // testing: _Exit(86) after this step
};

/// Parameters at the program's initial values, zero AdamW moments, step 0.
/// The run's first line: model, parameters, batch and sequence, precision
/// (as `precision` says it), steps, compile time, arena and in-place updates.
void printTrainHeader(const std::string &model, const TrainProgram &tp, const TrainState &state,
                      const std::string &precision, int64_t steps, double compileS);

TrainState initialTrainState(const TrainProgram &tp, int64_t batch, int64_t seq,
                             const std::string &dataRule);

/// Restores `state` from `resumeFrom` (a checkpoint, or a folder of them:
/// the newest) if given, else from the newest usable checkpoint in
/// `checkpointDir` if there is one (damaged ones are skipped with a warning
/// on stderr from the `lead`; none is a fresh start). Prints where it
/// resumed. False with `err` when a checkpoint cannot be used.
bool restoreTrainState(TrainState &state, const std::string &resumeFrom,
                       const std::string &checkpointDir, bool lead, std::string &err);

enum class TrainLoopStatus { Done, CheckFailed, Error };

/// Trains from state.step to o.steps. CheckFailed: --expect-loss or
/// --expect-grads was outside its tolerance (already printed as FAIL);
/// Error: with a one-line `err`.
TrainLoopStatus runTrainLoop(StepRunner &runner, const TrainProgram &tp, const TokenFile &data,
                             TrainState &state, const TrainLoopOptions &o, std::string &err);

} // namespace loom::train

#endif
