//===- LaunchEnvTest.cpp - Reading torchrun's variables -------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/LaunchEnv.h"

#include <cstdlib>
#include <gtest/gtest.h>

using namespace loom::rt;

namespace {

/// Sets the launch variables for one test and clears them afterwards.
struct Vars {
  Vars(std::initializer_list<std::pair<const char *, const char *>> vars) {
    clear();
    for (auto [k, v] : vars) setenv(k, v, 1);
  }
  ~Vars() { clear(); }
  static void clear() {
    for (const char *k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "LOOM_RENDEZVOUS_PORT"})
      unsetenv(k);
  }
};

TEST(LaunchEnv, NoWorldSizeIsOneProcess) {
  Vars v({{"RANK", "3"}});
  LaunchEnv env;
  std::string err;
  ASSERT_TRUE(readLaunchEnv(env, err)) << err;
  EXPECT_FALSE(env.multiProcess);
}

TEST(LaunchEnv, ReadsTorchrunVariables) {
  Vars v({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
          {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  LaunchEnv env;
  std::string err;
  ASSERT_TRUE(readLaunchEnv(env, err)) << err;
  EXPECT_TRUE(env.multiProcess);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.worldSize, 8);
  EXPECT_EQ(env.localRank, 1);
  EXPECT_EQ(env.localWorldSize, 4);
  EXPECT_EQ(env.masterAddr, "node0");
  EXPECT_EQ(env.masterPort, 29500);
}

TEST(LaunchEnv, RendezvousPortOverridesMasterPort) {
  Vars v({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"},
          {"LOOM_RENDEZVOUS_PORT", "29611"}});
  LaunchEnv env;
  std::string err;
  ASSERT_TRUE(readLaunchEnv(env, err)) << err;
  EXPECT_EQ(env.masterPort, 29611);
}

TEST(LaunchEnv, BadValuesNameTheVariable) {
  LaunchEnv env;
  std::string err;
  {
    Vars v({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}});
    EXPECT_FALSE(readLaunchEnv(env, err));
    EXPECT_EQ(err, "RANK='2' is not an integer in [0, 1]");
  }
  {
    Vars v({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    EXPECT_FALSE(readLaunchEnv(env, err));
    EXPECT_EQ(err, "WORLD_SIZE=2 but MASTER_PORT is not set");
  }
}

} // namespace
