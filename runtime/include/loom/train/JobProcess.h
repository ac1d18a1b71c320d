//===- JobProcess.h - This process's place in a training job ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A training process is either the whole job (one device, or every rank
// simulated on this machine) or one rank of a job with a process per rank,
// started by `loom train --nproc`, torchrun or a Slurm script (their
// variables: rt::readLaunchEnv). Such a rank joins the others before it
// compiles, so a wrong address or a missing rank is reported in seconds,
// and only rank 0 speaks on stdout.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_JOBPROCESS_H
#define LOOM_TRAIN_JOBPROCESS_H

#include "loom/runtime/LaunchEnv.h"
#include "loom/runtime/Rendezvous.h"
#include "loom/train/StepRunner.h"

#include <memory>
#include <string>

namespace loom::train {

struct JobProcess {
  rt::LaunchEnv env;
  bool lead = true;       // prints, logs, checkpoints and exports (rank 0)
  std::string rankPrefix; // "rank r: " before errors in a multi-process job
  std::unique_ptr<rt::Rendezvous> rendezvous; // joined ranks, until the runner takes it
};

/// `--nproc N`: at least 1, and N > 1 (this process launches the ranks)
/// only outside a launched job and equal to the plan's `planRanks`
/// (`planText` names the plan); `--pin-ranks` auto, on or off. False with
/// `err`.
bool checkLocalRanks(int64_t nproc, const rt::LaunchEnv &env, int planRanks,
                     const std::string &planText, const std::string &pinRanks, std::string &err);

/// For `env` (read by the caller): in a multi-process job, checks that the
/// job has the plan's `planRanks` ranks (`planText` names the plan in the
/// error), joins the rendezvous within `rendezvousTimeoutS` and sends
/// stdout of ranks other than 0 to /dev/null. False with `err` prefixed
/// with the rank.
bool joinJob(const rt::LaunchEnv &env, int planRanks, const std::string &planText,
             double rendezvousTimeoutS, JobProcess &out, std::string &err);

/// The runner of this process's part of the job: every rank (simulated or
/// one device) on `backend`, or its own rank over the joined rendezvous.
std::unique_ptr<StepRunner> createJobRunner(const TrainProgram &tp, JobProcess &job, int threads,
                                            const std::string &backend,
                                            double collectiveTimeoutS, std::string &err);

} // namespace loom::train

#endif
