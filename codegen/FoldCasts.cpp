//===- FoldCasts.cpp - Folding f32 <-> bf16 casts into their neighbours ---===//
//
// Part of loom, under the Apache License v2.0.
//
// Why the folds are exact: widening bf16 to f32 is exact, so a kernel that
// widens as it reads sees the very f32 values the Cast would have written;
// a kernel that stores bf16 rounds the f32 value it would have stored with
// the Cast's rounding (nearest even), once. Shapes must match except for a
// Cast neighbour (a reshape converts any layout of the same element count).
//===----------------------------------------------------------------------===//
#include "codegen/FoldCasts.h"

#include <vector>

namespace loom {
namespace {

using rt::DType;
using rt::OpCode;

struct Slot {
  size_t instr;
  size_t k; // operand index in `in` or `out`
};

/// Who writes and who reads each buffer, over the live instructions.
struct Uses {
  std::vector<std::vector<Slot>> readers;
  std::vector<Slot> writer;
  std::vector<bool> written, output;

  Uses(const rt::Program &p, const std::vector<bool> &removed)
      : readers(p.buffers.size()), writer(p.buffers.size()), written(p.buffers.size()),
        output(p.buffers.size()) {
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      if (removed[i])
        continue;
      const rt::Instr &I = p.instrs[i];
      for (size_t k = 0; k < I.in.size(); ++k) readers[I.in[k]].push_back({i, k});
      for (size_t k = 0; k < I.out.size(); ++k) {
        writer[I.out[k]] = {i, k};
        written[I.out[k]] = true;
      }
    }
    for (uint32_t id : p.outputs) output[id] = true;
  }
};

bool isConvertingCast(const rt::Program &p, const rt::Instr &I, DType from, DType to) {
  return I.op == OpCode::Cast && p.buffers[I.in[0]].dtype == from &&
         p.buffers[I.out[0]].dtype == to;
}

/// A Cast neighbour absorbs the fold when the merged cast (from `a` to
/// `b`) changes the dtype or the shape but not both: a pure conversion may
/// fold further, a pure reshape becomes a view (ReshapeViews.h). Merging a
/// conversion into a reshape would leave a copy that is neither.
bool mergesCleanly(const rt::Program &p, uint32_t a, uint32_t b) {
  return p.buffers[a].dtype == p.buffers[b].dtype || p.buffers[a].shape == p.buffers[b].shape;
}

/// One fold of instruction i, if any applies; true when the program changed.
bool foldOne(rt::Program &p, size_t i, const Uses &u, std::vector<bool> &removed) {
  const rt::Instr &C = p.instrs[i];
  uint32_t x = C.in[0], y = C.out[0];
  bool sameShape = p.buffers[x].shape == p.buffers[y].shape;
  if (isConvertingCast(p, C, DType::BF16, DType::F32)) {
    if (u.output[y] || u.readers[y].empty())
      return false;
    for (Slot r : u.readers[y]) {
      const rt::Instr &R = p.instrs[r.instr];
      if (R.op == OpCode::Cast ? !mergesCleanly(p, x, R.out[0])
                               : !(sameShape && rt::bf16StorageAllowed(R.op, false, r.k)))
        return false;
    }
    for (Slot r : u.readers[y]) p.instrs[r.instr].in[r.k] = x;
    removed[i] = true;
    return true;
  }
  if (isConvertingCast(p, C, DType::F32, DType::BF16)) {
    if (!u.written[x] || u.output[x] || u.readers[x].size() != 1)
      return false;
    Slot w = u.writer[x];
    rt::Instr &P = p.instrs[w.instr];
    if (P.op == OpCode::Cast ? !mergesCleanly(p, P.in[0], y)
                             : !(sameShape && rt::bf16StorageAllowed(P.op, true, w.k)))
      return false;
    P.out[w.k] = y;
    removed[i] = true;
    return true;
  }
  return false;
}

} // namespace

BufferUses::BufferUses(const rt::Program &p)
    : writer(p.buffers.size(), -1), readers(p.buffers.size()), isOutput(p.buffers.size(), false) {
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    for (uint32_t id : p.instrs[i].out) writer[id] = int64_t(i);
    for (uint32_t id : p.instrs[i].in) readers[id].push_back(i);
  }
  for (uint32_t id : p.outputs) isOutput[id] = true;
}

/// Drops buffers no instruction, calling list, update or view names; renumbers.
void dropUnusedBuffers(rt::Program &p) {
  std::vector<bool> used(p.buffers.size(), false);
  for (const rt::Instr &I : p.instrs) {
    for (uint32_t id : I.in) used[id] = true;
    for (uint32_t id : I.out) used[id] = true;
  }
  for (uint32_t id : p.inputs) used[id] = true;
  for (uint32_t id : p.outputs) used[id] = true;
  for (const rt::BufferView &v : p.views) used[v.view] = used[v.base] = true;
  for (uint32_t id = 0; id < p.buffers.size(); ++id)
    if (p.buffers[id].kind != rt::BufferKind::Temp) // constants stay where they are
      used[id] = true;
  std::vector<uint32_t> newId(p.buffers.size());
  std::vector<rt::BufferDesc> kept;
  for (uint32_t id = 0; id < p.buffers.size(); ++id) {
    newId[id] = uint32_t(kept.size());
    if (used[id])
      kept.push_back(std::move(p.buffers[id]));
  }
  p.buffers = std::move(kept);
  for (rt::Instr &I : p.instrs) {
    for (uint32_t &id : I.in) id = newId[id];
    for (uint32_t &id : I.out) id = newId[id];
  }
  for (uint32_t &id : p.inputs) id = newId[id];
  for (uint32_t &id : p.outputs) id = newId[id];
  for (rt::InPlaceUpdate &u : p.updates) {
    u.output = newId[u.output];
    u.input = newId[u.input];
  }
  for (rt::BufferView &v : p.views) {
    v.view = newId[v.view];
    v.base = newId[v.base];
  }
}

int64_t foldBf16Casts(rt::Program &p) {
  std::vector<bool> removed(p.instrs.size(), false);
  int64_t folded = 0;
  // Each fold changes who reads or writes a few buffers; recounting after
  // every fold keeps the rules simple (programs have thousands of
  // instructions, a pass over them is cheap).
  for (bool changed = true; changed;) {
    changed = false;
    Uses u(p, removed);
    for (size_t i = 0; i < p.instrs.size() && !changed; ++i)
      if (!removed[i] && p.instrs[i].op == OpCode::Cast && foldOne(p, i, u, removed)) {
        changed = true;
        ++folded;
      }
  }
  std::vector<rt::Instr> live;
  for (size_t i = 0; i < p.instrs.size(); ++i)
    if (!removed[i])
      live.push_back(std::move(p.instrs[i]));
  p.instrs = std::move(live);
  dropUnusedBuffers(p);
  return folded;
}

} // namespace loom
