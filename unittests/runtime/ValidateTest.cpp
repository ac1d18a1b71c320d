//===- ValidateTest.cpp - Program::validate() catches broken programs -----===//
//
// Part of loom, under the Apache License v2.0.
//
// Each test breaks one thing in an otherwise valid program and checks the
// one-line message names the instruction or buffer and the problem.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

void expectInvalid(const Program &p, const std::string &message) {
  std::string e = p.validate();
  EXPECT_NE(e.find(message), std::string::npos) << "got: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(Validate, TinyModelIsValid) {
  Rng rng;
  EXPECT_EQ(tinyLanguageModel(rng).validate(), "");
}

TEST(Validate, BadBufferIds) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.instrs[1].in[1] = 77;
  expectInvalid(p, "instr 1 (rms_norm): input id 77 out of range (10 buffers)");
  p = tinyLanguageModel(rng);
  p.instrs[2].out[0] = 10;
  expectInvalid(p, "instr 2 (matmul): output id 10 out of range");
  p = tinyLanguageModel(rng);
  p.outputs.push_back(42);
  expectInvalid(p, "output id 42 out of range");
}

TEST(Validate, BufferTable) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.buffers[5].bytes += 4;
  expectInvalid(p, "buffer 5 'tmp': bytes 196 != 48 elements * 4");
  p = tinyLanguageModel(rng);
  p.buffers[5].offset = p.arenaBytes - 4;
  expectInvalid(p, "buffer 5 'tmp': bytes");
  expectInvalid(p, "outside the arena");
  p = tinyLanguageModel(rng);
  p.buffers[2].offset = p.constants.size();
  expectInvalid(p, "buffer 2 'wte'");
  expectInvalid(p, "outside the constant blob");
  p = tinyLanguageModel(rng);
  p.buffers[5].shape = {int64_t(1) << 40, int64_t(1) << 40};
  expectInvalid(p, "overflows");
  p = tinyLanguageModel(rng);
  p.buffers[0].dtype = DType(9);
  expectInvalid(p, "buffer 0 'input_ids': unknown dtype 9");
}

TEST(Validate, CallingLists) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.inputs.pop_back();
  expectInvalid(p, "buffer 1 'targets' is an input but not in the input list");
  p = tinyLanguageModel(rng);
  p.outputs.push_back(p.outputs[0]);
  expectInvalid(p, "names buffer 8 'logits' twice");
}

TEST(Validate, ShapeRules) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.instrs[2].ints = {0, 0}; // [6,8] x [11,8] without transB
  expectInvalid(p, "instr 2 (matmul): inner dims differ: a [6,8] b [11,8]");
  p = tinyLanguageModel(rng);
  p.instrs[1].floats.clear();
  expectInvalid(p, "instr 1 (rms_norm): takes 1 float attributes, got 0");
  p = tinyLanguageModel(rng);
  p.instrs[3].in.push_back(0);
  expectInvalid(p, "instr 3 (gelu_tanh): takes 1 inputs, got 2");

  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {3, 4}), y = b.input(DType::F32, {3}), o = b.output(DType::F32, {3, 4});
  b.instr(OpCode::Add, {x, y}, {o});
  expectInvalid(b.p, "instr 0 (add): shapes [3,4] and [3] do not broadcast");
  b.p.buffers[y].shape = {4};
  b.p.buffers[y].bytes = 16;
  EXPECT_EQ(b.p.validate(), "");
  b.p.buffers[o].dtype = DType::I32;
  expectInvalid(b.p, "instr 0 (add): dtypes differ: f32 and i32");
}

TEST(Validate, DataFlow) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  std::swap(p.instrs[0], p.instrs[1]); // rms_norm before its input exists
  expectInvalid(p, "instr 0 (rms_norm): reads buffer 5 'tmp' before anything writes it");

  // Put the normalized activations on top of the embedding output, which
  // rms_norm still reads: the output overlaps an input.
  p = tinyLanguageModel(rng);
  p.buffers[6].offset = p.buffers[5].offset;
  expectInvalid(p, "instr 1 (rms_norm): output buffer 6 'tmp' overlaps input buffer 5 'tmp'");

  // Arena reuse must respect liveness: t2 takes t1's bytes while t1 is
  // still to be read.
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {16}), t1 = b.temp(DType::F32, {16}), t2 = b.temp(DType::F32, {16});
  uint32_t o = b.output(DType::F32, {16});
  b.p.buffers[t2].offset = b.p.buffers[t1].offset;
  b.instr(OpCode::Neg, {x}, {t1});
  b.instr(OpCode::Exp, {x}, {t2});
  b.instr(OpCode::Add, {t1, t2}, {o});
  expectInvalid(b.p, "instr 2 (add): reads buffer 1 'tmp' after instr 1 overwrote its arena bytes");
  // Once t1 is dead by then, the same placement is fine.
  b.p.instrs[2].in = {t2, x};
  EXPECT_EQ(b.p.validate(), "");
}

TEST(Validate, ViewsNameTheirBasesBytesAndAreNeverWritten) {
  EXPECT_EQ(viewProgram().validate(), "");
  ProgramBuilder b;
  b.p = viewProgram();
  b.p.views.clear(); // the same bytes, undeclared: nothing writes [3, 4]
  expectInvalid(b.p, "instr 1 (exp): reads buffer 2 'tmp' before anything writes it");
  b.p = viewProgram();
  b.p.buffers[2].offset += 64;
  b.p.arenaBytes += 64;
  expectInvalid(b.p, "view buffer 2 'tmp' does not occupy exactly the bytes of buffer 1 'tmp'");
  b.p = viewProgram();
  b.p.views.push_back({1, 0});
  expectInvalid(b.p, "view buffer 1 'tmp' of buffer 0 'in': needs two distinct temps");
  b.p = viewProgram();
  b.p.instrs[0].out[0] = 2; // neg writes the view
  expectInvalid(b.p, "instr 0 (neg): writes buffer 2 'tmp', which is a view");
  b.p = viewProgram();
  b.p.views.push_back({1, 2});
  expectInvalid(b.p, "has a view as its base");
  // A later buffer that reuses the base's bytes ends the view too.
  b.p = viewProgram();
  uint32_t x = b.p.inputs[0], o = b.p.outputs[0];
  uint32_t u = b.temp(DType::F32, {2, 6});
  b.p.buffers[u].offset = b.p.buffers[1].offset;
  b.p.instrs.insert(b.p.instrs.begin() + 1, Instr{OpCode::Sin, {x}, {u}, {}, {}});
  b.p.instrs.back().in = {2};
  b.p.instrs.back().out = {o};
  expectInvalid(b.p, "instr 2 (exp): reads buffer 2 'tmp' (a view of buffer 1 'tmp') after instr 1 "
                     "overwrote its arena bytes");
}

TEST(Validate, WritesOnlyTempsAndOutputs) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.instrs[0].out[0] = 2; // the embedding table constant
  expectInvalid(p, "instr 0 (embedding): writes buffer 2 'wte', which is not a temp or output");
}

} // namespace

namespace loom::rt::test {
namespace {

/// AdamW over p, m, v whose outputs share the inputs' bytes when `inPlace`.
Program adamwProgram(bool declare, bool shareBytes) {
  ProgramBuilder b;
  Shape s = {3, 5};
  uint32_t p = b.input(DType::F32, s, "p"), g = b.input(DType::F32, s, "g");
  uint32_t m = b.input(DType::F32, s, "m"), v = b.input(DType::F32, s, "v");
  uint32_t lr = b.input(DType::F32, {}, "lr"), step = b.input(DType::F32, {}, "step");
  uint32_t po = b.output(DType::F32, s, "p'"), mo = b.output(DType::F32, s, "m'");
  uint32_t vo = b.output(DType::F32, s, "v'");
  b.instr(OpCode::AdamW, {p, g, m, v, lr, step}, {po, mo, vo}, {}, {0.9, 0.95, 1e-8, 0.1});
  for (auto [o, i] : {std::pair{po, p}, std::pair{mo, m}, std::pair{vo, v}}) {
    if (shareBytes) b.p.buffers[o].offset = b.p.buffers[i].offset;
    if (declare) b.p.updates.push_back({o, i});
  }
  return b.p;
}

TEST(Validate, InPlaceAdamWUpdatesAreAcceptedOnlyWhenDeclared) {
  EXPECT_EQ(adamwProgram(true, true).validate(), "");
  std::string undeclared = adamwProgram(false, true).validate();
  EXPECT_NE(undeclared.find("overlaps input"), std::string::npos) << undeclared;
  std::string misplaced = adamwProgram(true, false).validate();
  EXPECT_NE(misplaced.find("does not occupy exactly the bytes"), std::string::npos) << misplaced;
}

TEST(Validate, InPlaceUpdateStateStaysBetweenRuns) {
  // Two runs with the state set once: the second starts from the first's
  // result, exactly like two runs that copy the state out and back in.
  Rng rng;
  Program p = adamwProgram(true, true);
  Shape s = {3, 5};
  auto pv = rng.uniform(15), gv = rng.uniform(15), zeros = std::vector<float>(15, 0.f);
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(p), "cpu", 1, err);
  ASSERT_TRUE(exec) << err;
  float lr = 1e-2f, step0 = 0.f, step1 = 1.f;
  ASSERT_TRUE(exec->setInput(0, pv.data(), 60, err) && exec->setInput(1, gv.data(), 60, err) &&
              exec->setInput(2, zeros.data(), 60, err) && exec->setInput(3, zeros.data(), 60, err) &&
              exec->setInput(4, &lr, 4, err) && exec->setInput(5, &step0, 4, err) && exec->run(err))
      << err;
  ASSERT_TRUE(exec->setInput(5, &step1, 4, err) && exec->run(err)) << err;
  std::vector<float> resident(15);
  ASSERT_TRUE(exec->getOutput(0, resident.data(), 60, err)) << err;

  // The same two steps with the state carried through the host.
  RunResult r1 = runProgram(p, {toBytes(pv), toBytes(gv), toBytes(zeros), toBytes(zeros),
                                toBytes(std::vector<float>{lr}), toBytes(std::vector<float>{0.f})});
  ASSERT_TRUE(r1.ok) << r1.err;
  RunResult r2 = runProgram(p, {r1.outputs[0], toBytes(gv), r1.outputs[1], r1.outputs[2],
                                toBytes(std::vector<float>{lr}), toBytes(std::vector<float>{1.f})});
  ASSERT_TRUE(r2.ok) << r2.err;
  EXPECT_EQ(resident, r2.out<float>(0));
}

} // namespace
} // namespace loom::rt::test
