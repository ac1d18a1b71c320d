//===- JoinSiblingInputGradients.cpp - Sibling projections' dx as one GEMM ===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "codegen/JoinSiblingInputGradients.h"
#include "loom/runtime/Communicator.h"
#include "loom/runtime/RoundedCopies.h"

#include <algorithm>

namespace loom {
namespace {

using rt::BufferDesc;
using rt::DType;
using rt::Instr;
using rt::OpCode;

struct Use {
  size_t instr = 0, slot = 0;
};

class Joiner {
public:
  explicit Joiner(rt::Program &p)
      : p(p), base(rt::viewBases(p)), writers(p.buffers.size()), readers(p.buffers.size()),
        views(p.buffers.size()), isCopy(p.buffers.size(), false) {
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      const Instr &I = p.instrs[i];
      for (size_t k = 0; k < I.out.size(); ++k) writers[base[I.out[k]]].push_back({i, k});
      for (size_t k = 0; k < I.in.size(); ++k) readers[base[I.in[k]]].push_back({i, k});
    }
    for (size_t v = 0; v < p.views.size(); ++v) views[p.views[v].base].push_back(v);
    // A weight's bf16 rounding: AdamW's kept copy, or (where the step
    // keeps its casts) the Cast of the parameter that the forward runs.
    for (const rt::RoundedCopy &c : rt::roundedCopies(p))
      if (c.kind == rt::RoundedCopy::Rounded) isCopy[c.copy] = true;
    for (const Instr &I : p.instrs)
      if (I.op == OpCode::Cast && p.buffers[I.in[0]].kind == rt::BufferKind::Input &&
          p.buffers[I.in[0]].dtype == DType::F32 && p.buffers[I.out[0]].dtype == DType::BF16 &&
          writers[I.out[0]].size() == 1 && base[I.out[0]] == I.out[0])
        isCopy[I.out[0]] = true;
  }

  int64_t run() {
    size_t n = p.instrs.size();
    std::vector<int64_t> prev(n, -1);
    std::vector<bool> hasNext(n, false);
    for (size_t i = 0; i < n; ++i)
      if (isInputGradGemm(i) && (prev[i] = previousInChain(i)) >= 0)
        hasNext[size_t(prev[i])] = true;
    std::vector<bool> removed(n, false);
    int64_t joined = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!isInputGradGemm(i) || hasNext[i] || prev[i] < 0)
        continue;
      std::vector<size_t> chain = {i};
      for (int64_t j = prev[i]; j >= 0; j = prev[size_t(j)]) chain.insert(chain.begin(), size_t(j));
      if (!joinable(chain))
        continue;
      join(chain);
      for (size_t k = 0; k + 1 < chain.size(); ++k) removed[chain[k]] = true;
      joined += int64_t(chain.size()) - 1;
    }
    if (joined) {
      std::vector<Instr> kept;
      for (size_t i = 0; i < n; ++i)
        if (!removed[i]) kept.push_back(std::move(p.instrs[i]));
      p.instrs = std::move(kept);
    }
    return joined;
  }

private:
  /// dx = dy W^T: a MatMul [0, 1] of two bf16 operands, B a weight's
  /// rounded copy (no view), with no third input or an addend.
  bool isInputGradGemm(size_t i) const {
    const Instr &I = p.instrs[i];
    if (I.op != OpCode::MatMul || I.ints != std::vector<int64_t>{0, 1} || I.out.size() != 1 ||
        (I.in.size() == 3 && !rt::matMulAccumulates(p, I)) || I.in.size() < 2 || I.in.size() > 3)
      return false;
    uint32_t b = I.in[1];
    return p.buffers[I.in[0]].dtype == DType::BF16 && p.buffers[b].dtype == DType::BF16 &&
           isCopy[b] && base[b] == b;
  }

  /// The input-gradient GEMM whose result is instruction i's addend and
  /// nothing else's input, or -1.
  int64_t previousInChain(size_t i) const {
    const Instr &I = p.instrs[i];
    if (I.in.size() != 3 || base[I.in[2]] != I.in[2])
      return -1;
    uint32_t x = I.in[2];
    if (p.buffers[x].kind != rt::BufferKind::Temp || writers[x].size() != 1 ||
        readers[x].size() != 1 || writers[x][0].slot != 0 || !isInputGradGemm(writers[x][0].instr))
      return -1;
    return int64_t(writers[x][0].instr);
  }

  /// Every reader and writer of `id` (and of its views) may take a column block.
  bool slotsTakeBlocks(uint32_t id) const {
    for (const Use &u : writers[id])
      if (!rt::columnBlockSlot(p, p.instrs[u.instr], true, u.slot) || p.instrs[u.instr].out[u.slot] != id)
        return false;
    for (const Use &u : readers[id])
      if (!rt::columnBlockSlot(p, p.instrs[u.instr], false, u.slot))
        return false;
    return writers[id].size() == 1;
  }

  /// Whether an instruction strictly between `from` and `to` writes `id`.
  bool writtenBetween(uint32_t id, size_t from, size_t to) const {
    for (const Use &u : writers[base[id]])
      if (u.instr > from && u.instr < to) return true;
    return false;
  }

  bool joinable(const std::vector<size_t> &chain) const {
    const Instr &first = p.instrs[chain.front()];
    size_t from = chain.front(), to = chain.back();
    if (first.in.size() == 3 && writtenBetween(first.in[2], from, to))
      return false;
    std::vector<uint32_t> grads;
    const BufferDesc &g0 = p.buffers[base[first.in[0]]];
    const BufferDesc &w0 = p.buffers[first.in[1]];
    for (size_t i : chain) {
      const Instr &I = p.instrs[i];
      uint32_t a = base[I.in[0]], c = I.in[1];
      const BufferDesc &g = p.buffers[a], &w = p.buffers[c];
      if (g.kind != rt::BufferKind::Temp || g.dtype != DType::BF16 || g.shape.empty() ||
          g.rowPitch || std::find(grads.begin(), grads.end(), a) != grads.end())
        return false;
      grads.push_back(a);
      int64_t width = g.shape.back();
      // The same rows; 16-byte aligned blocks for the packed kernels.
      if (width % 8 || p.buffers[I.in[0]].shape.back() != width ||
          !std::equal(g.shape.begin(), g.shape.end() - 1, g0.shape.begin(), g0.shape.end() - 1))
        return false;
      if (w.shape.size() != 2 || w.shape[1] != width || w.shape[0] != w0.shape[0] ||
          !views[c].empty() || p.buffers[I.out[0]].dtype != p.buffers[first.out[0]].dtype)
        return false;
      for (const Use &u : writers[a])
        if (p.instrs[u.instr].op != OpCode::SwiGluGrad) return false;
      if (!slotsTakeBlocks(a) || !slotsTakeBlocks(c) || writtenBetween(a, from, to) ||
          writtenBetween(c, from, to))
        return false;
    }
    return true;
  }

  uint32_t newTemp(DType t, std::vector<int64_t> shape, std::string name) {
    BufferDesc d;
    d.name = std::move(name);
    d.dtype = t;
    d.shape = std::move(shape);
    d.kind = rt::BufferKind::Temp;
    d.bytes = uint64_t(d.numElements()) * rt::dtypeSize(t);
    p.buffers.push_back(d);
    return uint32_t(p.buffers.size() - 1);
  }

  /// Makes `id` (and its reshape views) column `col` of `joined`.
  void makeBlock(uint32_t id, uint32_t joined, int64_t col, int64_t pitch) {
    for (size_t v : views[id]) {
      p.views[v].base = joined;
      p.views[v].column = col;
      p.buffers[p.views[v].view].rowPitch = pitch;
    }
    p.views.push_back({id, joined, col});
    p.buffers[id].rowPitch = pitch;
  }

  void join(const std::vector<size_t> &chain) {
    Instr &last = p.instrs[chain.back()];
    const Instr &first = p.instrs[chain.front()];
    const BufferDesc &g0 = p.buffers[base[first.in[0]]];
    int64_t total = 0;
    std::string names;
    for (size_t i : chain) {
      total += p.buffers[base[p.instrs[i].in[0]]].shape.back();
      names += (names.empty() ? "" : ",") + p.buffers[p.instrs[i].in[1]].name;
    }
    std::vector<int64_t> rows(g0.shape.begin(), g0.shape.end() - 1);
    rows.push_back(total);
    uint32_t grads = newTemp(DType::BF16, rows, "joined gradients of " + names);
    uint32_t weights = newTemp(DType::BF16, {p.buffers[first.in[1]].shape[0], total},
                               "joined copies of " + names);
    int64_t col = 0;
    for (size_t i : chain) {
      uint32_t a = base[p.instrs[i].in[0]], c = p.instrs[i].in[1];
      makeBlock(a, grads, col, total);
      makeBlock(c, weights, col, total);
      col += p.buffers[a].shape.back();
    }
    std::vector<uint32_t> in = {grads, weights};
    if (first.in.size() == 3)
      in.push_back(first.in[2]);
    last.in = std::move(in);
  }

  rt::Program &p;
  std::vector<uint32_t> base;
  std::vector<std::vector<Use>> writers, readers; // per base buffer
  std::vector<std::vector<size_t>> views;         // per base: its entries in p.views
  std::vector<bool> isCopy;                        // weights rounded to bf16
};

/// Empties the temporaries nothing names any more (the joined GEMMs'
/// partial sums), keeping their ids: the arena planner would still give
/// each a lifetime before the first instruction, beside every whole-run
/// buffer.
void emptyUnnamedTemps(rt::Program &p) {
  std::vector<bool> named(p.buffers.size(), false);
  for (const Instr &I : p.instrs) {
    for (uint32_t id : I.in) named[id] = true;
    for (uint32_t id : I.out) named[id] = true;
  }
  for (const rt::BufferView &v : p.views) named[v.view] = named[v.base] = true;
  for (uint32_t id = 0; id < p.buffers.size(); ++id)
    if (!named[id] && p.buffers[id].kind == rt::BufferKind::Temp) {
      p.buffers[id].shape = {0};
      p.buffers[id].bytes = 0;
    }
}

} // namespace

int64_t joinSiblingInputGradients(rt::Program &p) {
  for (const Instr &I : p.instrs)
    if (rt::isCollectiveOp(I.op) || I.op == OpCode::ScaledMatMul) return 0;
  int64_t joined = Joiner(p).run();
  if (joined)
    emptyUnnamedTemps(p);
  return joined;
}

} // namespace loom
