//===- LaunchEnv.h - Which rank this process is, from the environment -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A multi-process job is described by torchrun's variables, which loom's
// own launcher (loom train --nproc) sets too: RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. A launcher such
// as torchrun, or a Slurm script exporting them from SLURM_PROCID etc.,
// starts one loom per rank with them set. LOOM_RENDEZVOUS_PORT overrides
// MASTER_PORT when the launcher itself already listens there (torchrun's
// agent store).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_LAUNCHENV_H
#define LOOM_RUNTIME_LAUNCHENV_H

#include <string>

namespace loom::rt {

struct LaunchEnv {
  bool multiProcess = false; // WORLD_SIZE is set and > 1
  int rank = 0, worldSize = 1;
  int localRank = 0, localWorldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;
};

/// Reads the variables. Without WORLD_SIZE (or with WORLD_SIZE=1) this is
/// a single process. With it, RANK and MASTER_PORT are required and every
/// value must be well formed; false with a one-line error naming the
/// variable otherwise.
bool readLaunchEnv(LaunchEnv &env, std::string &err);

} // namespace loom::rt

#endif
