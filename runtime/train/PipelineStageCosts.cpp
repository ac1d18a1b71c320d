//===- PipelineStageCosts.cpp - loom train --stage-costs-out --------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/PipelineStageCosts.h"
#include "loom/runtime/AtomicFile.h"
#include "loom/train/PipelineRunner.h"
#include "loom/runtime/PipelineProfile.h"
#include "loom/runtime/CpuAffinity.h"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <ctime>
#include <unistd.h>

namespace loom::train {

int stageThreadsPerRank(int threads, int localRanks) {
  int hw = std::max(1, int(std::thread::hardware_concurrency()));
  return std::max(1, (threads > 0 ? threads : hw) / std::max(1, localRanks));
}

bool writeStageCosts(const TrainProgram &tp, const StepRunner &r, const std::string &backend,
                     bool multiProcess, int threads, const std::string &path, std::string &err) {
  std::string transport = multiProcess ? "socket" : "in-process";
  int threadsPerRank = stageThreadsPerRank(threads, tp.worldSize());
  const PipelineStats *stats = pipelineStats(r);
  if (!tp.pipeline || !stats) {
    err = "--stage-costs-out needs a pipeline plan (pp > 1)";
    return false;
  }
  if (stats->steps.size() < 2) {
    err = "--stage-costs-out needs at least 2 steps (the first pays for warm-up and is skipped)";
    return false;
  }
  const rt::PipelineProgram &pp = *tp.pipeline;
  std::vector<rt::StepTimings> steps;
  for (size_t s = 1; s < stats->steps.size(); ++s) {
    rt::StepTimings step;
    for (const PipelineStats::Rank &rank : stats->steps[s]) step.push_back(rank.timings);
    steps.push_back(std::move(step));
  }
  rt::StageCostProfile p;
  if (!rt::measureStageCosts(pp.schedule, pp.ranksPerStage, steps, p.costs, err)) {
    err = "--stage-costs-out: " + err;
    return false;
  }
  char host[256] = "?", date[32] = "?";
  gethostname(host, sizeof host - 1);
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  // Whether the ranks had CPUs of their own: costs measured unpinned on a
  // many-core host may not describe another run's ranks (RankPinning.h).
  std::string placement = rt::pinnedRankCpus().empty() ? "ranks not pinned" : "ranks pinned";
  p.source = "loom train, schedule " + pp.schedule.name + ", on " + host + ", " + date + ", " +
             placement;
  p.backend = backend;
  p.transport = transport;
  p.ranks = pp.schedule.ranks;
  p.stages = pp.schedule.stages;
  p.splitBackward = pp.schedule.splitBackward;
  p.microbatchRows = tp.localBatch() / pp.microbatches;
  p.seq = tp.seq;
  p.tp = tp.tp;
  p.dpShard = tp.dpShard;
  p.dpReplicate = tp.dpReplicate;
  p.threadsPerRank = threadsPerRank;
  p.steps = int(steps.size());
  p.cuts = pp.stageCuts;
  if (!rt::writeAtomically(path, rt::stageCostProfileJson(p), err))
    return false;
  std::printf("wrote %s (stage costs over %zu steps of schedule %s)\n", path.c_str(), steps.size(),
              pp.schedule.name.c_str());
  return true;
}

} // namespace loom::train
