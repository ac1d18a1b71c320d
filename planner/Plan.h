//===- Plan.h - One way to train a model on a cluster -----------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A plan factors the GPUs as dp_replicate * dp_shard * cp * tp * pp and picks
// a pipeline schedule, a microbatch count, an activation-checkpoint policy
// and fp8 on or off. Plans are named by an id such as
//   dpr=2,dps=4,cp=1,tp=1,pp=1,sched=none,v=1,mb=1,ac=none,fp8=off
// which --explain accepts whole or in part (tp=2,pp=2).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_PLAN_H
#define LOOM_PLANNER_PLAN_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::planner {

enum class Schedule : uint8_t { None, GPipe, OneFOneB, Interleaved, ZeroBubble };
enum class Checkpoint : uint8_t { None, Selective, Full };
const char *scheduleName(Schedule s);
const char *checkpointName(Checkpoint c);

/// How context parallelism reaches the other ranks' keys and values: one
/// all-gather (the Llama 3 paper) or cp - 1 ring shifts (torchtitan).
enum class CpRotate : uint8_t { AllGather, Ring };
const char *cpRotateName(CpRotate r);

struct Plan {
  int dpReplicate = 1, dpShard = 1, cp = 1, tp = 1, pp = 1;
  // Issue 18 (loom train/verify --plan): cp's rotation, and with tp > 1
  // Megatron sequence parallelism and the vocabulary-parallel loss (both
  // on unless the plan says tp_sp=off or loss_parallel=off; parseMeshPlan
  // turns them off in pipeline plans, which do not run them yet).
  CpRotate cpRotate = CpRotate::AllGather;
  bool tpSp = true, lossParallel = true;
  // Whether the plan spelled tp_sp / loss_parallel out. Left to their
  // defaults, a model whose structure cannot take them (attention or the
  // head outside what tp splits) trains without them; asked for, it is an
  // error.
  bool tpSpChosen = false, lossParallelChosen = false;
  Schedule schedule = Schedule::None;
  int virtualStages = 1; // model chunks per GPU (interleaved 1F1B)
  int microbatches = 1;  // per optimizer step, per data-parallel rank
  Checkpoint checkpoint = Checkpoint::None;
  bool fp8 = false;
  std::string scheduleFile; // pp_schedule=FILE.csv: a custom schedule (loom train)

  int gpus() const { return dpReplicate * dpShard * cp * tp * pp; }
  int dp() const { return dpReplicate * dpShard; }
  std::string id() const;
};

/// What the user asked for.
struct PlanRequest {
  int gpus = 1;
  int gpusPerNode = 8;
  int64_t microbatch = 1;   // sequences per GPU per microbatch (the import's batch)
  int64_t seq = 1;
  int64_t globalBatch = 0;  // sequences per optimizer step; 0: microbatch * gpus
  bool allowBf16 = true, allowFp8 = true;
  int maxVirtualStages = 4;
  int activationBytes = 2; // bytes per saved activation element (2: bf16 autocast; 4: an fp32 run)
};

/// Every ordered factorization (dpr, dps, cp, tp, pp) of n.
std::vector<Plan> factorizations(int n);

/// Every candidate: factorizations x schedules x checkpoint policies x fp8.
/// The microbatch count follows from the global batch (rounded up when it
/// does not divide; the constraint check rejects those). `numLayers` bounds
/// the interleaving depth (pp * v <= layers).
std::vector<Plan> enumeratePlans(const PlanRequest &req, int numLayers);

/// A partial plan id ("tp=2,pp=2"): key -> value.
using PlanFilter = std::map<std::string, std::string>;
bool parsePlanFilter(const std::string &text, PlanFilter &out, std::string &err);
bool planMatches(const Plan &p, const PlanFilter &f);

/// The user-facing plan spelling of `loom train --plan` and `loom verify
/// --plans`: "dp_replicate=R,dp_shard=S,cp=C,tp=T,pp=P" in any order, each
/// key at most once, missing keys 1; "1" alone is the one-device plan.
/// Also cp_rotate=allgather|ring, tp_sp=on|off, loss_parallel=on|off.
/// With pp > 1 the pipeline keys pp_schedule=gpipe|1f1b|interleaved|zb
/// (or a .csv file of a custom schedule; default 1f1b), pp_virtual=V
/// (stages per rank; default 1, 2 for interleaved) and microbatches=M
/// (default pp) may follow; they are refused without pp > 1, and with
/// them tp_sp and loss_parallel default to off. The planner's other choices
/// (checkpoint policy, fp8) keep their defaults.
/// False with a one-line `err` on an unknown key, a repeated key or a value
/// that is not a positive integer.
bool parseMeshPlan(const std::string &text, Plan &out, std::string &err);

/// "dp_replicate=2,dp_shard=2" (factors above 1 only; "1" for one device;
/// then pp_schedule, pp_virtual and microbatches with pp > 1, and
/// cp_rotate, tp_sp and loss_parallel where they apply and differ from the
/// defaults).
std::string meshPlanName(const Plan &p);

/// Checks that the plan's factors multiply to `worldSize`; the message
/// spells out the product (e.g. "dp_replicate=2 x dp_shard=2 = 4 ranks, but
/// the world size is 2"). Empty when they agree.
std::string checkWorldSize(const Plan &p, int worldSize);

/// Which mesh axes the SPMD passes and executors can run today: data
/// parallelism (dp_replicate, dp_shard), cp, tp and pp, but not pp with cp
/// or with tp's sequence parallelism or vocabulary-parallel loss.
/// Empty when runnable, else a one-line reason naming the axes.
std::string checkExecutable(const Plan &p);

} // namespace loom::planner

#endif
