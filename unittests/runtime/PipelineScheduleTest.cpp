//===- PipelineScheduleTest.cpp - Schedules as data -----------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Every built schedule must pass its own validator; GPipe's and 1F1B's
// unit-cost bubble must be the textbook (P - 1) / (M + P - 1), their
// activation peaks M and min(P - r, M); interleaved and zero-bubble
// schedules must idle less than 1F1B on the same work. Broken schedules
// (deadlocks, missing actions, mismatched transfers) fail with the first
// rank and action that cannot proceed.
//===----------------------------------------------------------------------===//
#include "loom/runtime/PipelineSchedule.h"

#include <gtest/gtest.h>

using namespace loom::rt;

namespace {

ScheduleTimeline run(const PipelineSchedule &s) {
  ScheduleTimeline t;
  std::string err;
  EXPECT_TRUE(simulateSchedule(s, {}, t, err)) << s.name << ": " << err;
  return t;
}

TEST(PipelineSchedule, EveryBuiltScheduleIsValid) {
  struct Case {
    ScheduleKind kind;
    int v;
  };
  for (Case c : {Case{ScheduleKind::GPipe, 1}, Case{ScheduleKind::OneFOneB, 1},
                 Case{ScheduleKind::Interleaved, 2}, Case{ScheduleKind::Interleaved, 3},
                 Case{ScheduleKind::ZeroBubble, 1}, Case{ScheduleKind::ZeroBubble, 2}})
    for (int P : {1, 2, 4})
      for (int M : {4, 8, 12}) {
        PipelineSchedule s;
        std::string err;
        ASSERT_TRUE(buildSchedule(c.kind, P, c.v, M, s, err)) << err;
        EXPECT_EQ(validateSchedule(s), "")
            << scheduleKindName(c.kind) << " P=" << P << " V=" << c.v << " M=" << M;
      }
}

TEST(PipelineSchedule, GPipeAndOneFOneBHaveTheTextbookBubble) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int P : {2, 4})
      for (int M : {4, 8}) {
        PipelineSchedule s;
        std::string err;
        ASSERT_TRUE(buildSchedule(kind, P, 1, M, s, err)) << err;
        ScheduleTimeline t = run(s);
        double want = double(P - 1) / double(M + P - 1);
        for (int r = 0; r < P; ++r) {
          EXPECT_NEAR(t.idleFraction[r], want, 1e-12) << scheduleKindName(kind) << " rank " << r;
          EXPECT_EQ(t.peakInFlight[r], kind == ScheduleKind::GPipe ? M : std::min(P - r, M));
        }
      }
}

TEST(PipelineSchedule, InterleavedAndZeroBubbleIdleLessThanOneFOneB) {
  for (int P : {2, 4}) {
    int M = 8;
    PipelineSchedule f1b, inter, zb;
    std::string err;
    ASSERT_TRUE(buildSchedule(ScheduleKind::OneFOneB, P, 1, M, f1b, err));
    ASSERT_TRUE(buildSchedule(ScheduleKind::Interleaved, P, 2, M, inter, err));
    ASSERT_TRUE(buildSchedule(ScheduleKind::ZeroBubble, P, 1, M, zb, err));
    double base = run(f1b).bubble();
    // Interleaved stages are half as long: the same work, costs halved.
    std::vector<StageCost> half(size_t(2 * P));
    for (StageCost &c : half) c.forward = 0.5, c.backward = 1;
    ScheduleTimeline ti;
    ASSERT_TRUE(simulateSchedule(inter, half, ti, err)) << err;
    EXPECT_LT(ti.bubble(), base) << "interleaved P=" << P;
    EXPECT_LT(run(zb).bubble(), base) << "zb P=" << P;
    // ZB-H1 keeps 1F1B's count of microbatches waiting for their I.
    EXPECT_EQ(zb.stageRank, f1b.stageRank);
  }
}

TEST(PipelineSchedule, ZbvFoldsTheStagesIntoAV) {
  PipelineSchedule s;
  std::string err;
  ASSERT_TRUE(buildSchedule(ScheduleKind::ZeroBubble, 2, 2, 4, s, err)) << err;
  EXPECT_EQ(s.stageRank, (std::vector<int>{0, 1, 1, 0}));
  // Stages 1 and 2 share rank 1: no transfer between them.
  for (const PipeAction &a : s.actions[1])
    if (isTransfer(a.op))
      EXPECT_TRUE((a.stage == 1 && (a.op == PipeOp::RecvActivation || a.op == PipeOp::SendGradient)) ||
                  (a.stage == 2 && (a.op == PipeOp::SendActivation || a.op == PipeOp::RecvGradient)))
          << describeAction(a);
}

TEST(PipelineSchedule, UnsupportedCombinationsAreRefused) {
  PipelineSchedule s;
  std::string err;
  EXPECT_FALSE(buildSchedule(ScheduleKind::OneFOneB, 2, 2, 4, s, err));
  EXPECT_NE(err.find("1f1b runs one stage per rank"), std::string::npos) << err;
  EXPECT_FALSE(buildSchedule(ScheduleKind::Interleaved, 4, 2, 6, s, err));
  EXPECT_NE(err.find("multiple of pp"), std::string::npos) << err;
  EXPECT_FALSE(buildSchedule(ScheduleKind::ZeroBubble, 2, 3, 4, s, err));
}

TEST(PipelineSchedule, CsvRoundTripsAndInsertsTransfers) {
  PipelineSchedule s, back;
  std::string err;
  ASSERT_TRUE(buildSchedule(ScheduleKind::Interleaved, 2, 2, 4, s, err));
  ASSERT_TRUE(parseScheduleCsv(scheduleCsv(s), "s.csv", back, err)) << err;
  EXPECT_EQ(back.actions, s.actions);
  EXPECT_EQ(back.stageRank, s.stageRank);
  // Compute actions only: the transfers come back as for built schedules.
  std::string compute = "rank,action,stage,microbatch\n# 1F1B, P = 2, M = 2\n";
  PipelineSchedule ref;
  ASSERT_TRUE(buildSchedule(ScheduleKind::OneFOneB, 2, 1, 2, ref, err));
  for (int r = 0; r < 2; ++r)
    for (const PipeAction &a : ref.actions[r])
      if (!isTransfer(a.op))
        compute += std::to_string(r) + "," + pipeOpName(a.op) + "," + std::to_string(a.stage) +
                   "," + std::to_string(a.microbatch) + "\n";
  ASSERT_TRUE(parseScheduleCsv(compute, "c.csv", back, err)) << err;
  EXPECT_EQ(back.actions, ref.actions);
  EXPECT_FALSE(parseScheduleCsv("0,F,0,0\n1,X,1,0\n", "x.csv", back, err));
  EXPECT_EQ(err, "x.csv:2: unknown action 'X' (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B)");
  EXPECT_FALSE(parseScheduleCsv("0,F,0,0\n1,F,0,1\n", "y.csv", back, err));
  EXPECT_EQ(err, "y.csv:2: stage 0 runs on rank 0 and on rank 1");
}

TEST(PipelineSchedule, DeadlockNamesTheFirstRankAndAction) {
  // Rank 0 waits for the gradient before sending the activation that
  // rank 1 needs to compute it.
  PipelineSchedule s;
  std::string err;
  ASSERT_TRUE(parseScheduleCsv("0,F,0,0\n0,RECV_B,0,0\n0,B,0,0\n0,SEND_F,0,0\n"
                               "1,RECV_F,1,0\n1,F,1,0\n1,B,1,0\n1,SEND_B,1,0\n",
                               "d.csv", s, err))
      << err;
  EXPECT_EQ(validateSchedule(s),
            "rank 0 action 1 (RECV_B stage 0 mb 0 from rank 1) cannot proceed: deadlock: rank 1 "
            "sends it at its action 3 but waits at action 0 (RECV_F stage 1 mb 0 from rank 0)");
}

TEST(PipelineSchedule, IncompleteSchedulesNameWhatNeverRuns) {
  PipelineSchedule s;
  std::string err;
  // Rank 1 never runs the backward of microbatch 1: rank 0 waits for its
  // gradient forever.
  ASSERT_TRUE(parseScheduleCsv("0,F,0,0\n0,F,0,1\n0,B,0,0\n0,B,0,1\n"
                               "1,F,1,0\n1,B,1,0\n1,F,1,1\n",
                               "i.csv", s, err));
  EXPECT_EQ(validateSchedule(s), "rank 0 action 6 (RECV_B stage 0 mb 1 from rank 1) cannot "
                                 "proceed: deadlock: rank 1 never sends it");
  // The last stage's missing backward: nobody waits, the check at the end
  // names it.
  ASSERT_TRUE(parseScheduleCsv("0,F,0,0\n0,B,0,0\n", "j.csv", s, err));
  ASSERT_TRUE(parseScheduleCsv("0,F,0,0\n0,F,0,1\n0,B,0,0\n", "j.csv", s, err));
  EXPECT_EQ(validateSchedule(s), "rank 0 never runs B stage 0 mb 1: the schedule is incomplete "
                                 "(every microbatch must pass every stage)");
  // A backward before its forward.
  ASSERT_TRUE(parseScheduleCsv("0,B,0,0\n0,F,0,0\n", "k.csv", s, err));
  EXPECT_EQ(validateSchedule(s), "rank 0 action 0 (B stage 0 mb 0) cannot proceed: the forward of "
                                 "stage 0 microbatch 0 has not run on rank 0");
}

TEST(PipelineSchedule, MismatchedTransfersAreNamed) {
  // Rank 1 receives microbatch 1 first, rank 0 sends microbatch 0 first.
  PipelineSchedule s;
  std::string err;
  ASSERT_TRUE(parseScheduleCsv("0,F,0,0\n0,SEND_F,0,0\n0,F,0,1\n0,SEND_F,0,1\n"
                               "1,RECV_F,1,1\n1,F,1,1\n",
                               "m.csv", s, err));
  EXPECT_EQ(validateSchedule(s), "rank 1 action 0 (RECV_F stage 1 mb 1 from rank 0) cannot "
                                 "proceed: it would receive rank 0's SEND_F stage 0 mb 0 (action "
                                 "1): sends and receives do not match");
}

TEST(PipelineSchedule, TableAndSvgShowEveryComputeAction) {
  PipelineSchedule s;
  std::string err;
  ASSERT_TRUE(buildSchedule(ScheduleKind::OneFOneB, 2, 1, 2, s, err));
  EXPECT_EQ(scheduleTable(s), "time  0  1  2  3  4  5  6  7  8  \n"
                              "rank0 F0 F1 .  .  B0 B0 .  B1 B1 \n"
                              "rank1 .  F0 B0 B0 F1 B1 B1 .  .  \n");
  std::string svg = scheduleSvg(s, run(s), "t");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 8, true);
  EXPECT_NE(svg.find("<title>B stage 1 mb 1</title>"), std::string::npos);
}

} // namespace
