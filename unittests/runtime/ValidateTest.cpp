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

TEST(Validate, WritesOnlyTempsAndOutputs) {
  Rng rng;
  Program p = tinyLanguageModel(rng);
  p.instrs[0].out[0] = 2; // the embedding table constant
  expectInvalid(p, "instr 0 (embedding): writes buffer 2 'wte', which is not a temp or output");
}

} // namespace
