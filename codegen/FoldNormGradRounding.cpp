//===- FoldNormGradRounding.cpp - Norm gradients store dx's bf16 copy -----===//
//
// Part of loom, under the Apache License v2.0.
//
// Conditions, per Cast C: y = Cast(x: f32 -> bf16):
//  - x is output 0 (dx) of a RmsNormGrad or LayerNormGrad N that has only
//    its regular outputs (no rounded copy yet, no fused amax: those are
//    fused later, and an fp8 run's amax of dx stays where FuseFp8Amax
//    puts it), and y has x's shape;
//  - y is a Temp that no program output names, and every reader of y is
//    a MatMul or a Reduce (the GEMMs the copy is for, and a bias's gradient,
//    a column sum of it), through reshapes; an fp8 reader keeps the Cast,
//    whose amax FuseFp8Amax folds into N.
// N then writes y, earlier than C did: y's readers all run after C, which
// ran after N, and nothing else writes y.
//===----------------------------------------------------------------------===//
#include "codegen/FoldNormGradRounding.h"
#include "codegen/FoldCasts.h"

#include <vector>

namespace loom {
namespace {

using rt::DType;
using rt::OpCode;

/// The outputs a norm gradient has before any extra one.
size_t regularOutputs(OpCode op) {
  return op == OpCode::RmsNormGrad ? 2 : op == OpCode::LayerNormGrad ? 3 : 0;
}

/// Whether every reader of `id` is a MatMul or a Reduce, looking through
/// reshapes (same-dtype Casts, views once placed); false when none reads it.
bool readByGemms(const rt::Program &p, const std::vector<std::vector<size_t>> &readers,
                 uint32_t id) {
  if (readers[id].empty())
    return false;
  for (size_t r : readers[id]) {
    const rt::Instr &R = p.instrs[r];
    bool reshape = R.op == OpCode::Cast && p.buffers[R.out[0]].dtype == p.buffers[id].dtype;
    if (reshape ? !readByGemms(p, readers, R.out[0])
                : R.op != OpCode::MatMul && R.op != OpCode::Reduce)
      return false;
  }
  return true;
}

} // namespace

int64_t foldNormGradRounding(rt::Program &p) {
  size_t n = p.instrs.size();
  const BufferUses uses(p);
  const std::vector<int64_t> &writer = uses.writer;
  const std::vector<std::vector<size_t>> &readers = uses.readers;
  const std::vector<bool> &isOutput = uses.isOutput;

  std::vector<bool> removed(n, false);
  int64_t folded = 0;
  for (size_t c = 0; c < n; ++c) {
    const rt::Instr &C = p.instrs[c];
    if (C.op != OpCode::Cast || C.in.size() != 1 || C.out.size() != 1)
      continue;
    uint32_t x = C.in[0], y = C.out[0];
    const rt::BufferDesc &xd = p.buffers[x], &yd = p.buffers[y];
    if (xd.dtype != DType::F32 || yd.dtype != DType::BF16 || xd.shape != yd.shape ||
        yd.kind != rt::BufferKind::Temp || isOutput[y] || writer[x] < 0)
      continue;
    rt::Instr &N = p.instrs[size_t(writer[x])];
    size_t regular = regularOutputs(N.op);
    if (!regular || N.out.size() != regular || N.out[0] != x || !N.ints.empty())
      continue;
    if (!readByGemms(p, readers, y))
      continue;
    N.out.push_back(y);
    N.ints = {1};
    removed[c] = true;
    ++folded;
  }
  if (!folded)
    return 0;
  std::vector<rt::Instr> live;
  for (size_t i = 0; i < n; ++i)
    if (!removed[i])
      live.push_back(std::move(p.instrs[i]));
  p.instrs = std::move(live);
  return folded;
}

} // namespace loom
