//===- Fp8AmaxTest.cpp - fused amax outputs on the CPU ---------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// The reference backend's amax outputs (loom/runtime/Fp8Amax.h) against the
// stored values (Fp8AmaxCases.h), the Fp8Amax instruction against Fp8Scale
// (its [1, 1] form gives x's scale bit for bit), and the validation of
// malformed amax outputs.
//===----------------------------------------------------------------------===//
#include "Fp8AmaxCases.h"

namespace loom::rt::test {
namespace {

TEST(Fp8Amax, FusedOutputsEqualTheStoredValuesAmaxOnCpu) { expectFusedAmaxExact("cpu", 3); }

TEST(Fp8Amax, ScaleOfTheAmaxIsTheTensorsScale) {
  Rng rng;
  for (auto &[name, data] : amaxData(rng, 64 * 48))
    for (DType t : {DType::F32, DType::BF16})
      for (int64_t format : {0, 1}) {
        SCOPED_TRACE(name + " " + dtypeName(t) + " format " + std::to_string(format));
        ProgramBuilder b;
        uint32_t x = b.input(t, {64, 48}), a = b.temp(DType::F32, {1, 1});
        uint32_t s0 = b.output(DType::F32, {1, 1}), i0 = b.output(DType::F32, {1, 1});
        uint32_t s1 = b.output(DType::F32, {1, 1}), i1 = b.output(DType::F32, {1, 1});
        b.instr(OpCode::Fp8Scale, {x}, {s0, i0}, {format, 0});
        b.instr(OpCode::Fp8Amax, {x}, {a});
        b.instr(OpCode::Fp8Scale, {a}, {s1, i1}, {format, 0});
        ASSERT_EQ(b.p.validate(), "");
        RunResult r = runProgram(b.p, {amaxInputBytes(t, data)});
        ASSERT_TRUE(r.ok) << r.err;
        EXPECT_EQ(r.outputs[0], r.outputs[2]);
        EXPECT_EQ(r.outputs[1], r.outputs[3]);
      }
}

TEST(Fp8Amax, MalformedAmaxOutputsAreRefused) {
  auto program = [](OpCode op, int64_t amaxes, DType amaxType, const Shape &amaxShape) {
    ProgramBuilder b;
    uint32_t g = b.input(DType::F32, {4, 8}), u = b.input(DType::F32, {4, 8});
    std::vector<uint32_t> outs = {b.output(DType::F32, {4, 8})};
    for (int64_t k = 0; k < amaxes; ++k) outs.push_back(b.output(amaxType, amaxShape));
    b.instr(op, {g, u}, outs);
    return b.p;
  };
  EXPECT_EQ(program(OpCode::SwiGlu, 1, DType::F32, {1, 1}).validate(), "");
  EXPECT_NE(program(OpCode::SwiGlu, 2, DType::F32, {1, 1}).validate().find("at most 2 outputs"),
            std::string::npos);
  EXPECT_NE(program(OpCode::SwiGlu, 1, DType::F32, {2, 1}).validate().find("one f32 element"),
            std::string::npos);
  EXPECT_NE(program(OpCode::SwiGlu, 1, DType::BF16, {1, 1}).validate().find("one f32 element"),
            std::string::npos);
  // An opcode that cannot carry one: the extra output is just an extra output.
  EXPECT_NE(program(OpCode::Max, 1, DType::F32, {1, 1}).validate(), "");
}

} // namespace
} // namespace loom::rt::test
