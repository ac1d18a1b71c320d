//===- WeightAmaxCases.h - AdamW's kept weight amax, for both backends -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// One fp8 tensorwise training step of one weight, as codegen leaves it
// with and without foldWeightAmax (codegen/FoldWeightAmax.h): the weight's
// scale, then AdamW updating p, m, v in place. Run after run on one
// executor, the folded step must give the unfolded step's scales and
// weights bit for bit, also after the caller sets p again between runs
// (a checkpoint restored into a live executor: the executor refreshes the
// amax), and the amax each run starts from must be max |p| of the p it
// starts from, bit for bit. WeightAmaxTest.cpp runs them on the CPU,
// Fp8AmaxCudaTest.cpp on a GPU.
//===----------------------------------------------------------------------===//
#ifndef LOOM_UNITTESTS_RUNTIME_WEIGHTAMAXCASES_H
#define LOOM_UNITTESTS_RUNTIME_WEIGHTAMAXCASES_H

#include "Fp8AmaxCases.h"
#include "RuntimeTestUtil.h"

#include "codegen/FoldWeightAmax.h"
#include "codegen/FoldWeightRounding.h"
#include "loom/runtime/RoundedCopies.h"

namespace loom::rt::test {

/// Output ids of weightStep, in Program::outputs order.
enum WeightStepOutput : size_t { kParam, kMoment1, kMoment2, kScale, kInverse, kSeenAmax, kSeen };

/// The step for a weight of shape `s`: outputs p', m', v' (in-place
/// updates), the weight's scale and inverse, the amax the scale was made
/// from (a one-element Cast of it before AdamW runs: the folded step's
/// kept amax; the unfolded step's own Fp8Amax of p) and, with `withCopy`,
/// widen(round(p)) read before AdamW (so that foldWeightRounding gives
/// AdamW a rounded copy too: five outputs). `fold` runs the folds as
/// codegen does (the rounding first).
inline Program weightStep(const Shape &s, bool withCopy, bool fold) {
  ProgramBuilder b;
  uint32_t p = b.input(DType::F32, s, "p"), g = b.input(DType::F32, s, "g");
  uint32_t m = b.input(DType::F32, s, "m"), v = b.input(DType::F32, s, "v");
  uint32_t lr = b.input(DType::F32, {}, "lr"), step = b.input(DType::F32, {}, "step");
  uint32_t po = b.output(DType::F32, s, "p'"), mo = b.output(DType::F32, s, "m'");
  uint32_t vo = b.output(DType::F32, s, "v'");
  uint32_t scale = b.output(DType::F32, {1, 1}, "scale"), inv = b.output(DType::F32, {1, 1}, "inv");
  uint32_t seenAmax = b.output(DType::F32, {1, 1}, "seen_amax");
  b.instr(OpCode::Fp8Scale, {p}, {scale, inv}, {0, 0});
  if (withCopy) {
    uint32_t y = b.temp(DType::BF16, s);
    b.instr(OpCode::Cast, {p}, {y});
    b.instr(OpCode::Cast, {y}, {b.output(DType::F32, s, "seen")});
  }
  b.instr(OpCode::AdamW, {p, g, m, v, lr, step}, {po, mo, vo}, {}, {0.9, 0.95, 1e-8, 0.1});
  for (auto [o, i] : {std::pair{po, p}, std::pair{mo, m}, std::pair{vo, v}}) {
    b.p.buffers[o].offset = b.p.buffers[i].offset;
    b.p.updates.push_back({o, i});
  }
  Program prog = b.p;
  size_t built = prog.buffers.size();
  if (fold) {
    if (withCopy)
      EXPECT_EQ(foldWeightRounding(prog), 1);
    EXPECT_EQ(foldWeightAmax(prog), 1);
  }
  // What the scale read: the kept amax when folded, else max |p| found here.
  uint32_t amaxRead = prog.instrs[0].in[0];
  if (amaxRead == p) {
    amaxRead = uint32_t(prog.buffers.size());
    BufferDesc d = prog.buffers[seenAmax];
    d.kind = BufferKind::Temp;
    d.name = "amax";
    d.offset = prog.arenaBytes;
    prog.arenaBytes += 64;
    prog.buffers.push_back(d);
    prog.instrs.insert(prog.instrs.begin(), Instr{OpCode::Fp8Amax, {p}, {amaxRead}, {}, {}});
  }
  // The fold's new buffer (the kept amax) goes after everything laid out
  // so far, as codegen's arena planner would give it bytes of its own.
  for (size_t id = built; id < prog.buffers.size(); ++id)
    if (prog.buffers[id].offset == 0) {
      prog.buffers[id].offset = prog.arenaBytes;
      prog.arenaBytes += 64;
    }
  size_t adamw = 0;
  while (prog.instrs[adamw].op != OpCode::AdamW) ++adamw;
  prog.instrs.insert(prog.instrs.begin() + long(adamw),
                     Instr{OpCode::Cast, {amaxRead}, {seenAmax}, {}, {}});
  return prog;
}

struct WeightRuns {
  std::vector<Bytes> params, scales, inverses, seenAmax, seen;
  std::vector<Bytes> startParams; // p as each run began
};

/// Four runs on one executor with the state resident: runs 0-1 from the
/// state set once, then p set again to `restored` before runs 2-3.
inline WeightRuns runWeightSteps(const Program &prog, const std::string &backend,
                                 const std::vector<float> &p0, const std::vector<float> &g,
                                 const std::vector<float> &restored) {
  WeightRuns out;
  std::string err;
  auto exec = createExecutor(std::make_shared<Program>(prog), backend, 3, err);
  EXPECT_TRUE(exec) << err;
  if (!exec)
    return out;
  size_t bytes = p0.size() * 4;
  Bytes start = toBytes(p0);
  bool withCopy = prog.outputs.size() > kSeen;
  bool ok = runAdamWFourTimes(*exec, p0, g, restored, [&](int r) {
    if (r == 2)
      start = toBytes(restored);
    Bytes param(bytes), scale(4), inv(4), amax(4), seen(withCopy ? bytes : 0);
    bool read = exec->getOutput(kParam, param.data(), bytes, err) &&
                exec->getOutput(kScale, scale.data(), 4, err) &&
                exec->getOutput(kInverse, inv.data(), 4, err) &&
                exec->getOutput(kSeenAmax, amax.data(), 4, err) &&
                (!withCopy || exec->getOutput(kSeen, seen.data(), bytes, err));
    out.params.push_back(param);
    out.scales.push_back(scale);
    out.inverses.push_back(inv);
    out.seenAmax.push_back(amax);
    out.seen.push_back(seen);
    out.startParams.push_back(start);
    start = param;
    return read;
  }, err);
  EXPECT_TRUE(ok) << err;
  return out;
}

/// The folded step against the unfolded one on `backend`, for weights of
/// `shape` (packed and element-wise CUDA paths, one block or many), each
/// amaxData set as the starting weights.
inline void expectWeightAmaxFoldExact(const std::string &backend, const Shape &shape) {
  Rng rng;
  int64_t n = numel(shape);
  std::vector<float> g = rng.uniform(n, -1, 1), restored = rng.uniform(n, -5, 5);
  for (auto &[name, p0] : amaxData(rng, n))
    for (bool withCopy : {false, true}) {
      SCOPED_TRACE(name + (withCopy ? " with a rounded copy" : "") + " on " + backend);
      Program folded = weightStep(shape, withCopy, true), plain = weightStep(shape, withCopy, false);
      ASSERT_EQ(folded.validate(), "");
      ASSERT_EQ(plain.validate(), "");
      WeightRuns a = runWeightSteps(folded, backend, p0, g, restored);
      WeightRuns b = runWeightSteps(plain, backend, p0, g, restored);
      ASSERT_EQ(a.scales.size(), 4u);
      ASSERT_EQ(b.scales.size(), 4u);
      EXPECT_EQ(a.params, b.params);
      EXPECT_EQ(a.scales, b.scales);
      EXPECT_EQ(a.inverses, b.inverses);
      EXPECT_EQ(a.seenAmax, b.seenAmax);
      EXPECT_EQ(a.seen, b.seen);
      for (size_t r = 0; r < 4; ++r) {
        // The amax the run started from is max |p| of the p it started
        // from: AdamW's (runs 1, 3) or the executor's refresh (runs 0, 2).
        uint32_t want = storedAmaxBits(DType::F32, a.startParams[r]), got;
        std::memcpy(&got, a.seenAmax[r].data(), 4);
        EXPECT_EQ(got, want) << "run " << r << ": 0x" << std::hex << got << " != 0x" << want;
      }
      // The weights moved, so a stale amax would have shown.
      EXPECT_NE(a.seenAmax[1], a.seenAmax[2]);
    }
}

} // namespace loom::rt::test

#endif
