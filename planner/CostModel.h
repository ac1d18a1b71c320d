//===- CostModel.h - Memory and step time of a plan -------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Turns the IR-derived ModelCost, a hardware profile and a plan into
// per-GPU memory (parameters, gradients, optimizer state, activations,
// communication buffers, workspace) and step time (compute, exposed
// communication, pipeline bubble), plus the constraints a plan breaks.
// docs/planner.md states every formula and assumption; the unit tests in
// unittests/planner pin them on cases worked out by hand.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_COSTMODEL_H
#define LOOM_PLANNER_COSTMODEL_H

#include "planner/HardwareProfile.h"
#include "planner/ModelCost.h"
#include "planner/Plan.h"

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace loom::rt {
struct PipelineSchedule;
struct StageCostProfile;
}

namespace loom::planner {

struct TimeBreakdown {
  double compute = 0;   // the bottleneck GPU's kernels, optimizer included
  double comm = 0;      // communication not hidden behind compute
  double bubble = 0;    // pipeline fill and drain
  double optimizer = 0; // part of compute: the AdamW step
  double total() const { return compute + comm + bubble; }
};

/// One collective a plan implies, for --explain.
struct CollectiveUse {
  std::string group; // "tp", "cp", "pp", "dp_shard", "dp_replicate", "pp (tied embedding)"
  int layer = kEmbedLayer; // layer group; numLayers + 1: the whole device
  Phase phase = Phase::Forward;
  CommKind kind = CommKind::AllReduce;
  int ranks = 1;
  std::string link;
  double bytes = 0;   // per call
  double seconds = 0; // per call
  double callsPerStep = 0;
  std::string what;
};

struct PlanEstimate {
  Plan plan;
  MemoryBreakdown memory;     // the worst GPU
  MemoryBreakdown analytical; // the analytical model's figure (same as memory unless a buffer plan was used)
  std::string memorySource;   // "buffer-plan" or "analytical"
  int worstDevice = 0;        // pipeline rank with the most memory
  TimeBreakdown time;
  double tokensPerSecond = 0, mfu = 0;
  double modelFlopsPerStep = 0;
  double sequencesPerStep = 0;
  std::vector<std::string> rejections; // empty: feasible
  // Pipeline plans: each pipeline rank's idle fraction on the schedule's
  // timeline (the schedule loom train runs, timed with this model's costs).
  std::vector<double> bubbleFraction;
  std::vector<double> activationsPerRank; // each pipeline rank's saved activations at its peak
  std::vector<int64_t> stageCuts; // pipeline plans: the first layer of stages 1.. (stageCuts)
  // Where the schedule's stage costs came from: "" (this model) or the
  // source of the measured stage-cost profile it was timed with.
  std::string stageCostSource;
  // Where compute time came from: "program" (the compiled one-GPU step,
  // priced instruction by instruction: ProgramCost.h) or "model" (the IR
  // walk's per-op model); with the program, its time per opcode class.
  std::string timeSource = "model";
  ProgramTime programTime;
  // Detail (evaluate(..., true)):
  std::vector<CollectiveUse> collectives;
  std::vector<std::vector<int>> deviceGroups; // per pipeline rank: layer groups (-1 embed, L head)
  bool feasible() const { return rejections.empty(); }
};

class CostModel {
public:
  CostModel(const ModelCost &model, const HardwareProfile &hw, const PlanRequest &req);

  PlanEstimate evaluate(const Plan &plan, bool detail = false) const;

  /// True when the compiler can build the plan's per-rank step today
  /// (data, context and tensor parallelism, any recompute policy: pp = 1,
  /// one microbatch, no fp8), so its memory can come from the buffer plan.
  static bool compilesPerRank(const Plan &plan);
  /// Replaces `e`'s memory with `mem`, the compiler's buffer plan of one of
  /// its ranks (planner/ir/IrCost.h, rankBufferPlan), and checks it
  /// against the GPU again.
  void useRankBufferPlan(PlanEstimate &e, const MemoryBreakdown &mem) const;

  /// Seconds one op takes on one GPU of a (tp, cp) group, one microbatch.
  double opTime(const CostOp &op, int tp, int cp, bool fp8) const;
  /// Reasons the plan cannot run (besides memory), empty when it can.
  std::vector<std::string> constraintViolations(const Plan &plan) const;
  /// Pipeline rank of a layer group (-1 embed .. L head).
  int deviceOf(int layer, const Plan &plan) const;
  /// How many microbatches' activations a pipeline rank holds at its peak
  /// (in microbatches of all its stages), walking the schedule it runs.
  double inFlight(int device, const Plan &plan) const;
  /// The pipeline stage (chunk) of a layer group under stageCuts: the
  /// embedding in the first, the head in the last.
  int stageOf(int layer, const Plan &plan) const;
  /// Where the plan's pipeline cuts the layers (the first layer of stages
  /// 1..pp*v-1, --pp-split's spelling): the split that makes the costliest
  /// stage cheapest under this model's per-group time (forward, backward,
  /// the plan's recompute and exposed tp/cp communication; StageBalance.h).
  /// loom train takes the same cuts (planner/ir/PipelineCuts.h). Empty
  /// for pp*v = 1 or more stages than layers.
  const std::vector<int64_t> &stageCuts(const Plan &plan) const;
  /// The per-group step time stageCuts balances: [embedding, layers, head].
  std::vector<double> groupStepTimes(const Plan &plan) const;
  /// The plan's schedule, as rt::buildSchedule makes it for loom train
  /// (built once per kind, pp, v and microbatches); null for pp = 1 or a
  /// combination it refuses.
  const rt::PipelineSchedule *pipelineSchedule(const Plan &plan) const;
  /// Measured stage costs (loom train --stage-costs-out): a pipeline plan
  /// they fit (pp, stages, backward split, microbatch rows, sequence,
  /// tp/dp; no recompute, no fp8) is timed with them instead of this
  /// model's per-stage time (PipelineProfile.h, docs/planner.md).
  void useStageCosts(std::vector<rt::StageCostProfile> profiles);
  /// The profiles useStageCosts was given (null: none).
  const std::vector<rt::StageCostProfile> *stageCostProfiles() const { return stageCosts_.get(); }
  /// The profile that fits `plan`'s schedule, or null.
  const rt::StageCostProfile *measuredStageCosts(const Plan &plan,
                                                 const rt::PipelineSchedule &schedule) const;
  /// Saved-activation bytes one microbatch keeps per stage.
  std::vector<double> stageActivationBytes(const Plan &plan) const;
  /// Parameter elements one GPU holds of parameter `p` (after tp and dp_shard).
  double localElements(const ParamInfo &p, const Plan &plan) const;

  const ModelCost &model() const { return m; }
  const HardwareProfile &hardware() const { return hw; }
  const PlanRequest &request() const { return req; }
  int64_t globalBatch() const { return globalBatch_; }

private:
  struct GroupTimes {
    double fwd = 0, bwd = 0, selectiveRecompute = 0, fullRecompute = 0;
    double attnFwd = 0, attnBwd = 0;
    double tpFwd = 0, tpBwd = 0;
    double cpFwd = 0, cpBwd = 0; // ring traffic time (before overlap)
  };
  /// Plan-independent sums per layer group, so a plan costs O(groups).
  struct GroupStatic {
    double paramReplicated = 0, paramSharded = 0; // elements (sharded: split by tp)
    double tiedReplicated = 0, tiedSharded = 0;   // also held by the head's rank
    double optReplicated = 0, optSharded = 0;     // optimizer-op elements touched
    uint64_t optKinds = 0;                        // which optimizer kernels run
    double saved[2][4] = {};                      // [fp8][all, none, selective, full] bytes
    double maxOut = 0;                            // largest op output, elements
  };
  const std::vector<GroupTimes> &groupTimes(int tp, int cp, bool fp8, int gpusPerNode) const;
  /// Group g's time per microbatch on its rank: forward, backward (with
  /// the plan's recompute) and exposed tp/cp communication.
  struct GroupStep {
    double forward = 0, backward = 0, comm = 0;
  };
  GroupStep groupStep(const GroupTimes &t, int g, const Plan &plan) const;
  /// The compiled program that runs `plan`'s step on each GPU, priced on
  /// this profile (null when the plan is not one device's step: tp, cp,
  /// pp, dp_shard or several microbatches, or none was compiled).
  const ProgramTime *programTime(const Plan &plan) const;
  mutable std::map<std::pair<int, bool>, ProgramTime> programTimes;
  int groupIndex(int layer) const { return layer + 1; }
  MemoryBreakdown deviceMemory(int device, const Plan &plan) const;
  /// Parameter elements of group g one GPU holds (tp and dp_shard applied),
  /// with or without the tied copy the head's rank keeps.
  double groupLocalParams(int g, const Plan &plan, bool withTied) const;

  const ModelCost &m;
  const HardwareProfile &hw;
  PlanRequest req;
  int64_t globalBatch_;
  int numGroups;
  std::vector<std::vector<int>> opsByGroup, tpByGroup;
  std::vector<GroupStatic> statics;
  double scalarOptElements = 0; // optimizer bookkeeping tied to no parameter
  uint64_t scalarOptKinds = 0;
  double maxTpBuffer = 0, maxKvElements = 0;
  double flopsPerMicrobatch = 0; // GEMM + attention, forward + backward (causal: half)
  mutable std::map<std::tuple<int, int, bool>, std::vector<GroupTimes>> cache;
  mutable std::map<std::tuple<int, int, int, int>, std::shared_ptr<rt::PipelineSchedule>> schedules;
  std::shared_ptr<const std::vector<rt::StageCostProfile>> stageCosts_;
  // stageCuts per (stages, tp, cp, fp8, checkpoint).
  mutable std::map<std::tuple<int, int, int, bool, int>, std::vector<int64_t>> cutsCache;
  // Per schedule key and activation policy: each rank's peak of held bytes
  // and the bytes its stages keep per microbatch.
  mutable std::map<std::tuple<int, int, int, int, int, bool, int>,
                   std::pair<std::vector<double>, std::vector<double>>>
      heldPeaks;
};

/// Bytes per element of a saved activation under the plan's precision
/// (`activationBytes` for what autocast does not narrow further).
int savedElementBytes(const SavedTensor &s, bool fp8, int activationBytes = 2);

} // namespace loom::planner

#endif
