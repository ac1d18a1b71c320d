//===- EntryPointTest.cpp - One compiler entry point for plan and train ---===//
//
// Part of loom, under the Apache License v2.0.
//
// `loom plan --explain` sizes a plan from the per-rank program it compiles
// (planner::rankBufferPlan), `loom train --precision bf16 --plan` runs the
// program compiler::compileTrainStep builds from its flags. Both must be
// the same program, or the planner predicts the memory of a step nobody
// runs: this compiles the tiny Llama fixture through both paths and
// compares the serialized artifacts byte for byte. The planner imports
// weights as shapes (zero splats, never read), so the constant blob is
// compared separately: equal sizes, and equal bytes once train's path
// also imports weights as shapes.
//===----------------------------------------------------------------------===//
#include "compiler/CompileTrainStep.h"
#include "loom/runtime/Artifact.h"
#include "planner/BufferPlanMemory.h"
#include "planner/ir/IrCost.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace loom {
namespace {

const int64_t kMicrobatch = 2, kSeq = 64;

std::string fixture(const std::string &name) {
  return std::string(LOOM_SOURCE_DIR) + "/test/fixtures/" + name;
}

/// The artifact file's bytes.
std::string artifactBytes(const rt::Program &p) {
  std::string path = ::testing::TempDir() + "entry-point-" + std::to_string(getpid()) + ".loom";
  std::string err;
  EXPECT_TRUE(rt::writeArtifact(p, path, err)) << err;
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  return bytes;
}

/// The program with its constant blob zeroed (same size).
rt::Program withoutConstantValues(rt::Program p) {
  std::fill(p.constants.begin(), p.constants.end(), uint8_t(0));
  return p;
}

/// What `loom plan --explain PLAN` compiles for the plan's memory.
rt::Program planPath(const planner::Plan &plan) {
  planner::MemoryBreakdown mem;
  rt::Program program;
  std::string err;
  EXPECT_TRUE(planner::rankBufferPlan(fixture("llama.dynamic.onnx"), kMicrobatch, kSeq, plan, mem,
                                      err, &program))
      << err;
  return program;
}

/// What `loom train --precision bf16 --plan PLAN` compiles: its options as
/// TrainCommand sets them from the flags' defaults.
rt::Program trainPath(const planner::Plan &plan, bool weightsAsShapes, bool bf16 = true) {
  compiler::TrainOptions o;
  o.bf16 = bf16;
  o.totalSteps = 10;
  compiler::applyPlan(plan, o);
  o.weightsAsShapes = weightsAsShapes;
  train::TrainProgram tp;
  std::string err;
  int64_t batch = kMicrobatch * plan.dpReplicate * plan.dpShard;
  EXPECT_TRUE(compiler::compileTrainStep(fixture("llama.dynamic.onnx"), batch, kSeq, o, tp, err))
      << err;
  return tp.program ? *tp.program : rt::Program();
}

class EntryPoint : public ::testing::TestWithParam<const char *> {};

TEST_P(EntryPoint, PlanAndTrainCompileTheSameProgram) {
  planner::Plan plan;
  std::string err;
  ASSERT_TRUE(planner::parseMeshPlan(GetParam(), plan, err)) << err;
  rt::Program planned = planPath(plan), trained = trainPath(plan, /*weightsAsShapes=*/false);
  ASSERT_FALSE(planned.instrs.empty());
  EXPECT_EQ(planned.constants.size(), trained.constants.size());
  EXPECT_TRUE(artifactBytes(withoutConstantValues(planned)) ==
              artifactBytes(withoutConstantValues(trained)))
      << "plan " << GetParam() << ": " << planned.instrs.size() << " vs " << trained.instrs.size()
      << " instructions, arena " << planned.arenaBytes << " vs " << trained.arenaBytes;
  // The same weights (zero splats) give the same bytes, constants included.
  EXPECT_TRUE(artifactBytes(planned) == artifactBytes(trainPath(plan, /*weightsAsShapes=*/true)));
}

INSTANTIATE_TEST_SUITE_P(Plans, EntryPoint,
                         ::testing::Values("1", "dp_shard=2,tp=2", "dp_replicate=2,cp=2"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string name = "plan_";
                           for (const char *c = info.param; *c; ++c)
                             name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
                           return name;
                         });

// The comparison sees a difference where there is one: an fp32 step is
// not the bf16 step the planner sizes.
TEST(EntryPointControl, Fp32StepDiffersFromThePlannedBf16Step) {
  planner::Plan plan;
  std::string err;
  ASSERT_TRUE(planner::parseMeshPlan("1", plan, err)) << err;
  EXPECT_FALSE(artifactBytes(withoutConstantValues(planPath(plan))) ==
               artifactBytes(withoutConstantValues(trainPath(plan, false, /*bf16=*/false))));
}

// The single-device buffer plans `loom plan` ranks every plan with
// (planner::buildModelCost, one per checkpoint policy) are those of the
// steps the entry point compiles for one rank under each policy.
TEST(EntryPointModelCost, SingleDeviceBufferPlansAreTheEntryPointsPrograms) {
  planner::IrCostOptions opts;
  opts.batch = kMicrobatch;
  opts.seq = kSeq;
  planner::ModelCost cost;
  std::string err;
  ASSERT_TRUE(planner::buildModelCost(fixture("llama.dynamic.onnx"), opts, cost, err)) << err;
  ASSERT_TRUE(cost.hasBufferPlan) << cost.bufferPlanNote;
  for (int policy = 0; policy < 3; ++policy) {
    planner::Plan plan;
    plan.checkpoint = policy == 2   ? planner::Checkpoint::Full
                      : policy == 1 ? planner::Checkpoint::Selective
                                    : planner::Checkpoint::None;
    planner::MemoryBreakdown compiled;
    ASSERT_TRUE(planner::rankBufferPlan(fixture("llama.dynamic.onnx"), kMicrobatch, kSeq, plan,
                                        compiled, err))
        << err;
    const planner::MemoryBreakdown &ranked = policy ? cost.policyBufferPlan[policy] : cost.bufferPlan;
    ASSERT_TRUE(policy == 0 || cost.hasPolicyBufferPlan[policy]);
    EXPECT_EQ(ranked.params, compiled.params) << "policy " << policy;
    EXPECT_EQ(ranked.grads, compiled.grads) << "policy " << policy;
    EXPECT_EQ(ranked.optimizer, compiled.optimizer) << "policy " << policy;
    EXPECT_EQ(ranked.activations, compiled.activations) << "policy " << policy;
    EXPECT_EQ(ranked.workspace, compiled.workspace) << "policy " << policy;
  }
}

} // namespace
} // namespace loom
