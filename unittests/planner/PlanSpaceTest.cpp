//===- PlanSpaceTest.cpp - Plan enumeration, ids and sharding rules -------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/Plan.h"
#include "planner/ShardingRules.h"

#include <gtest/gtest.h>

#include <set>

using namespace loom::planner;

namespace {

TEST(PlannerPlanSpace, Factorizations) {
  // Ordered 5-factorizations of 2^3: distribute 3 identical factors over 5
  // dims, C(3+4, 4) = 35.
  std::vector<Plan> f8 = factorizations(8);
  EXPECT_EQ(f8.size(), 35u);
  for (const Plan &p : f8) EXPECT_EQ(p.gpus(), 8);
  // 12 = 2^2 * 3: C(2+4, 4) * C(1+4, 4) = 15 * 5 = 75.
  EXPECT_EQ(factorizations(12).size(), 75u);
  EXPECT_EQ(factorizations(1).size(), 1u);
}

TEST(PlannerPlanSpace, EnumerationCountsSchedulesPoliciesAndFp8) {
  PlanRequest req;
  req.gpus = 2;
  req.microbatch = 1;
  // 2 GPUs: five factorizations (one dim is 2). Four have pp=1: one
  // schedule each; pp=2 gets GPipe, 1F1B and zero bubble ZB-H1
  // (interleaving and ZBV need pp*v <= 2 layers, so none). Each times 3
  // checkpoint policies x fp8 on/off: (4 * 1 + 1 * 3) * 3 * 2 = 42.
  std::vector<Plan> plans = enumeratePlans(req, 2);
  EXPECT_EQ(plans.size(), 42u);
  // With 8 layers pp=2 may interleave v=2, 3, 4 and fold into ZBV:
  // (4 + 7) * 6 = 66.
  EXPECT_EQ(enumeratePlans(req, 8).size(), 66u);
  // Only bf16: half.
  req.allowFp8 = false;
  EXPECT_EQ(enumeratePlans(req, 2).size(), 21u);
  // Microbatches follow the global batch: 2 GPUs x batch 1 = 2 sequences;
  // dp=2 plans take 1 microbatch per rank, dp=1 plans take 2.
  for (const Plan &p : plans) EXPECT_EQ(p.microbatches, p.dp() == 2 ? 1 : 2);
  std::set<std::string> ids;
  for (const Plan &p : plans) ids.insert(p.id());
  EXPECT_EQ(ids.size(), plans.size());
}

TEST(PlannerPlanSpace, IdsAndFilters) {
  Plan p;
  p.dpShard = 4;
  p.tp = 2;
  p.pp = 2;
  p.schedule = Schedule::Interleaved;
  p.virtualStages = 2;
  p.microbatches = 8;
  p.checkpoint = Checkpoint::Selective;
  p.fp8 = true;
  EXPECT_EQ(p.id(), "dpr=1,dps=4,cp=1,tp=2,pp=2,sched=interleaved,v=2,mb=8,ac=selective,fp8=on");
  PlanFilter f;
  std::string err;
  ASSERT_TRUE(parsePlanFilter("tp=2,pp=2", f, err));
  EXPECT_TRUE(planMatches(p, f));
  ASSERT_TRUE(parsePlanFilter(p.id(), f, err));
  EXPECT_TRUE(planMatches(p, f));
  ASSERT_TRUE(parsePlanFilter("tp=4", f, err));
  EXPECT_FALSE(planMatches(p, f));
  EXPECT_FALSE(parsePlanFilter("tp", f, err));
  EXPECT_EQ(err, "plan 'tp': expected key=value items (e.g. tp=2,pp=2)");
  EXPECT_FALSE(parsePlanFilter("zz=1", f, err));
  EXPECT_EQ(err, "plan 'zz=1': unknown key 'zz' (dpr, dps, cp, tp, pp, sched, v, mb, ac, fp8)");
}

TEST(PlannerShardingRules, NamesToRules) {
  EXPECT_EQ(layerIndexOf("m.model.layers.12.mlp.up_proj.weight"), 12);
  EXPECT_EQ(layerIndexOf("transformer.h.3.attn.c_attn.weight"), 3);
  EXPECT_EQ(layerIndexOf("model.embed_tokens.weight"), std::nullopt);
  EXPECT_EQ(tpRuleForName("model.layers.0.self_attn.q_proj.weight"), TpRule::Column);
  EXPECT_EQ(tpRuleForName("model.layers.0.self_attn.k_proj.bias"), TpRule::Column);
  EXPECT_EQ(tpRuleForName("model.layers.0.self_attn.o_proj.weight"), TpRule::Row);
  EXPECT_EQ(tpRuleForName("model.layers.0.mlp.down_proj.weight"), TpRule::Row);
  EXPECT_EQ(tpRuleForName("model.layers.0.mlp.gate_proj.weight"), TpRule::Column);
  EXPECT_EQ(tpRuleForName("transformer.h.0.attn.c_attn.weight"), TpRule::Column);
  EXPECT_EQ(tpRuleForName("transformer.h.0.mlp.c_proj.weight"), TpRule::Row);
  // A row-parallel GEMM's bias is added once, after the reduction.
  EXPECT_EQ(tpRuleForName("transformer.h.0.mlp.c_proj.bias"), TpRule::Replicated);
  EXPECT_EQ(tpRuleForName("model.embed_tokens.weight"), TpRule::Vocab);
  EXPECT_EQ(tpRuleForName("lm_head.weight"), TpRule::Vocab);
  EXPECT_EQ(tpRuleForName("transformer.wpe.weight"), TpRule::Replicated);
  EXPECT_EQ(tpRuleForName("model.layers.0.input_layernorm.weight"), TpRule::Replicated);
  EXPECT_EQ(tpRuleForName("transformer.h.0.ln_1.bias"), TpRule::Replicated);
  EXPECT_EQ(tpRuleForName("model.layers.0.mystery.weight"), std::nullopt);
}

} // namespace
