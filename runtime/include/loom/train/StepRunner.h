//===- StepRunner.h - One training step on one device or N simulated ranks -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The training loop keeps the full (global) parameters and optimizer state
// and hands each step the global batch; a runner turns that into program
// inputs and back. On one device that is a copy in and out. For a
// data-parallel plan the runner gives rank r (= r_replicate * S + r_shard)
// rows [r B/N, (r+1) B/N) of the batch and, for each sharded parameter,
// dim-0 slice r_shard of it and of its moments; afterwards it gathers the
// slices back into full tensors (from the replica r_replicate = 0; replicas
// are bit-identical because every reduction is deterministic), so
// checkpoints, exports and gradient checks see full tensors.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_STEPRUNNER_H
#define LOOM_TRAIN_STEPRUNNER_H

#include "loom/train/Checkpoint.h"
#include "loom/train/TokenData.h"
#include "loom/train/TrainProgram.h"
#include "loom/runtime/Executor.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::rt {
class Rendezvous;
}

namespace loom::train {

struct StepResult {
  float loss = 0, gradNorm = 0, lr = 0;
  std::vector<std::vector<float>> grads; // full unclipped gradients, when compiled with them
  // L2 norm of the residual stream entering each norm over the global
  // batch, when compiled with activation sums (and asked for).
  std::vector<double> activationNorms;
};

/// Bytes one rank holds for the training state, read off its program.
struct RankMemory {
  uint64_t params = 0, grads = 0, optimizer = 0;
};

/// What one rank's executor allocated on its device, and what the device
/// lost while it was created (0 where not measured).
struct RankDeviceMemory {
  rt::DeviceMemory allocated;
  uint64_t measured = 0;
};

class StepRunner {
public:
  virtual ~StepRunner() = default;
  /// `threads` <= 0: all hardware threads, split among the ranks. One
  /// device or simulated ranks (every rank on this machine's CPU, or all on
  /// its one GPU) run on `backend`.
  static std::unique_ptr<StepRunner> create(const TrainProgram &tp, int threads,
                                            std::string &err,
                                            const std::string &backend = "cpu");
  /// Runs step `s` on the global batch. `state` is the truth for the first
  /// step; afterwards a runner may keep it on its device (in-place updates)
  /// and leave the host copy stale until syncState().
  virtual bool step(TrainState &state, int64_t s, const Batch &batch, bool wantGrads,
                    StepResult &out, std::string &err) = 0;
  /// Brings `state` on the host up to date (before checkpoints and export).
  /// With one process per rank every rank must call it; only rank 0's
  /// `state` is brought up to date.
  virtual bool syncState(TrainState &, std::string &) { return true; }
  /// For a checkpoint written in the background: sets aside the state the
  /// executors hold (on a GPU a device-to-device copy, queued before the
  /// next step) and returns in `read` what fills a host TrainState with it
  /// on the writer's thread while training goes on. Leaves `read` empty
  /// where there is nothing to set aside (the host copy is current) or the
  /// runner cannot (state spread over processes): then syncState(). False
  /// with `err` when the copy does not fit (the caller may syncState()).
  virtual bool snapshotState(const TrainState &, StateReader &read, std::string &) {
    read = nullptr;
    return true;
  }
  /// True when the state lives with the executors between steps, so that
  /// step() never touches the host TrainState: a checkpoint can then be
  /// written from it in the background while training goes on.
  virtual bool holdsStateBetweenSteps() const { return false; }
  /// With one process per rank: waits until every rank is done, so no rank
  /// leaves while another may still need it. Every rank must call it.
  virtual bool finish(std::string &) { return true; }
  /// True when the last failure was another process's (it died, hung or
  /// left), not this rank's own.
  virtual bool peerFailed() const { return false; }
  /// One rank of a job with one process per rank (loom train --nproc,
  /// torchrun): joins the others through `rv`, then runs its own rank of
  /// the plan on `backend` (cpu: SocketCommunicator; cuda: NCCL).
  /// `threads` is for the whole host, split among its `localRanks`.
  static std::unique_ptr<StepRunner> createDistributed(const TrainProgram &tp, int threads,
                                                       const std::string &backend,
                                                       std::unique_ptr<rt::Rendezvous> rv,
                                                       int localRank, int localRanks,
                                                       double collectiveTimeoutS,
                                                       std::string &err);
  /// Accelerator memory the runner holds (0 on the CPU): every rank's.
  uint64_t deviceMemoryBytes() const {
    uint64_t sum = 0;
    for (const RankDeviceMemory &m : deviceMemoryPerRank()) sum += m.allocated.total();
    return sum;
  }
  /// Per rank of this process (simulated ranks: all of them).
  virtual std::vector<RankDeviceMemory> deviceMemoryPerRank() const { return {}; }
  int worldSize() const { return tp_.worldSize(); }

  /// Testing: at step `step`, rank `rank` gets token ids outside the
  /// vocabulary, so its embedding fails mid-step (a rank with bad data).
  /// False with `err` when `rank` is not a rank of the plan.
  bool injectRankFailure(int64_t rank, int64_t step, std::string &err) {
    if (rank < 0 || rank >= worldSize()) {
      err = "--fail-rank " + std::to_string(rank) + " is not a rank of this " +
            std::to_string(worldSize()) + "-rank plan";
      return false;
    }
    failRank_ = int(rank), failStep_ = step;
    return true;
  }

  /// Per rank: parameters and AdamW moments (program inputs) and gradients
  /// (what each AdamW instruction reads: after FSDP's reduce-scatter, the
  /// shard).
  RankMemory perRank() const;
  /// The same for the whole model on one device.
  RankMemory oneDevice() const;

protected:
  explicit StepRunner(const TrainProgram &tp) : tp_(tp) {}
  const TrainProgram &tp_;
  int failRank_ = -1;
  int64_t failStep_ = -1;
};

/// True when the program updates every parameter and moment in place
/// (input k <- output 3 + k, Program::updates): the state can stay on the
/// device between steps.
bool updatesWholeState(const rt::Program &p);

} // namespace loom::train

#endif
