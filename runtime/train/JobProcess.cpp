//===- JobProcess.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/JobProcess.h"
#include "loom/train/RankPinning.h"

#include <cstdio>

namespace loom::train {

bool checkLocalRanks(int64_t nproc, const rt::LaunchEnv &env, int planRanks,
                     const std::string &planText, const std::string &pinRanks, std::string &err) {
  if (PinRanks mode; !parsePinRanks(pinRanks, mode, err))
    return false;
  if (nproc < 1)
    err = "--nproc must be at least 1";
  else if (nproc > 1 && env.multiProcess)
    err = "--nproc " + std::to_string(nproc) + " inside a launched job (WORLD_SIZE=" +
          std::to_string(env.worldSize) + "): use one or the other";
  else if (nproc > 1 && nproc != int64_t(planRanks))
    err = "--nproc " + std::to_string(nproc) + " but plan '" + planText + "' has " +
          std::to_string(planRanks) + " ranks";
  else
    return true;
  return false;
}

bool joinJob(const rt::LaunchEnv &env, int planRanks, const std::string &planText,
             double rendezvousTimeoutS, JobProcess &out, std::string &err) {
  out.env = env;
  out.lead = !env.multiProcess || env.rank == 0;
  out.rankPrefix = env.multiProcess ? "rank " + std::to_string(env.rank) + ": " : "";
  if (!env.multiProcess)
    return true;
  if (env.worldSize != planRanks) {
    err = out.rankPrefix + "plan '" + planText + "' has " + std::to_string(planRanks) +
          " ranks, the job " + std::to_string(env.worldSize) + " processes (WORLD_SIZE)";
    return false;
  }
  out.rendezvous = rt::Rendezvous::join(env.rank, env.worldSize, env.masterAddr, env.masterPort,
                                        rendezvousTimeoutS, err);
  if (!out.rendezvous) {
    err = out.rankPrefix + err;
    return false;
  }
  // Only rank 0 speaks on stdout (the ranks' lines would repeat it);
  // errors still go to stderr, prefixed with the rank.
  if (!out.lead && !std::freopen("/dev/null", "w", stdout)) {
    err = out.rankPrefix + "cannot silence stdout";
    return false;
  }
  // Where the launcher put this rank (--pin-ranks), as the rank sees it.
  if (std::string cpus = describeRankCpus(); out.lead && !cpus.empty())
    std::printf("%s\n", cpus.c_str());
  return true;
}

std::unique_ptr<StepRunner> createJobRunner(const TrainProgram &tp, JobProcess &job, int threads,
                                            const std::string &backend,
                                            double collectiveTimeoutS, std::string &err) {
  if (job.env.multiProcess)
    return StepRunner::createDistributed(tp, threads, backend, std::move(job.rendezvous),
                                         job.env.localRank, job.env.localWorldSize,
                                         collectiveTimeoutS, err);
  return StepRunner::create(tp, threads, err, backend);
}

} // namespace loom::train
