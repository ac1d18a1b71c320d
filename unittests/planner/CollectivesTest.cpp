//===- CollectivesTest.cpp - Alpha-beta collective costs by hand ----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Collectives.h"

#include <gtest/gtest.h>

using namespace loom::planner;

namespace {

Link link(double gbps, double alphaUs) {
  Link l;
  l.name = "test";
  l.bandwidth = gbps * 1e9;
  l.alpha = alphaUs * 1e-6;
  return l;
}

TEST(PlannerCollectives, RingFormulas) {
  Link l = link(100, 10); // 100 GB/s, 10 us per step
  // All-reduce of 1 MB on 4 ranks: 2*(4-1) steps of 10 us = 60 us, plus
  // 2*(3/4)*1e6 B / 1e11 B/s = 15 us. Total 75 us.
  EXPECT_NEAR(allReduceTime(4, 1e6, l), 75e-6, 1e-12);
  // All-gather of an 8 MB (gathered) tensor on 8 ranks: 7 * 10 us = 70 us
  // plus (7/8) * 8e6 / 1e11 = 70 us. Total 140 us.
  EXPECT_NEAR(allGatherTime(8, 8e6, l), 140e-6, 1e-12);
  // Reduce-scatter moves the same bytes as all-gather.
  EXPECT_NEAR(reduceScatterTime(8, 8e6, l), 140e-6, 1e-12);
  // Send/recv of 2 MB: 10 us + 2e6 / 1e11 = 20 us. Total 30 us.
  EXPECT_NEAR(sendRecvTime(2e6, l), 30e-6, 1e-12);
  // One rank (or nothing to send) costs nothing.
  EXPECT_EQ(allReduceTime(1, 1e9, l), 0);
  EXPECT_EQ(allGatherTime(4, 0, l), 0);
  EXPECT_EQ(collectiveTime(CommKind::AllReduce, 4, 1e6, l), allReduceTime(4, 1e6, l));
}

TEST(PlannerCollectives, GroupPlacement) {
  // 8 GPUs per node. tp=8 (stride 1) fills a node: inside.
  EXPECT_TRUE(groupInsideNode(8, 1, 8));
  // dp=2 with stride 4 (tp=4 inside it): ranks 0 and 4, still one node.
  EXPECT_TRUE(groupInsideNode(2, 4, 8));
  // dp=2 with stride 8: ranks 0 and 8 are on two nodes.
  EXPECT_FALSE(groupInsideNode(2, 8, 8));
  // tp=3 on 8-GPU nodes: groups {6,7,8} straddle nodes.
  EXPECT_FALSE(groupInsideNode(3, 1, 8));
  HardwareProfile hw;
  hw.intraNode = link(450, 10);
  hw.interNode = link(50, 20);
  EXPECT_EQ(&groupLink(hw, 2, 4, 8), &hw.intraNode);
  EXPECT_EQ(&groupLink(hw, 2, 8, 8), &hw.interNode);
}

} // namespace
