//===- PlanComparison.h - Every plan against the first (loom verify) -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The run side of `loom verify`: the same model trained from the same
// initial weights on the same batches under each plan (each compiled by
// the caller), then every plan compared with the first: per-step loss
// (max, mean and final |delta|, and the largest relative difference) and
// the step-0 gradients gathered to full tensors (relative L2 error per
// parameter, GradientError.h). The report is printed as tables, and
// rendered as JSON and as an SVG of the loss curves for the caller to
// write.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_PLANCOMPARISON_H
#define LOOM_TRAIN_PLANCOMPARISON_H

#include "loom/train/StepRunner.h"
#include "loom/train/TokenData.h"

#include <string>
#include <vector>

namespace loom::train {

/// One rank's program at its peak, by category (the compiler's buffer plan,
/// as planner::bufferPlanMemory splits it), in bytes.
struct BufferPlanBytes {
  double params = 0, grads = 0, optimizer = 0, activations = 0, comm = 0, workspace = 0;
};

struct PlanRun {
  std::string name; // the plan as planner::meshPlanName spells it
  int ranks = 1;
  std::vector<double> loss, gradNorm;
  std::vector<std::vector<float>> grads0; // full step-0 gradients
  std::vector<double> activationNorms0;   // residual stream entering each norm
  std::vector<std::string> paramNames;
  RankMemory perRank;
  std::vector<RankDeviceMemory> device; // per rank, on a GPU
  BufferPlanBytes bufferPlan;           // one rank's program, at its peak
  // Against the first plan.
  double maxAbs = 0, meanAbs = 0, finalAbs = 0, maxRel = 0, worstGradRel = 0;
  std::vector<double> gradRel;
};

/// Trains `steps` steps of `tp` on simulated ranks on `backend` from the
/// weights in `initWeights` (HF-named safetensors; "": the program's
/// initial values) and zero moments, recording the ranks' state bytes
/// and device memory, each step's loss and gradient norm, and step 0's
/// gradients and activation norms into `r`. False with `err`.
bool runPlan(TrainProgram &tp, const std::string &initWeights, int threads,
             const std::string &backend, const TokenFile &data, int64_t B, int64_t T,
             int64_t steps, BatchRule rule, PlanRun &r, std::string &err);

/// Fills each run's differences from runs[0].
void compareWithFirst(std::vector<PlanRun> &runs, int64_t steps);

/// The tables on stdout: losses and differences per plan, step-0 gradient
/// and activation norms side by side, device memory and state bytes per rank.
void printComparison(const std::string &model, int64_t B, int64_t T, const std::string &precision,
                     int64_t steps, const std::string &backend, const std::vector<PlanRun> &runs);

/// Prints PASS or FAIL per plan against the bounds (INFINITY: unbounded);
/// true when every plan is within them.
bool checkComparisonBounds(const std::vector<PlanRun> &runs, int64_t steps, double lossTol,
                           double gradTol, double absTol, double meanTol);

/// The report as JSON, and the loss curves (later plans dashed, with a
/// log-scale panel of |loss - reference loss| below) as SVG.
std::string comparisonJson(const std::string &model, int64_t steps, const std::vector<PlanRun> &runs);
std::string comparisonSvg(const std::string &model, const std::vector<PlanRun> &runs);

} // namespace loom::train

#endif
