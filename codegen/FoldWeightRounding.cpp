//===- FoldWeightRounding.cpp - AdamW stores the next step's bf16 weights -===//
//
// Part of loom, under the Apache License v2.0.
//
// Conditions, per in-place update p' -> p written by AdamW A:
//  - a Cast C reads p (f32) and writes y (bf16, p's shape), a Temp that is
//    no program output: y then belongs to A, which writes it last in the run;
//  - C and every reader of y run before A: they must see the value of this
//    run's start (round(p)), which is what the copy holds until A writes
//    the next one.
// A parameter read through two such casts (a recomputed forward clones
// one) keeps the second as a Cast; the first is the common case.
//===----------------------------------------------------------------------===//
#include "codegen/FoldWeightRounding.h"

#include <vector>

namespace loom {
namespace {

using rt::DType;
using rt::OpCode;

bool isRounding(const rt::Program &p, const rt::Instr &I) {
  if (I.op != OpCode::Cast || I.in.size() != 1 || I.out.size() != 1)
    return false;
  const rt::BufferDesc &x = p.buffers[I.in[0]], &y = p.buffers[I.out[0]];
  return x.dtype == DType::F32 && y.dtype == DType::BF16 && x.shape == y.shape &&
         y.kind == rt::BufferKind::Temp;
}

} // namespace

int64_t foldWeightRounding(rt::Program &p) {
  size_t n = p.instrs.size();
  std::vector<int64_t> writer(p.buffers.size(), -1), lastRead(p.buffers.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t id : p.instrs[i].out) writer[id] = int64_t(i);
    for (uint32_t id : p.instrs[i].in) lastRead[id] = int64_t(i);
  }
  std::vector<bool> isOutput(p.buffers.size(), false);
  for (uint32_t id : p.outputs) isOutput[id] = true;
  // The first rounding Cast of each buffer.
  std::vector<int64_t> rounding(p.buffers.size(), -1);
  for (size_t i = 0; i < n; ++i)
    if (isRounding(p, p.instrs[i]) && rounding[p.instrs[i].in[0]] < 0)
      rounding[p.instrs[i].in[0]] = int64_t(i);

  std::vector<bool> removed(n, false);
  int64_t folded = 0;
  for (const rt::InPlaceUpdate &u : p.updates) {
    int64_t a = writer[u.output], c = rounding[u.input];
    if (a < 0 || c < 0 || c > a)
      continue;
    rt::Instr &adamw = p.instrs[size_t(a)];
    if (adamw.op != OpCode::AdamW || adamw.out.size() != 3 || adamw.out[0] != u.output ||
        adamw.in[0] != u.input)
      continue;
    uint32_t y = p.instrs[size_t(c)].out[0];
    if (isOutput[y] || writer[y] != c || lastRead[y] >= a)
      continue;
    adamw.out.push_back(y);
    removed[size_t(c)] = true;
    ++folded;
  }
  if (!folded)
    return 0;
  std::vector<rt::Instr> kept;
  kept.reserve(n - size_t(folded));
  for (size_t i = 0; i < n; ++i)
    if (!removed[i])
      kept.push_back(std::move(p.instrs[i]));
  p.instrs = std::move(kept);
  return folded;
}

} // namespace loom
