//===- MeshPlanTest.cpp - The --plan spelling and the world-size identity -===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Plan.h"

#include <gtest/gtest.h>

using namespace loom::planner;

namespace {

TEST(MeshPlan, ParsesKeysInAnyOrderWithDefaultsOfOne) {
  Plan p;
  std::string err;
  ASSERT_TRUE(parseMeshPlan("dp_shard=4,dp_replicate=2", p, err)) << err;
  EXPECT_EQ(p.dpReplicate, 2);
  EXPECT_EQ(p.dpShard, 4);
  EXPECT_EQ(p.tp, 1);
  EXPECT_EQ(p.gpus(), 8);
  EXPECT_EQ(meshPlanName(p), "dp_replicate=2,dp_shard=4");
  ASSERT_TRUE(parseMeshPlan("1", p, err));
  EXPECT_EQ(p.gpus(), 1);
  EXPECT_EQ(meshPlanName(p), "1");
  ASSERT_TRUE(parseMeshPlan("cp=2,pp=3,tp=2", p, err));
  EXPECT_EQ(p.gpus(), 12);
}

TEST(MeshPlan, RejectsBadItemsWithTheirName) {
  Plan p;
  std::string err;
  EXPECT_FALSE(parseMeshPlan("dp=2", p, err));
  EXPECT_NE(err.find("unknown key 'dp'"), std::string::npos) << err;
  EXPECT_FALSE(parseMeshPlan("dp_shard=0", p, err));
  EXPECT_NE(err.find("positive integer"), std::string::npos) << err;
  EXPECT_FALSE(parseMeshPlan("dp_shard=x", p, err));
  EXPECT_FALSE(parseMeshPlan("dp_shard=-2", p, err));
  EXPECT_FALSE(parseMeshPlan("dp_shard", p, err));
  EXPECT_FALSE(parseMeshPlan("dp_shard=2,,tp=2", p, err));
  EXPECT_FALSE(parseMeshPlan("dp_shard=2,", p, err));
  EXPECT_FALSE(parseMeshPlan("tp=2,tp=2", p, err));
  EXPECT_NE(err.find("twice"), std::string::npos) << err;
  EXPECT_FALSE(parseMeshPlan("", p, err));
}

TEST(MeshPlan, SequenceAndLossChoicesParseAndNameThePlan) {
  Plan p;
  std::string err;
  ASSERT_TRUE(parseMeshPlan("cp=2,tp=2", p, err)) << err;
  EXPECT_EQ(p.cpRotate, CpRotate::AllGather); // defaults: all-gather, sp and loss parallel on
  EXPECT_TRUE(p.tpSp);
  EXPECT_TRUE(p.lossParallel);
  EXPECT_EQ(meshPlanName(p), "cp=2,tp=2");
  ASSERT_TRUE(parseMeshPlan("tp=2,cp=2,cp_rotate=ring,tp_sp=off,loss_parallel=off", p, err)) << err;
  EXPECT_EQ(p.cpRotate, CpRotate::Ring);
  EXPECT_FALSE(p.tpSp);
  EXPECT_FALSE(p.lossParallel);
  EXPECT_EQ(p.gpus(), 4); // the choices are not mesh factors
  EXPECT_EQ(meshPlanName(p), "cp=2,tp=2,cp_rotate=ring,tp_sp=off,loss_parallel=off");
  // Choices that do not apply to the plan's axes are left out of its name.
  ASSERT_TRUE(parseMeshPlan("dp_shard=2,cp_rotate=ring,tp_sp=off", p, err)) << err;
  EXPECT_EQ(meshPlanName(p), "dp_shard=2");
  EXPECT_FALSE(parseMeshPlan("cp=2,cp_rotate=zigzag", p, err));
  EXPECT_EQ(err, "plan 'cp=2,cp_rotate=zigzag': cp_rotate must be allgather or ring, not 'zigzag'");
  EXPECT_FALSE(parseMeshPlan("tp=2,tp_sp=yes", p, err));
  EXPECT_EQ(err, "plan 'tp=2,tp_sp=yes': tp_sp must be on or off, not 'yes'");
  EXPECT_FALSE(parseMeshPlan("tp=2,loss_parallel=on,loss_parallel=off", p, err));
  EXPECT_NE(err.find("'loss_parallel' is given twice"), std::string::npos) << err;
}

TEST(MeshPlan, WorldSizeIdentityIsExplained) {
  Plan p;
  std::string err;
  ASSERT_TRUE(parseMeshPlan("dp_replicate=2,dp_shard=2", p, err));
  EXPECT_EQ(checkWorldSize(p, 4), "");
  std::string why = checkWorldSize(p, 2);
  EXPECT_NE(why.find("dp_replicate=2 x dp_shard=2 x cp=1 x tp=1 x pp=1 = 4 ranks"),
            std::string::npos) << why;
  EXPECT_NE(why.find("world size is 2"), std::string::npos) << why;
}

TEST(MeshPlan, PipelineKeysFollowPp) {
  Plan p;
  std::string err;
  ASSERT_TRUE(parseMeshPlan("pp=2", p, err)) << err;
  EXPECT_EQ(p.schedule, Schedule::OneFOneB); // the defaults: 1F1B, one microbatch per stage
  EXPECT_EQ(p.microbatches, 2);
  EXPECT_EQ(meshPlanName(p), "pp=2,pp_schedule=1f1b,microbatches=2");
  ASSERT_TRUE(parseMeshPlan("microbatches=8,pp_schedule=interleaved,pp=4,dp_shard=2", p, err));
  EXPECT_EQ(p.schedule, Schedule::Interleaved);
  EXPECT_EQ(p.virtualStages, 2);
  EXPECT_EQ(p.microbatches, 8);
  EXPECT_EQ(p.gpus(), 8);
  EXPECT_EQ(meshPlanName(p), "dp_shard=2,pp=4,pp_schedule=interleaved,pp_virtual=2,microbatches=8");
  ASSERT_TRUE(parseMeshPlan("pp=2,pp_schedule=zb,pp_virtual=2", p, err)) << err;
  EXPECT_EQ(p.schedule, Schedule::ZeroBubble);
  ASSERT_TRUE(parseMeshPlan("pp=2,pp_schedule=mine.csv", p, err)) << err;
  EXPECT_EQ(p.scheduleFile, "mine.csv");
  EXPECT_FALSE(parseMeshPlan("microbatches=4", p, err));
  EXPECT_NE(err.find("need pp > 1"), std::string::npos) << err;
  EXPECT_FALSE(parseMeshPlan("pp=2,pp_schedule=fast", p, err));
  EXPECT_NE(err.find("pp_schedule must be gpipe, 1f1b, interleaved, zb"), std::string::npos) << err;
  EXPECT_FALSE(parseMeshPlan("pp=2,microbatches=0", p, err));
  EXPECT_FALSE(parseMeshPlan("pp=2,pp_schedule=gpipe,pp_schedule=1f1b", p, err));
  EXPECT_NE(err.find("twice"), std::string::npos) << err;
  // Pipeline plans run tp without sequence parallelism and the
  // vocabulary-parallel loss: off by default, named when asked for.
  ASSERT_TRUE(parseMeshPlan("tp=2,pp=2", p, err)) << err;
  EXPECT_FALSE(p.tpSp);
  EXPECT_FALSE(p.lossParallel);
  EXPECT_EQ(meshPlanName(p), "tp=2,pp=2,pp_schedule=1f1b,microbatches=2");
  ASSERT_TRUE(parseMeshPlan("tp=2,pp=2,tp_sp=on,loss_parallel=off", p, err)) << err;
  EXPECT_EQ(meshPlanName(p), "tp=2,pp=2,pp_schedule=1f1b,microbatches=2,tp_sp=on");
}

TEST(MeshPlan, DataContextTensorAndPipelineAxesAreExecutable) {
  Plan p;
  std::string err;
  ASSERT_TRUE(parseMeshPlan("dp_replicate=2,dp_shard=2", p, err));
  EXPECT_EQ(checkExecutable(p), "");
  ASSERT_TRUE(parseMeshPlan("pp=2,tp=2", p, err));
  EXPECT_EQ(checkExecutable(p), "");
  ASSERT_TRUE(parseMeshPlan("cp=2", p, err));
  EXPECT_EQ(checkExecutable(p), "");
  ASSERT_TRUE(parseMeshPlan("cp=2,pp=2", p, err));
  EXPECT_NE(checkExecutable(p).find("pp (pipeline parallel) with cp (context parallel)"),
            std::string::npos);
  ASSERT_TRUE(parseMeshPlan("tp=2,pp=2,tp_sp=on", p, err));
  EXPECT_NE(checkExecutable(p).find("with tp_sp=on (sequence parallel)"), std::string::npos);
  ASSERT_TRUE(parseMeshPlan("tp=2,pp=2,loss_parallel=on", p, err));
  EXPECT_NE(checkExecutable(p).find("with loss_parallel=on"), std::string::npos);
}

} // namespace
