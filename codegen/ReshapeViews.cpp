//===- ReshapeViews.cpp - Reshapes as views instead of copies -------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Why a view is exact: a reshape copy writes the source's elements in the
// same flat order into a buffer of the same dtype, so its bytes equal the
// source's; reading the source's bytes under the new shape reads the same
// values. Buffers are written once (codegen lowers SSA values), so the
// source does not change while the view is read; the arena planner keeps
// the source's bytes until the last read of any of its views.
//===----------------------------------------------------------------------===//
#include "codegen/ReshapeViews.h"

#include <vector>

namespace loom {
namespace {

using rt::BufferKind;
using rt::OpCode;

bool isTemp(const rt::Program &p, uint32_t id) { return p.buffers[id].kind == BufferKind::Temp; }

uint32_t addTemp(rt::Program &p, rt::DType dtype, const std::vector<int64_t> &shape) {
  rt::BufferDesc d;
  d.dtype = dtype;
  d.shape = shape;
  d.kind = BufferKind::Temp;
  d.bytes = uint64_t(d.numElements()) * rt::dtypeSize(dtype);
  p.buffers.push_back(d);
  return uint32_t(p.buffers.size() - 1);
}

rt::Instr castOf(uint32_t in, uint32_t out) {
  rt::Instr c;
  c.op = OpCode::Cast;
  c.in = {in};
  c.out = {out};
  return c;
}

/// A conversion next to a reshape, with nothing else reading the value
/// between them, is first merged into one converting reshape, which the
/// split below then orders with the conversion outermost: the IR may spell
/// cast(reshape(x)) or reshape(cast(x)), and only the first lets the
/// conversion fold into x's writer (the second, into the reader).
void mergeConversionsWithReshapes(rt::Program &p) {
  std::vector<int> readers(p.buffers.size(), 0);
  std::vector<int64_t> writer(p.buffers.size(), -1);
  std::vector<bool> output(p.buffers.size(), false);
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    for (uint32_t id : p.instrs[i].in) ++readers[id];
    for (uint32_t id : p.instrs[i].out) writer[id] = int64_t(i);
  }
  for (uint32_t id : p.outputs) output[id] = true;
  std::vector<bool> removed(p.instrs.size(), false);
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    rt::Instr &R = p.instrs[i];
    if (R.op != OpCode::Cast)
      continue;
    uint32_t y = R.in[0];
    int64_t w = writer[y];
    if (w < 0 || removed[size_t(w)] || p.instrs[size_t(w)].op != OpCode::Cast ||
        readers[y] != 1 || output[y] || !isTemp(p, y))
      continue;
    uint32_t x = p.instrs[size_t(w)].in[0], z = R.out[0];
    const rt::BufferDesc &a = p.buffers[x], &b = p.buffers[y], &c = p.buffers[z];
    bool first = a.dtype != b.dtype && a.shape == b.shape && b.dtype == c.dtype;  // convert, reshape
    bool second = a.dtype == b.dtype && b.shape == c.shape && b.dtype != c.dtype; // reshape, convert
    if (!first && !second)
      continue;
    R.in[0] = x; // x -> z in one Cast; the writer of y goes
    removed[size_t(w)] = true;
  }
  std::vector<rt::Instr> live;
  for (size_t i = 0; i < p.instrs.size(); ++i)
    if (!removed[i])
      live.push_back(std::move(p.instrs[i]));
  p.instrs = std::move(live);
}

} // namespace

int64_t splitConvertingReshapes(rt::Program &p) {
  mergeConversionsWithReshapes(p);
  int64_t split = 0;
  std::vector<rt::Instr> instrs;
  instrs.reserve(p.instrs.size());
  for (rt::Instr &I : p.instrs) {
    if (I.op != OpCode::Cast) {
      instrs.push_back(std::move(I));
      continue;
    }
    uint32_t x = I.in[0], y = I.out[0];
    const rt::BufferDesc &a = p.buffers[x], &b = p.buffers[y];
    bool widening = rt::dtypeSize(b.dtype) > rt::dtypeSize(a.dtype);
    // Only where the reshape half can become a view (temp to temp);
    // otherwise one instruction would become two copies.
    bool viewable = widening ? isTemp(p, x) : isTemp(p, y);
    if (a.dtype == b.dtype || a.shape == b.shape || !viewable) {
      instrs.push_back(std::move(I));
      continue;
    }
    rt::DType dtype = widening ? a.dtype : b.dtype;
    std::vector<int64_t> shape = widening ? b.shape : a.shape;
    uint32_t mid = addTemp(p, dtype, shape); // may move p.buffers: a, b are dead
    instrs.push_back(castOf(x, mid));
    instrs.push_back(castOf(mid, y));
    ++split;
  }
  p.instrs = std::move(instrs);
  return split;
}

int64_t makeReshapeViews(rt::Program &p) {
  std::vector<uint32_t> base = rt::viewBases(p);
  std::vector<int> writers(p.buffers.size(), 0);
  for (const rt::Instr &I : p.instrs)
    for (uint32_t id : I.out) ++writers[id];
  int64_t removed = 0;
  std::vector<rt::Instr> instrs;
  instrs.reserve(p.instrs.size());
  for (rt::Instr &I : p.instrs) {
    if (I.op == OpCode::Cast) {
      uint32_t x = I.in[0], y = I.out[0], root = base[x];
      const rt::BufferDesc &a = p.buffers[x], &b = p.buffers[y];
      bool once = writers[y] == 1 && (root != x || writers[x] == 1);
      if (a.dtype == b.dtype && a.bytes == b.bytes && isTemp(p, x) && isTemp(p, y) && once) {
        base[y] = root;
        ++removed;
        continue;
      }
    }
    instrs.push_back(std::move(I));
  }
  p.instrs = std::move(instrs);
  p.views.clear();
  for (uint32_t id = 0; id < base.size(); ++id)
    if (base[id] != id)
      p.views.push_back({id, base[id]});
  return removed;
}

} // namespace loom
