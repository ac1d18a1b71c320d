//===- SpmdPlan.cpp -------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/SpmdPlan.h"
#include "compiler/PipelinePlan.h"
#include "compiler/SequencePlan.h"
#include "planner/BufferPlanMemory.h"

#include <cstdio>

namespace loom::compiler {
using namespace train;

bool parseSpmdPlan(const std::string &text, int worldSize, planner::Plan &plan,
                   std::string &err) {
  if (!planner::parseMeshPlan(text, plan, err))
    return false;
  if (std::string why = planner::checkExecutable(plan); !why.empty()) {
    err = why + " (runnable today: dp_replicate, dp_shard, cp, tp, pp)";
    return false;
  }
  if (worldSize > 0)
    if (std::string why = planner::checkWorldSize(plan, worldSize); !why.empty()) {
      err = why;
      return false;
    }
  // A pipeline plan's schedule is checked before anything compiles.
  rt::PipelineSchedule schedule;
  if (plan.pp > 1 && !planSchedule(plan, schedule, err))
    return false;
  return true;
}

void printSpmdSummary(const planner::Plan &plan, const TrainProgram &tp, const train::StepRunner &r,
                      const std::string &ranksAre) {
  std::printf("plan %s: %d %s, %lld sequence%s per rank\n", planner::meshPlanName(plan).c_str(),
              tp.worldSize(), ranksAre.c_str(), (long long)tp.localBatch(),
              tp.localBatch() == 1 ? "" : "s");
  if (plan.tp > 1) {
    size_t split = 0;
    std::string whole;
    for (const ParamSlot &p : tp.params) {
      split += p.tpDim >= 0;
      if (p.tpDim < 0 && p.shape.size() == 2)
        whole += (whole.empty() ? "" : ", ") + p.name;
    }
    std::printf("tp=%d: %zu of %zu parameters split (Megatron column/row parallel)\n", plan.tp,
                split, tp.params.size());
    // Matrices left whole: embeddings, the LM head, and groups the pass
    // could not split (it says why in the IR by leaving them unannotated).
    if (!whole.empty())
      std::printf("  whole on every tp rank: %s\n", whole.c_str());
  }
  printSequenceSummary(plan, tp);
  if (plan.dpShard > 1) {
    size_t sharded = 0;
    for (const ParamSlot &p : tp.params) sharded += p.dim0Shards > 1;
    std::printf("dp_shard=%d: %zu of %zu parameters sharded along dim 0\n", plan.dpShard, sharded,
                tp.params.size());
    for (const ParamSlot &p : tp.params)
      if (p.dim0Shards == 1) {
        std::string shape;
        for (int64_t d : p.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
        std::printf("  replicated: %s [%s]: %s\n", p.name.c_str(), shape.c_str(),
                    p.shape.empty() ? "a scalar has no dim 0"
                                    : ("dim 0 (" + std::to_string(p.shape[0]) +
                                       ") does not divide by " + std::to_string(plan.dpShard))
                                          .c_str());
      }
  }
  RankMemory m = r.perRank(), one = r.oneDevice();
  std::printf("memory per rank: parameters %llu B, gradients %llu B, optimizer state %llu B "
              "(one device: %llu B, %llu B, %llu B)\n",
              (unsigned long long)m.params, (unsigned long long)m.grads,
              (unsigned long long)m.optimizer, (unsigned long long)one.params,
              (unsigned long long)one.grads, (unsigned long long)one.optimizer);
}

void printRankDeviceMemory(const TrainProgram &tp, const train::StepRunner &r) {
  std::vector<RankDeviceMemory> ranks = r.deviceMemoryPerRank();
  if (ranks.empty() || ranks[0].allocated.total() == 0)
    return;
  planner::MemoryBreakdown plan;
  std::string err;
  if (!planner::bufferPlanMemory(*tp.program, plan, err)) {
    std::printf("device memory per rank: %s\n", err.c_str());
    return;
  }
  auto gib = [](double b) { return b / double(1ull << 30); };
  std::printf("device memory per rank, GiB (the buffer plan at its peak; workspace adds kernel "
              "scratch and the GEMM workspace, communication the collective staging):\n"
              "  %4s %10s %10s %10s %11s %13s %10s %10s %10s\n",
              "rank", "parameters", "gradients", "optimizer", "activations", "communication",
              "workspace", "allocated", "measured");
  for (size_t k = 0; k < ranks.size(); ++k) {
    const rt::DeviceMemory &a = ranks[k].allocated;
    std::printf("  %4zu %10.4f %10.4f %10.4f %11.4f %13.4f %10.4f %10.4f ", k, gib(plan.params),
                gib(plan.grads), gib(plan.optimizer), gib(plan.activations),
                gib(plan.comm + double(a.communication)),
                gib(plan.workspace + double(a.workspace)), gib(double(a.total())));
    if (ranks[k].measured)
      std::printf("%10.4f\n", gib(double(ranks[k].measured)));
    else
      std::printf("%10s\n", "-");
  }
}

void printRunnerSummary(const planner::Plan &plan, const TrainProgram &tp, const StepRunner &r,
                        const std::string &backend, bool multiProcess) {
  if (uint64_t dev = r.deviceMemoryBytes())
    std::printf("device memory: %.2f GiB (arena, constants, scratch, GEMM workspace%s)\n",
                double(dev) / double(1ull << 30),
                r.deviceMemoryPerRank().size() > 1 ? "; every rank's, together" : "");
  if (tp.worldSize() > 1)
    printSpmdSummary(plan, tp, r,
                     multiProcess ? "processes on the " + backend + " backend"
                     : backend == "cuda"
                         ? "simulated ranks on one GPU (verification and memory, not speed)"
                         : "simulated ranks on the " + backend + " backend");
  printRankDeviceMemory(tp, r);
}

} // namespace loom::compiler
