//===- Launcher.h - loom train --nproc N: one process per local rank -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The launcher re-runs this loom binary N times with the launch variables
// of LaunchEnv.h set (MASTER_ADDR 127.0.0.1 and a free MASTER_PORT), and
// watches the children. When one fails (non-zero exit or a signal) it
// stops the others (SIGTERM, then SIGKILL after a grace period) and exits
// non-zero with one line naming the rank and how it ended. Children die
// with the launcher (PR_SET_PDEATHSIG), so no rank outlives the job.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_LAUNCHER_H
#define LOOM_TRAIN_LAUNCHER_H

#include "loom/train/RankPinning.h"

#include <string>
#include <vector>

namespace loom::train {

/// Exit status of a rank that stopped because another rank failed (its
/// peer died, hung or left): the launcher reports the other rank as the
/// cause.
constexpr int kExitPeerFailed = 3;

/// Runs `args` (argv without the program name and without --nproc) as
/// `nproc` local ranks; returns the launcher's exit status. `command` is
/// for messages ("train"). With `pinning.cpus`, rank r runs on
/// pinning.cpus[r] (LOOM_RANK_CPUS tells it so) with --threads
/// pinning.threads; its summary is printed first.
int launchLocalRanks(const std::string &command, int nproc, const std::vector<std::string> &args,
                     const RankPinning &pinning = {});

/// launchLocalRanks with the ranks placed by planRankPinning under
/// `pinRanks` ("auto", "on", "off") for `threads` CPU threads in all; with
/// "on" and too few CPUs, one error line and status 1 before any rank starts.
int launchPinnedLocalRanks(const std::string &command, int nproc,
                           const std::vector<std::string> &args, const std::string &pinRanks,
                           int threads);

/// argv[first..] without `--name VALUE` / `--name=VALUE`.
std::vector<std::string> argsWithout(int argc, char **argv, int first, const std::string &name);

} // namespace loom::train

#endif
