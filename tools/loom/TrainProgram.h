//===- TrainProgram.h - Compiling the training step -------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// ONNX model -> import -> fusion -> [bf16 autocast] -> BuildTrainStep ->
// @train_step lowered to a runtime program, plus what the driver needs to
// run it: each parameter's name, how the exporter stored it (transposed or
// not) and its initial value from the model's initializers.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_TRAINPROGRAM_H
#define LOOM_TOOLS_TRAINPROGRAM_H

#include "loom/runtime/Program.h"
#include "planner/Plan.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::rt {
struct PipelineProgram;
}

namespace loom::tools {

struct TrainOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double maxGradNorm = 1.0, minLrRatio = 0.0;
  int64_t warmup = 0, totalSteps = 0;
  std::string schedule = "constant"; // constant, cosine, linear
  std::string trainable, frozen;     // regexes over parameter names
  bool bf16 = false;                 // bf16 mixed precision (autocast)
  std::string fp8;                   // "" (off), "tensorwise" or "rowwise" (issue 17)
  bool fp8LmHead = false;            // the output head's product in fp8 too
  bool returnGradients = false;      // extra outputs: unclipped gradients
  bool returnActivationSums = false; // extra outputs: sum of squares entering each norm
  // Data parallelism (issue 5): the step is compiled per rank for the local
  // batch B / (dpReplicate * dpShard) and partitioned by the SPMD passes.
  int dpReplicate = 1, dpShard = 1;
  int tp = 1; // Megatron tensor parallelism of attention and MLP
  // Issue 18: context parallelism ("allgather" or "ring"), and with tp > 1
  // sequence parallelism and the vocabulary-parallel loss.
  int cp = 1;
  std::string cpRotate = "allgather";
  bool tpSp = false, lossParallel = false;
  int64_t ddpBucketBytes = 25 << 20; // gradients per dp_replicate all_reduce (0: one each)
  bool fsdpReshardAfterForward = true; // gather again for backward
  int64_t fsdpPrefetch = 1;            // gathers issued this many parameters ahead
  // Activation checkpointing (loom-recompute): none, full, selective, budget.
  std::string ac = "none";
  int64_t acEvery = 1;           // the every-th, 2*every-th, ... layer
  double acMemoryBudgetGiB = 0;  // --ac budget
  std::string acBackend = "cpu"; // whose workspace the budget counts
  // Pipeline parallelism (issue 15): pp > 1 compiles stage programs and a
  // schedule (PipelineProgram.h) instead of one step program.
  planner::Plan pipeline; // pp, schedule, virtual stages, microbatches
  std::string ppSplit;    // --pp-split: layers that begin stages 1.. (empty: balanced)
};

struct ParamSlot {
  std::string name;     // parameter name as the model knows it
  bool transposed = false; // the model stores name^T (folded linear weight)
  std::vector<int64_t> shape; // as stored in the model (after transposing)
  std::vector<float> value;   // current value, in the model's layout
  int64_t tpDim = -1;         // dim split over the tp ranks (-1: whole)
  int64_t tpBlocks = 1;       // that dim is this many fused parts (q|k|v),
                              // each split on its own
  int64_t dim0Shards = 1;     // dp_shard ranks holding one dim-0 slice each
                              // of the (tp-local) tensor (1: whole)
};

/// The compiled step. Program inputs: params (P), exp_avg (P),
/// exp_avg_sq (P), step, tokens [B,T], targets [B,T]. Outputs: loss,
/// grad_norm, lr, params', exp_avg', exp_avg_sq' and, with
/// returnGradients, the P unclipped gradients.
struct TrainProgram {
  std::shared_ptr<rt::Program> program;
  std::vector<ParamSlot> params; // full (global) shapes and values
  int64_t batch = 0, seq = 0;    // global batch
  bool hasGradients = false;
  size_t activationSums = 0; // outputs after the gradients (act_sumsq.<k>)
  int dpReplicate = 1, dpShard = 1, tp = 1;
  // Context parallelism: rank c holds sequence chunks c and 2 cp - 1 - c.
  // Under sequence parallelism without loss parallelism the token ids are
  // split over tp as well (tp part t of the cp rank's positions), and the
  // activations entering the norms are always split over tp with sp.
  int cp = 1;
  bool tokensSplitOverTp = false, activationsSplitOverTp = false;
  std::vector<std::string> recomputedOps; // op names the recompute pass cloned
  // Pipeline plans: the stage programs, optimizers and schedule (then
  // `program` is pipeline rank 0's optimizer, for what reads one program).
  int pp = 1;
  std::shared_ptr<rt::PipelineProgram> pipeline;
  int worldSize() const { return dpReplicate * dpShard * cp * tp * pp; }
  int64_t localBatch() const { return batch / (dpReplicate * dpShard); }
};

/// `opts` go into the pass pipeline; false with a one-line `err`.
bool compileTrainStep(const std::string &modelPath, int64_t batch, int64_t seq,
                      const TrainOptions &opts, TrainProgram &out, std::string &err);

} // namespace loom::tools

#endif
