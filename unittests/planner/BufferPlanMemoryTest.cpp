//===- BufferPlanMemoryTest.cpp - Splitting a compiled step's memory ------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/BufferPlanMemory.h"

#include <gtest/gtest.h>

using namespace loom;
using namespace loom::planner;

namespace {

rt::BufferDesc buffer(const char *name, rt::DType t, std::vector<int64_t> shape, rt::BufferKind kind) {
  rt::BufferDesc d;
  d.name = name;
  d.dtype = t;
  d.shape = std::move(shape);
  d.kind = kind;
  d.bytes = uint64_t(d.numElements()) * rt::dtypeSize(t);
  return d;
}

/// Arena offsets as a planner without reuse would give them: each
/// non-constant buffer its own range.
void placeApart(rt::Program &p) {
  uint64_t at = 0;
  for (rt::BufferDesc &d : p.buffers)
    if (d.kind != rt::BufferKind::Constant) {
      d.offset = at;
      at += (d.bytes + 255) / 256 * 256;
    }
}

rt::Instr instr(rt::OpCode op, std::vector<uint32_t> in, std::vector<uint32_t> out) {
  rt::Instr i;
  i.op = op;
  i.in = std::move(in);
  i.out = std::move(out);
  return i;
}

TEST(PlannerBufferPlan, SplitsThePeak) {
  using rt::BufferKind;
  using rt::DType;
  using rt::OpCode;
  // A toy training step: forward (matmul, loss), one gradient, AdamW.
  rt::Program p;
  p.buffers = {
      buffer("w", DType::F32, {4}, BufferKind::Input),           // 0: 16 B param
      buffer("exp_avg.w", DType::F32, {4}, BufferKind::Input),   // 1: 16 B
      buffer("exp_avg_sq.w", DType::F32, {4}, BufferKind::Input),// 2: 16 B
      buffer("tokens", DType::I64, {2}, BufferKind::Input),      // 3: 16 B
      buffer("step", DType::F32, {}, BufferKind::Input),         // 4: 4 B
      buffer("lr", DType::F32, {}, BufferKind::Constant),        // 5: in the blob
      buffer("", DType::F32, {16}, BufferKind::Temp),            // 6: 64 B activation
      buffer("loss", DType::F32, {}, BufferKind::Output),        // 7: 4 B
      buffer("", DType::F32, {4}, BufferKind::Temp),             // 8: 16 B gradient
      buffer("w'", DType::F32, {4}, BufferKind::Output),         // 9
      buffer("exp_avg'", DType::F32, {4}, BufferKind::Output),   // 10
      buffer("exp_avg_sq'", DType::F32, {4}, BufferKind::Output),// 11
  };
  p.instrs = {
      instr(OpCode::MatMul, {0, 3}, {6}),
      instr(OpCode::CrossEntropy, {6, 3}, {7}),
      instr(OpCode::Mul, {6, 7}, {8}),
      instr(OpCode::AdamW, {0, 8, 1, 2, 5, 4}, {9, 10, 11}),
  };
  placeApart(p);
  p.arenaBytes = 200;
  p.constants.resize(64);
  // Live bytes: inputs (16 x 4 + 4 = 68) throughout; instr 0 adds the
  // activation (64): 132; instr 1 the loss (4): 136; instr 2 the gradient
  // (16): 152, the peak; instr 3 drops the activation, adds 48 B of
  // outputs: 136.
  // At the peak: params 16 (w), optimizer 32 (moments), gradients 16,
  // activations 64 + 4 (loss, made by the loss op) + 16 (tokens) = 84,
  // workspace 4 (step) + fragmentation (200 - 152 = 48) + constants 64 = 116.
  MemoryBreakdown m;
  std::string err;
  ASSERT_TRUE(bufferPlanMemory(p, m, err)) << err;
  EXPECT_EQ(m.params, 16);
  EXPECT_EQ(m.optimizer, 32);
  EXPECT_EQ(m.grads, 16);
  EXPECT_EQ(m.activations, 84);
  EXPECT_EQ(m.workspace, 116);
  EXPECT_EQ(m.comm, 0);
  // The parts sum to what the program allocates: arena + constants.
  EXPECT_EQ(m.total(), 200 + 64);
}

TEST(PlannerBufferPlan, InPlaceUpdatesCountOnce) {
  using rt::BufferKind;
  using rt::DType;
  using rt::OpCode;
  // AdamW updates in place: the new parameter and moments share the old
  // ones' bytes, so at the update the live bytes are w, m, v (3 x 64 B,
  // each counted once), the gradient (64 B) and the step (4 B): 260, not
  // 452. Without the activation (dead by then) that is also the peak.
  rt::Program p;
  p.buffers = {
      buffer("w", DType::F32, {16}, BufferKind::Input),            // 0
      buffer("exp_avg.w", DType::F32, {16}, BufferKind::Input),    // 1
      buffer("exp_avg_sq.w", DType::F32, {16}, BufferKind::Input), // 2
      buffer("step", DType::F32, {}, BufferKind::Input),           // 3
      buffer("lr", DType::F32, {}, BufferKind::Constant),          // 4
      buffer("g", DType::F32, {16}, BufferKind::Temp),             // 5
      buffer("w'", DType::F32, {16}, BufferKind::Output),          // 6
      buffer("exp_avg'", DType::F32, {16}, BufferKind::Output),    // 7
      buffer("exp_avg_sq'", DType::F32, {16}, BufferKind::Output), // 8
  };
  placeApart(p);
  for (int k = 0; k < 3; ++k) p.buffers[6 + k].offset = p.buffers[k].offset;
  p.instrs = {
      instr(OpCode::Neg, {0}, {5}),
      instr(OpCode::AdamW, {0, 5, 1, 2, 4, 3}, {6, 7, 8}),
  };
  p.arenaBytes = 1024;
  MemoryBreakdown m;
  std::string err;
  ASSERT_TRUE(bufferPlanMemory(p, m, err)) << err;
  EXPECT_EQ(m.params, 64);
  EXPECT_EQ(m.optimizer, 128);
  EXPECT_EQ(m.grads, 64);
  // The step (4 B) and the arena beyond the peak: 1024 - 260.
  EXPECT_EQ(m.workspace, 4 + 1024 - 260);
  EXPECT_EQ(m.total(), 1024);
}

TEST(PlannerBufferPlan, NeedsATrainingStep) {
  rt::Program p;
  p.buffers = {buffer("x", rt::DType::F32, {4}, rt::BufferKind::Input),
               buffer("y", rt::DType::F32, {4}, rt::BufferKind::Output)};
  p.instrs = {instr(rt::OpCode::Neg, {0}, {1})};
  MemoryBreakdown m;
  std::string err;
  EXPECT_FALSE(bufferPlanMemory(p, m, err));
  EXPECT_EQ(err, "the program has no AdamW step");
}

} // namespace
