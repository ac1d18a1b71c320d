//===- AdamWGroupsTest.cpp - Small AdamW instructions launched together ---===//
//
// Part of loom, under the Apache License v2.0.
//
// smallAdamWGroups' rules on hand-built steps (what may move up to a
// group's first member, what keeps apart), and on CUDA (in the suite
// CudaBackend, scripts/gpu-test.sh) the grouped launch against the CPU and
// against one launch per instruction, bit for bit.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include "loom/runtime/AdamWGroups.h"

#include <cstdlib>

namespace loom::rt::test {
namespace {

/// A step's AdamWs over shared lr, step and scale inputs, each updating its
/// parameter and moments in place, with the members' rounded copies read
/// back through Casts at the end.
struct AdamWStep {
  ProgramBuilder b;
  std::vector<Bytes> inputs;
  uint32_t lr, step, scale;
  Rng rng;

  AdamWStep() {
    lr = scalarInput(3e-3f);
    step = scalarInput(4.f);
    scale = scalarInput(0.3712f);
  }

  uint32_t scalarInput(float v) {
    uint32_t id = b.input(DType::F32, {});
    inputs.push_back(toBytes(std::vector<float>{v}));
    return id;
  }
  uint32_t f32Input(int64_t n, double lo, double hi) {
    uint32_t id = b.input(DType::F32, {n});
    inputs.push_back(toBytes(rng.uniform(n, lo, hi)));
    return id;
  }

  struct Member {
    uint32_t p, g, m, v, copy = UINT32_MAX;
  };

  /// An AdamW of n elements: a bf16 or f32 gradient, with or without a
  /// rounded copy (read back at the end by finish()); weight decay `wd`.
  Member add(int64_t n, bool bf16Grad, bool copy, double wd = 0.1, bool amax = false) {
    Member k;
    k.p = f32Input(n, -1, 1);
    if (bf16Grad) {
      k.g = b.input(DType::BF16, {n});
      inputs.push_back(bf16StorageBytes(rng.uniform(n, -5, 5)));
    } else {
      k.g = f32Input(n, -5, 5);
    }
    k.m = f32Input(n, -1e-2, 1e-2);
    k.v = f32Input(n, 0, 1e-3);
    uint32_t po = b.output(DType::F32, {n}, "p'"), mo = b.output(DType::F32, {n}, "m'");
    uint32_t vo = b.output(DType::F32, {n}, "v'");
    std::vector<uint32_t> outs = {po, mo, vo};
    if (copy) {
      k.copy = b.temp(DType::BF16, {n});
      outs.push_back(k.copy);
      copies.push_back(k.copy);
    }
    if (amax)
      outs.push_back(b.temp(DType::F32, {1, 1}));
    b.instr(OpCode::AdamW, {k.p, k.g, k.m, k.v, lr, step, scale}, outs,
            amax ? std::vector<int64_t>{1} : std::vector<int64_t>{}, {0.9, 0.95, 1e-8, wd});
    for (auto [o, i] : {std::pair{po, k.p}, std::pair{mo, k.m}, std::pair{vo, k.v}}) {
      b.p.buffers[o].offset = b.p.buffers[i].offset;
      b.p.updates.push_back({o, i});
    }
    return k;
  }

  /// The rounded copies as outputs, after every AdamW.
  void finish() {
    for (uint32_t c : copies)
      b.instr(OpCode::Cast, {c}, {b.output(DType::BF16, b.p.buffers[c].shape, "copy")});
  }

  std::vector<uint32_t> copies;
};

std::vector<std::vector<size_t>> groupsOf(const Program &p) {
  std::vector<std::vector<size_t>> out;
  for (const AdamWGroup &g : smallAdamWGroups(p)) out.push_back(g.members);
  return out;
}

using Groups = std::vector<std::vector<size_t>>;

TEST(AdamWGroups, SmallAdamWsSharingTheirScalarsAreOneGroup) {
  AdamWStep s;
  s.add(1280, false, false);
  s.add(kSmallAdamWElements + 8, true, true); // large: its own launch
  s.add(5120, true, true);
  s.add(7, false, true);
  s.finish();
  ASSERT_EQ(s.b.p.validate(), "");
  EXPECT_EQ(groupsOf(s.b.p), (Groups{{0, 2, 3}}));
  EXPECT_EQ(smallAdamWGroups(s.b.p, 8).size(), 0u); // none small enough to pair
}

// Moving up to the group's first member must not read a value before it is
// written, nor write one before an instruction in between reads it.
TEST(AdamWGroups, AnInstructionBetweenThatTouchesAMemberKeepsItOut) {
  {
    AdamWStep s; // a gradient written in between: the second AdamW waits for it
    s.add(64, false, false);
    uint32_t x = s.f32Input(64, -1, 1);
    AdamWStep::Member late = {};
    late.g = s.b.temp(DType::F32, {64});
    s.b.instr(OpCode::Cast, {x}, {late.g});
    late.p = s.f32Input(64, -1, 1);
    late.m = s.f32Input(64, -1, 1);
    late.v = s.f32Input(64, 0, 1);
    s.b.instr(OpCode::AdamW, {late.p, late.g, late.m, late.v, s.lr, s.step, s.scale},
              {s.b.output(DType::F32, {64}), s.b.output(DType::F32, {64}),
               s.b.output(DType::F32, {64})},
              {}, {0.9, 0.95, 1e-8, 0.1});
    s.add(64, false, false); // and a third one joins it instead
    ASSERT_EQ(s.b.p.validate(), "");
    EXPECT_EQ(groupsOf(s.b.p), (Groups{{2, 3}}));
  }
  {
    AdamWStep s; // a parameter read in between: its in-place update may not come first
    s.add(64, false, false);
    AdamWStep::Member k = s.add(64, false, false);
    s.b.p.instrs.insert(s.b.p.instrs.begin() + 1,
                        Instr{OpCode::Cast, {k.p}, {s.b.output(DType::F32, {64}, "read")}, {}, {}});
    ASSERT_EQ(s.b.p.validate(), "");
    EXPECT_EQ(groupsOf(s.b.p), Groups{});
  }
}

TEST(AdamWGroups, OtherHyperparametersAmaxesAndCollectivesKeepApart) {
  AdamWStep s;
  s.add(64, false, false, 0.1);
  s.add(64, false, false, 0.0);
  s.add(64, false, false, 0.1);
  s.add(64, false, false, 0.0);
  s.add(64, false, true, 0.1, /*amax=*/true);
  EXPECT_EQ(groupsOf(s.b.p), (Groups{{0, 2}, {1, 3}}));
  // A program with collectives keeps one launch per instruction.
  uint32_t x = s.f32Input(4, -1, 1);
  s.b.instr(OpCode::AllReduce, {x}, {s.b.output(DType::F32, {4})},
            std::vector<int64_t>(kCollectiveInts, 0));
  EXPECT_EQ(groupsOf(s.b.p), Groups{});
}

// The grouped launch (members of 1 to 5,120 elements, one past a chunk
// boundary, f32 and bf16 gradients, with and without rounded copies, beside
// a large AdamW of its own) writes the bits of one launch per instruction,
// and of the CPU.
TEST(CudaBackend, SmallAdamWsInOneLaunchKeepTheirBits) {
  REQUIRE_GPU();
  AdamWStep s;
  s.add(1280, false, false);
  s.add(kSmallAdamWElements + 8, true, true);
  s.add(5120, true, true);
  s.add(1, false, true);
  s.add(1025, true, false);
  s.add(3840, false, true, 0.0); // another group
  s.add(77, false, false, 0.0);
  s.finish();
  ASSERT_EQ(s.b.p.validate(), "");
  ASSERT_EQ(groupsOf(s.b.p), (Groups{{0, 2, 3, 4}, {5, 6}}));
  RunResult cpu = runProgram(s.b.p, s.inputs, 2, "cpu");
  RunResult grouped = runProgram(s.b.p, s.inputs, 0, "cuda");
  setenv("LOOM_GROUP_ADAMW", "0", 1);
  RunResult apart = runProgram(s.b.p, s.inputs, 0, "cuda");
  unsetenv("LOOM_GROUP_ADAMW");
  ASSERT_TRUE(cpu.ok && grouped.ok && apart.ok) << cpu.err << grouped.err << apart.err;
  for (size_t k = 0; k < cpu.outputs.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    EXPECT_EQ(grouped.outputs[k], apart.outputs[k]);
    EXPECT_EQ(grouped.outputs[k], cpu.outputs[k]);
  }
}

} // namespace
} // namespace loom::rt::test
