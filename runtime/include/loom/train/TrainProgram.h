//===- TrainProgram.h - A compiled training step, as the runtime runs it -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// What the compiler (compiler/CompileTrainStep.h) hands the training
// runtime: the step program(s), each parameter's name, how the exporter
// stored it (transposed or not), its initial value from the model's
// initializers, and how the plan lays the step out over ranks. No MLIR:
// a deployment that only runs compiled steps includes this alone.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_TRAINPROGRAM_H
#define LOOM_TRAIN_TRAINPROGRAM_H

#include "loom/runtime/Program.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::rt {
struct PipelineProgram;
}

namespace loom::train {

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
  bool lossParallel = false; // the vocabulary-parallel loss (issue 18)
  std::vector<std::string> recomputedOps; // op names the recompute pass cloned
  // What the compiler chose differently from the plan's defaults, and why
  // (one line each, for the run's header).
  std::vector<std::string> notes;
  // Pipeline plans: the stage programs, optimizers and schedule (then
  // `program` is pipeline rank 0's optimizer, for what reads one program).
  int pp = 1;
  std::shared_ptr<rt::PipelineProgram> pipeline;
  int worldSize() const { return dpReplicate * dpShard * cp * tp * pp; }
  int64_t localBatch() const { return batch / (dpReplicate * dpShard); }
};

} // namespace loom::train

#endif
