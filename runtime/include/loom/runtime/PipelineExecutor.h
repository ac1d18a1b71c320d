//===- PipelineExecutor.h - Running a pipeline schedule on one rank -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A pipelined training step is not one program but, per stage, a forward
// and a backward program (or the backward's input- and weight-gradient
// halves) run once per microbatch, and per pipeline rank an optimizer
// program run once per step (loom-split-pipeline makes them). Every input
// and output of each program has a role: a parameter, a saved activation,
// a gradient accumulator, a received or sent tensor... PipelineRank runs
// one rank's part of a step: it walks the rank's schedule (PipelineSchedule)
// action by action, feeding each program what earlier actions produced,
// moving activations and gradients through the communicator's grouped
// point-to-point calls (receives as the schedule groups them; sends go out
// in the background, one sender per peer, in posting order), keeping each
// microbatch's saved activations only until its backward has run, adding
// each microbatch's gradients into accumulators inside the backward
// programs, and finally exchanging the accumulated gradients of parameters
// that two ranks hold and running the optimizer once.
//
// Simulated ranks run one PipelineRank per rank on threads over an
// InProcessCommunicator (cpu) or, all on one GPU, the device-memory
// communicator (cuda); one process per rank runs one over a
// SocketCommunicator (cpu) or NCCL (cuda). What lives between programs
// is in the backend's memory (PipelineBuffers.h): host buffers on the
// CPU, device buffers on a GPU.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_PIPELINEEXECUTOR_H
#define LOOM_RUNTIME_PIPELINEEXECUTOR_H

#include "loom/runtime/Communicator.h"
#include "loom/runtime/Executor.h"
#include "loom/runtime/PipelineSchedule.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

enum class PipePhase : uint8_t { Forward, Backward, BackwardInput, BackwardWeight, Optimizer };
const char *pipePhaseName(PipePhase p);

/// What an input or output of a pipeline program is (loom's
/// #loom.pipeline_value; the values are the IR enum's).
enum class PipeRole : uint8_t {
  Param = 0, ExpAvg = 1, ExpAvgSq = 2, Step = 3, Tokens = 4, Targets = 5, Saved = 6,
  Stash = 7, Accumulator = 8, Loss = 9, GradNorm = 10, Lr = 11, ActSumSq = 12, Grad = 13,
  Recv = 14, Send = 15,
};
enum class TransferKind : uint8_t { Activation = 0, Gradient = 1, AccumulatedGradient = 2 };

struct PipeSlot {
  PipeRole role = PipeRole::Param;
  int64_t index = 0;                                 // parameter, saved value, tag, ...
  TransferKind transfer = TransferKind::Activation; // Recv / Send
  int64_t peer = -1;                                 // Recv / Send: stage, or pp rank
};

struct PipelineFunction {
  PipePhase phase = PipePhase::Forward;
  int stage = -1, rank = 0; // the optimizer has no stage
  std::shared_ptr<const Program> program;
  std::vector<PipeSlot> inputs, outputs; // Program::inputs / outputs order
};

struct PipelineProgram {
  PipelineSchedule schedule;
  std::vector<PipelineFunction> functions;
  size_t numParams = 0; // parameters of the whole model
  int microbatches = 1;
  int ranksPerStage = 1; // dp_replicate * dp_shard * tp: world = pp * ranksPerStage
  // The first layer of stages 1.. as the compiler was given them (empty:
  // the split pass's even split), for what a measured profile records.
  std::vector<int64_t> stageCuts;
  int worldSize() const { return schedule.ranks * ranksPerStage; }
  /// The functions of pipeline rank `ppRank`.
  std::vector<const PipelineFunction *> functionsOf(int ppRank) const;
  /// The optimizer of `ppRank` (every rank has one).
  const PipelineFunction *optimizerOf(int ppRank) const;
};

/// When one action ran on a rank (seconds since the step began, on a clock
/// every rank of the process shares; one process per rank aligns theirs at
/// a barrier).
struct ActionTiming {
  int action = 0; // index into the rank's schedule actions (-1: the optimizer)
  double start = 0, end = 0;
  // CPU seconds the rank's own thread spent in a compute action (with one
  // thread per rank, the action's work): far below end - start, the rank
  // was descheduled, a contended machine rather than the schedule.
  double cpu = 0;
};

/// What one step gives back on a rank.
struct PipelineStepResult {
  std::vector<float> losses;      // per microbatch (the last stage's ranks)
  float gradNorm = 0, lr = 0;
  std::vector<double> actSumSq;   // per check value, summed over the microbatches
  std::vector<bool> hasActSumSq;  // which of them this rank computed
  std::vector<ActionTiming> timings;
  double stepStart = 0, stepEnd = 0;
  uint64_t peakActivationBytes = 0; // saved activations held at once
  // Every tensor between programs (saved activations, transfers in and
  // out, accumulators) held at once: on CUDA, device bytes beside the
  // executors' arenas.
  uint64_t peakBufferBytes = 0;
};

class PipelineRank {
public:
  /// Rank `worldRank` of a world laid out (pp, dp_replicate, dp_shard, cp,
  /// tp), pp outermost: its pipeline rank is worldRank / ranksPerStage.
  /// Creates an executor per program of its pipeline rank on `backend`.
  static std::unique_ptr<PipelineRank> create(std::shared_ptr<const PipelineProgram> p,
                                              int worldRank, Communicator *comm,
                                              const std::string &backend, int threads,
                                              std::string &err);
  ~PipelineRank();

  int ppRank() const { return ppRank_; }
  int worldRank() const { return worldRank_; }
  /// Parameters this rank holds (its optimizer's), by model index.
  const std::vector<size_t> &params() const { return params_; }
  /// Sets this rank's piece of parameter `index`'s value, exp_avg or
  /// exp_avg_sq (role Param, ExpAvg, ExpAvgSq). Before the first step.
  bool setState(PipeRole role, size_t index, const std::vector<float> &value, std::string &err);
  /// Reads this rank's current piece (after the optimizer of the last step).
  bool getState(PipeRole role, size_t index, std::vector<float> &value, std::string &err) const;
  /// The unclipped, reduced gradient of parameter `index` from the last
  /// step (compiled with gradients returned), this rank's piece.
  bool getGrad(size_t index, std::vector<float> &value, std::string &err) const;
  /// Bytes one value of each kind takes on this rank (its piece).
  size_t stateElements(size_t index) const;

  /// Device memory this rank's executors allocated (all zero on the CPU):
  /// the sum over its programs, the communicator's staging once (one
  /// buffer serves them all).
  DeviceMemory deviceMemory() const;

  /// Runs one step. `tokens` / `targets` are this rank's rows of each
  /// microbatch (read by the first / last stage only). `epoch` is when
  /// timings count from.
  bool runStep(float step, const std::vector<const int64_t *> &tokens,
               const std::vector<const int64_t *> &targets,
               std::chrono::steady_clock::time_point epoch, PipelineStepResult &out,
               std::string &err);

private:
  PipelineRank() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int worldRank_ = 0, ppRank_ = 0;
  std::vector<size_t> params_;
};

/// Every rank of a pipeline plan on the current GPU, one thread each: the
/// ranks, their device-memory communicator (DeviceMemoryCommunicator.h)
/// and what creating each rank took from the device (cudaMemGetInfo).
struct DevicePipelineRanks {
  std::unique_ptr<Communicator> comm;
  std::vector<std::unique_ptr<PipelineRank>> ranks;
  std::vector<uint64_t> measured;
};
/// Refuses in one line, before allocating anything, a plan whose ranks'
/// programs together do not fit the GPU's free memory; false with `err`
/// also when loom was built without CUDA or no GPU is usable.
bool createDevicePipelineRanks(std::shared_ptr<const PipelineProgram> p, DevicePipelineRanks &out,
                               std::string &err);

} // namespace loom::rt

#endif
