//===- FoldWeightAmax.cpp - AdamW finds the next step's weight amax -------===//
//
// Part of loom, under the Apache License v2.0.
//
// Conditions, per in-place update p' -> p written by AdamW A:
//  - an Fp8Scale S reads p itself (the f32 parameter input, whole) and
//    writes one scale for the tensor ([1, 1]): tensorwise. A rowwise
//    scale needs one amax per row or column, which AdamW does not keep;
//    a scale of a gathered or rounded form of p (FSDP's all-gather,
//    another dtype) is of other values and stays;
//  - S runs before A: it must see max |p| as this run begins, which is
//    what a holds until A writes the next one.
// Then S reads a, and Fp8Scale of a [1, 1] input is the scale of its one
// value's magnitude (Program.h), the same bits as the scale of p. Every
// such S of p (a recomputed forward may clone one) shares A's one amax.
// The executor sets a to max |p| before any run whose p the caller set
// (the first run included), as it rounds the bf16 copies.
//===----------------------------------------------------------------------===//
#include "codegen/FoldWeightAmax.h"

#include "loom/runtime/RoundedCopies.h"

#include <vector>

namespace loom {
namespace {

using rt::OpCode;

/// Whether `I` is an Fp8Scale with one scale for the whole of a larger input.
bool isTensorwiseScale(const rt::Program &p, const rt::Instr &I) {
  if (I.op != OpCode::Fp8Scale || I.in.size() != 1 || I.out.size() != 2)
    return false;
  const rt::BufferDesc &x = p.buffers[I.in[0]], &s = p.buffers[I.out[0]];
  return x.dtype == rt::DType::F32 && s.shape == std::vector<int64_t>{1, 1} && x.numElements() > 1;
}

uint32_t newAmaxBuffer(rt::Program &p, const std::string &param) {
  rt::BufferDesc d;
  d.dtype = rt::DType::F32;
  d.shape = {1, 1};
  d.kind = rt::BufferKind::Temp;
  d.bytes = 4;
  d.name = param + ".amax";
  p.buffers.push_back(d);
  return uint32_t(p.buffers.size() - 1);
}

} // namespace

int64_t foldWeightAmax(rt::Program &p) {
  size_t n = p.instrs.size();
  std::vector<int64_t> writer(p.buffers.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t id : p.instrs[i].out) writer[id] = int64_t(i);
  // The tensorwise scales of each buffer, in instruction order.
  std::vector<std::vector<size_t>> scales(p.buffers.size());
  for (size_t i = 0; i < n; ++i)
    if (isTensorwiseScale(p, p.instrs[i]))
      scales[p.instrs[i].in[0]].push_back(i);

  int64_t folded = 0;
  for (const rt::InPlaceUpdate &u : p.updates) {
    int64_t a = writer[u.output];
    if (a < 0 || scales[u.input].empty())
      continue;
    rt::Instr &adamw = p.instrs[size_t(a)];
    if (adamw.op != OpCode::AdamW || adamw.out[0] != u.output || adamw.in[0] != u.input ||
        rt::adamwKeepsAmax(adamw))
      continue;
    std::vector<size_t> before;
    for (size_t s : scales[u.input])
      if (int64_t(s) < a)
        before.push_back(s);
    if (before.empty())
      continue;
    uint32_t amax = newAmaxBuffer(p, p.buffers[u.input].name);
    for (size_t s : before)
      p.instrs[s].in[0] = amax;
    adamw.out.push_back(amax);
    adamw.ints = {1};
    folded += int64_t(before.size());
  }
  return folded;
}

} // namespace loom
