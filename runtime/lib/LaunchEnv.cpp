//===- LaunchEnv.cpp ------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/LaunchEnv.h"
#include "lib/Diagnostics.h"

#include <cstdlib>

namespace loom::rt {

namespace {

/// Reads integer variable `name` into `out` when it is set.
bool readInt(const char *name, int lo, int hi, int &out, bool &set, std::string &err) {
  const char *v = std::getenv(name);
  set = v && *v;
  if (!set)
    return true;
  char *end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x < lo || x > hi) {
    err = cat(name, "='", v, "' is not an integer in [", lo, ", ", hi, "]");
    return false;
  }
  out = int(x);
  return true;
}

} // namespace

bool readLaunchEnv(LaunchEnv &env, std::string &err) {
  env = LaunchEnv();
  bool set = false;
  if (!readInt("WORLD_SIZE", 1, 1 << 20, env.worldSize, set, err))
    return false;
  if (!set || env.worldSize == 1)
    return true;
  env.multiProcess = true;
  bool rankSet = false, portSet = false, overrideSet = false;
  if (!readInt("RANK", 0, env.worldSize - 1, env.rank, rankSet, err) ||
      !readInt("LOCAL_RANK", 0, env.worldSize - 1, env.localRank, set, err) ||
      !readInt("LOCAL_WORLD_SIZE", 1, env.worldSize, env.localWorldSize, set, err) ||
      !readInt("MASTER_PORT", 1, 65535, env.masterPort, portSet, err) ||
      !readInt("LOOM_RENDEZVOUS_PORT", 1, 65535, env.masterPort, overrideSet, err))
    return false;
  if (!rankSet) {
    err = cat("WORLD_SIZE=", env.worldSize, " but RANK is not set (a launcher sets both)");
    return false;
  }
  if (!portSet && !overrideSet) {
    err = cat("WORLD_SIZE=", env.worldSize, " but MASTER_PORT is not set");
    return false;
  }
  if (const char *a = std::getenv("MASTER_ADDR"); a && *a)
    env.masterAddr = a;
  return true;
}

} // namespace loom::rt
