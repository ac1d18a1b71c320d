//===- FuseFp8Amax.cpp - Fp8Amax folded into the writer of its input ------===//
//
// Part of loom, under the Apache License v2.0.
//
// Why it is exact: an amax output holds max |out[k]| over the values the
// instruction stores in out[k] (bf16 as stored), which are x's bytes when
// x is out[k] or a view naming exactly its bytes (a reshape); Fp8Amax
// reads the same values. The maximum of magnitude bit patterns does not
// depend on the order it is taken in.
//
// A second form: x is a bf16 Cast of an f32 tensor y that a fusible
// instruction writes (y has other f32 readers, so the cast could not fold
// into its writer: the residual stream's gradients). Rounding to bf16 is
// monotone and odd (|round(v)| = round(|v|)), so max |round(y)| =
// round(max |y|): y's writer finds max |y|, and a one-element Cast rounds
// it where the Fp8Amax stood. (A NaN stays NaN; only its payload may
// differ, which no fp8 value or scale keeps.)
//===----------------------------------------------------------------------===//
#include "codegen/FuseFp8Amax.h"
#include "codegen/FoldCasts.h"

#include "loom/runtime/Fp8Amax.h"

#include <algorithm>
#include <vector>

namespace loom {

namespace {

using rt::OpCode;

class AmaxFuser {
public:
  explicit AmaxFuser(rt::Program &p) : p(p), base(rt::viewBases(p)), writer(p.buffers.size(), -1) {
    for (size_t i = 0; i < p.instrs.size(); ++i)
      for (uint32_t id : p.instrs[i].out) writer[id] = int64_t(i);
  }

  /// Rewrites Fp8Amax instruction i if it can; true when it did.
  bool fuse(size_t i) {
    rt::Instr &a = p.instrs[i];
    uint32_t x = a.in[0], amax = a.out[0];
    size_t k;
    if (rt::Instr *w = fusibleWriter(x, k)) {
      attach(*w, k, amax);
      return true;
    }
    // x = Cast(y: f32 -> bf16) with y from a fusible writer.
    int64_t c = writer[base[x]];
    if (c < 0 || !whole(x))
      return false;
    const rt::Instr &cast = p.instrs[size_t(c)];
    if (cast.op != OpCode::Cast || p.buffers[base[x]].dtype != rt::DType::BF16 ||
        p.buffers[cast.in[0]].dtype != rt::DType::F32 ||
        p.buffers[cast.in[0]].numElements() != p.buffers[x].numElements())
      return false;
    rt::Instr *w = fusibleWriter(cast.in[0], k);
    if (!w)
      return false;
    attach(*w, k, newAmaxBuffer());
    uint32_t wide = w->out[rt::fusedAmaxRegularOutputs(w->op) + k]; // an amax already there wins
    rt::BufferDesc &d = p.buffers[amax];
    d.dtype = rt::DType::BF16;
    d.bytes = 2;
    a.op = OpCode::Cast; // the amax rounded as the tensor was
    a.in = {wide};
    return true;
  }

private:
  /// The instruction storing all of x's bytes as its output k < its
  /// amax limit, or null.
  rt::Instr *fusibleWriter(uint32_t x, size_t &k) {
    int64_t wi = writer[base[x]];
    if (wi < 0 || !whole(x))
      return nullptr;
    rt::Instr &w = p.instrs[size_t(wi)];
    if (rt::storesRoundedDx(w)) // its extra output is taken (Program.h)
      return nullptr;
    size_t limit = rt::fusedAmaxLimit(w.op);
    for (k = 0; k < limit; ++k)
      if (w.out[k] == base[x])
        return &w;
    return nullptr;
  }

  /// A view names exactly its base's bytes only when it is as large.
  bool whole(uint32_t x) const {
    return p.buffers[base[x]].numElements() == p.buffers[x].numElements();
  }

  uint32_t newAmaxBuffer() {
    rt::BufferDesc d;
    d.dtype = rt::DType::F32;
    d.shape = {1, 1};
    d.kind = rt::BufferKind::Temp;
    d.bytes = 4;
    p.buffers.push_back(d);
    return uint32_t(p.buffers.size() - 1);
  }

  /// Makes `amax` w's amax output for its output k. Slots before k get
  /// fillers (SwiGluGrad's dup without dgate's); a later request for a
  /// filler's slot takes it over; a slot already holding an amax keeps it,
  /// and `amax`'s readers read that one.
  void attach(rt::Instr &w, size_t k, uint32_t amax) {
    size_t regular = rt::fusedAmaxRegularOutputs(w.op);
    while (w.out.size() <= regular + k) {
      w.out.push_back(newAmaxBuffer());
      fillers.push_back(w.out.back());
    }
    uint32_t &slot = w.out[regular + k];
    auto filler = std::find(fillers.begin(), fillers.end(), slot);
    if (filler != fillers.end()) {
      fillers.erase(filler);
      slot = amax;
    } else if (slot != amax) {
      for (rt::Instr &r : p.instrs)
        for (uint32_t &id : r.in)
          if (id == amax) id = slot;
      leftUnused = true;
    }
  }

public:
  bool leftUnused = false; // an amax buffer no longer named by anything

  rt::Program &p;
  std::vector<uint32_t> base;
  std::vector<int64_t> writer; // the instruction writing each buffer
  std::vector<uint32_t> fillers;
};

} // namespace

int64_t fuseFp8Amax(rt::Program &p) {
  AmaxFuser fuser(p);
  std::vector<bool> removed(p.instrs.size(), false);
  int64_t fused = 0;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    if (p.instrs[i].op != OpCode::Fp8Amax || !fuser.fuse(i))
      continue;
    ++fused;
    removed[i] = p.instrs[i].op == OpCode::Fp8Amax; // a Cast now stands in the second form
  }
  std::vector<rt::Instr> live;
  for (size_t i = 0; i < p.instrs.size(); ++i)
    if (!removed[i])
      live.push_back(std::move(p.instrs[i]));
  p.instrs = std::move(live);
  if (fuser.leftUnused)
    dropUnusedBuffers(p);
  return fused;
}

} // namespace loom
