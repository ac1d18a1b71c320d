//===- PipelineProfileTest.cpp - Measured stage costs ---------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// The unpipelined schedule must run every compute action of its schedule,
// on the same ranks, with never two ranks busy at once; stage costs
// measured from timings recorded the way PipelineRank::runStep records
// them (one timing per compute action, one per transfer group) must give
// back the costs the timings were made with, the median over steps; the
// profile's JSON must read back what was written and refuse malformed
// files with the field at fault.
//===----------------------------------------------------------------------===//
#include "loom/runtime/PipelineProfile.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace loom::rt;

namespace {

PipelineSchedule built(ScheduleKind kind, int P, int V, int M) {
  PipelineSchedule s;
  std::string err;
  EXPECT_TRUE(buildSchedule(kind, P, V, M, s, err)) << err;
  return s;
}

std::vector<PipeAction> computeActions(const std::vector<PipeAction> &acts) {
  std::vector<PipeAction> out;
  for (const PipeAction &a : acts)
    if (!isTransfer(a.op))
      out.push_back(a);
  std::sort(out.begin(), out.end(), [](const PipeAction &a, const PipeAction &b) {
    return std::tie(a.op, a.stage, a.microbatch) < std::tie(b.op, b.stage, b.microbatch);
  });
  return out;
}

/// Timings as runStep records them, from a simulated timeline: compute
/// actions one each, a group of consecutive transfers one (its sends are
/// posted at its start, it ends when its receives are done).
StepTimings recorded(const PipelineSchedule &s, const ScheduleTimeline &t) {
  StepTimings step(static_cast<size_t>(s.ranks));
  for (int r = 0; r < s.ranks; ++r) {
    const std::vector<PipeAction> &acts = s.actions[size_t(r)];
    for (size_t k = 0; k < acts.size();) {
      const TimedAction &a = t.ranks[size_t(r)][k];
      if (!isTransfer(acts[k].op)) {
        step[size_t(r)].push_back({int(k), a.start, a.end, a.end - a.start});
        ++k;
        continue;
      }
      ActionTiming g{int(k), a.start, a.end, 0};
      for (; k < acts.size() && isTransfer(acts[k].op); ++k)
        g.end = std::max(g.end, t.ranks[size_t(r)][k].end);
      step[size_t(r)].push_back(g);
    }
  }
  return step;
}

TEST(PipelineProfile, SerialScheduleRunsTheSameActionsOneAtATime) {
  struct Case {
    ScheduleKind kind;
    int v;
  };
  for (Case c : {Case{ScheduleKind::GPipe, 1}, Case{ScheduleKind::OneFOneB, 1},
                 Case{ScheduleKind::Interleaved, 2}, Case{ScheduleKind::ZeroBubble, 1},
                 Case{ScheduleKind::ZeroBubble, 2}})
    for (int P : {2, 4})
      for (int M : {4, 8}) {
        PipelineSchedule s = built(c.kind, P, c.v, M), serial = serialSchedule(s);
        SCOPED_TRACE(serial.name + " P=" + std::to_string(P) + " M=" + std::to_string(M));
        EXPECT_EQ(serial.stageRank, s.stageRank);
        EXPECT_EQ(serial.splitBackward, s.splitBackward);
        for (int r = 0; r < P; ++r)
          EXPECT_EQ(computeActions(serial.actions[size_t(r)]), computeActions(s.actions[size_t(r)]));
        // Unit costs, free transfers: the ranks' busy times add up to the
        // makespan exactly when no two of them ever overlap.
        ScheduleTimeline t;
        std::string err;
        ASSERT_TRUE(simulateSchedule(serial, {}, t, err)) << err;
        double busy = 0;
        for (double b : t.busy) busy += b;
        EXPECT_DOUBLE_EQ(busy, t.makespan);
      }
}

TEST(PipelineProfile, ZbvSendsTheGradientAfterItsWeightGradient) {
  PipelineSchedule s = serialSchedule(built(ScheduleKind::ZeroBubble, 2, 2, 2));
  // Rank 1 holds stages 1 and 2: the gradient into stage 0 leaves only
  // after W of stage 1, or rank 0's I would overlap it.
  const std::vector<PipeAction> &r1 = s.actions[1];
  auto at = [&](PipeAction a) { return std::find(r1.begin(), r1.end(), a) - r1.begin(); };
  EXPECT_LT(at({PipeOp::BackwardWeight, 1, 0}), at({PipeOp::SendGradient, 1, 0}));
  EXPECT_LT(at({PipeOp::BackwardInput, 1, 0}), at({PipeOp::BackwardWeight, 1, 0}));
}

TEST(PipelineProfile, MeasuredCostsAreTheMediansOfWhatRan) {
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::ZeroBubble})
    for (int v : {1, 2}) {
      if (kind == ScheduleKind::OneFOneB && v == 2)
        continue;
      PipelineSchedule serial = serialSchedule(built(kind, 2, v, 4));
      SCOPED_TRACE(serial.name + " v=" + std::to_string(v));
      std::vector<StageCost> truth(static_cast<size_t>(serial.stages));
      for (size_t st = 0; st < truth.size(); ++st) {
        double k = double(st + 1);
        truth[st].forward = 1 * k;
        truth[st].backward = 3 * k;
        truth[st].backwardInput = 2 * k;
        truth[st].backwardWeight = 1 * k;
        truth[st].transfer = 0.25 * k;
      }
      // Three steps; one of them ten times slower (a stall): the medians
      // are the typical step's.
      std::vector<StepTimings> steps;
      for (double scale : {1.0, 10.0, 1.0}) {
        std::vector<StageCost> costs = truth;
        for (StageCost &c : costs) {
          c.forward *= scale, c.backward *= scale, c.backwardInput *= scale;
          c.backwardWeight *= scale, c.transfer *= scale;
        }
        ScheduleTimeline t;
        std::string err;
        ASSERT_TRUE(simulateSchedule(serial, costs, t, err)) << err;
        steps.push_back(recorded(serial, t));
      }
      std::vector<StageCost> got;
      std::string err;
      ASSERT_TRUE(measureStageCosts(serial, 1, steps, got, err)) << err;
      ASSERT_EQ(got.size(), truth.size());
      for (size_t st = 0; st < truth.size(); ++st) {
        EXPECT_DOUBLE_EQ(got[st].forward, truth[st].forward) << "stage " << st;
        if (serial.splitBackward) {
          EXPECT_DOUBLE_EQ(got[st].backwardInput, truth[st].backwardInput) << "stage " << st;
          EXPECT_DOUBLE_EQ(got[st].backwardWeight, truth[st].backwardWeight) << "stage " << st;
          EXPECT_DOUBLE_EQ(got[st].backward, truth[st].backwardInput + truth[st].backwardWeight);
        } else {
          EXPECT_DOUBLE_EQ(got[st].backward, truth[st].backward) << "stage " << st;
        }
        // A stage whose sends stay on its rank (ZBV's middle) measures none
        // and takes the median of all.
        bool sendsAcross = false;
        for (int nb : {int(st) - 1, int(st) + 1})
          sendsAcross |= nb >= 0 && nb < serial.stages &&
                         serial.stageRank[size_t(nb)] != serial.stageRank[st];
        if (sendsAcross)
          EXPECT_DOUBLE_EQ(got[st].transfer, truth[st].transfer) << "stage " << st;
      }
    }
}

TEST(PipelineProfile, MissingSamplesAreAnError) {
  PipelineSchedule serial = serialSchedule(built(ScheduleKind::OneFOneB, 2, 1, 2));
  std::vector<StageCost> got;
  std::string err;
  EXPECT_FALSE(measureStageCosts(serial, 1, {}, got, err));
  EXPECT_EQ(err, "no measured F of stage 0 (no step after the first?)");
}

TEST(PipelineProfile, JsonRoundTripAndErrors) {
  StageCostProfile p;
  p.source = "test";
  p.backend = "cpu";
  p.transport = "socket";
  p.ranks = 2;
  p.stages = 4;
  p.splitBackward = true;
  p.microbatchRows = 4;
  p.seq = 256;
  p.threadsPerRank = 1;
  p.steps = 3;
  for (int st = 0; st < 4; ++st) {
    StageCost c;
    c.forward = 0.01 * (st + 1);
    c.backwardInput = 0.02, c.backwardWeight = 0.005, c.backward = 0.025, c.transfer = 1e-4;
    p.costs.push_back(c);
  }
  StageCostProfile q;
  std::string err;
  ASSERT_TRUE(parseStageCostProfile(stageCostProfileJson(p), "p.json", q, err)) << err;
  EXPECT_EQ(q.source, "test");
  EXPECT_EQ(q.transport, "socket");
  EXPECT_EQ(q.ranks, 2);
  EXPECT_EQ(q.stages, 4);
  EXPECT_TRUE(q.splitBackward);
  EXPECT_EQ(q.microbatchRows, 4);
  EXPECT_EQ(q.seq, 256);
  ASSERT_EQ(q.costs.size(), 4u);
  EXPECT_DOUBLE_EQ(q.costs[3].forward, 0.04);
  EXPECT_DOUBLE_EQ(q.costs[1].transfer, 1e-4);
  EXPECT_TRUE(q.cuts.empty()); // the even split
  p.cuts = {3, 5, 6};
  ASSERT_TRUE(parseStageCostProfile(stageCostProfileJson(p), "p.json", q, err)) << err;
  EXPECT_EQ(q.cuts, (std::vector<int64_t>{3, 5, 6}));
  p.cuts = {3, 5};
  EXPECT_FALSE(parseStageCostProfile(stageCostProfileJson(p), "p.json", q, err));
  EXPECT_EQ(err, "p.json: \"cuts\" must list the first layer of each of the 3 stages after the "
                 "first");
  p.cuts = {3, 3, 6};
  EXPECT_FALSE(parseStageCostProfile(stageCostProfileJson(p), "p.json", q, err));
  EXPECT_EQ(err, "p.json: \"cuts\" must be increasing layer numbers >= 1");
  p.cuts.clear();

  EXPECT_FALSE(parseStageCostProfile("{}", "p.json", q, err));
  EXPECT_EQ(err, "p.json: not a stage-cost profile (\"format\": \"loom-stage-costs\" missing; "
                 "loom train --stage-costs-out writes one)");
  std::string text = stageCostProfileJson(p);
  std::string three = text;
  three.replace(three.find("\"stages\": 4"), 11, "\"stages\": 6");
  EXPECT_FALSE(parseStageCostProfile(three, "p.json", q, err));
  EXPECT_EQ(err, "p.json: \"stage_costs\" must list the 6 stages");
  std::string negative = text;
  negative.replace(negative.find("\"forward_s\": 0.01"), 17, "\"forward_s\": -1");
  EXPECT_FALSE(parseStageCostProfile(negative, "p.json", q, err));
  EXPECT_EQ(err, "p.json: stage 0: a time is negative");
  std::string noRows = text;
  noRows.replace(noRows.find("\"microbatch_rows\""), 17, "\"rows\"");
  EXPECT_FALSE(parseStageCostProfile(noRows, "p.json", q, err));
  EXPECT_EQ(err, "p.json: \"microbatch_rows\" is missing or not a number");
}

} // namespace
