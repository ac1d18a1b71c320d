//===- FoldBiasGradients.cpp - Bias gradients from the weight-gradient GEMM ===//
//
// Part of loom, under the Apache License v2.0.
//
// Conditions, per Reduce R: s = Reduce(d, sum over every dim but the last)
// followed by C: g = Cast(s: f32 -> bf16):
//  - d is bf16 and s f32 (the bias gradient's column sums), s has one
//    element per column of d, s is read by C alone and is no program
//    output; g is a Temp of s's element count and no program output;
//  - some MatMul M has bf16 operands and a bf16 result, two inputs (no
//    bias, no addend), rank-2 operands, B not transposed ([K, N]), and B
//    holds d's bytes under d's rows (d itself, or d through same-dtype
//    reshapes either way, with N = d's last dim);
//  - M has one output yet. M now writes g: earlier than C did when M
//    comes first. When it comes later, what depends on g and ran before M
//    (the bias's AdamW: the optimizer runs interleaved with the backward;
//    under FSDP the sums' widening cast and reduce-scatter too) moves to
//    just after M, in its order, unless M itself depends on it or an
//    instruction left in between overwrites in place (Program::updates)
//    what a moved one reads (otherwise every buffer has one writer before
//    placement, so what the moved instructions read is unchanged by the
//    move, and every later reader of what they write is moved with them).
// M then writes g as its second output; R and C go, and s with them.
//===----------------------------------------------------------------------===//
#include "codegen/FoldBiasGradients.h"
#include "codegen/FoldCasts.h"

#include <algorithm>
#include <vector>

namespace loom {
namespace {

using rt::DType;
using rt::OpCode;

/// The buffer whose bytes `id` holds: through same-dtype Casts of equal
/// element count (reshapes, not yet views), back to where they start.
uint32_t sourceOf(const rt::Program &p, const std::vector<int64_t> &writer, uint32_t id) {
  while (writer[id] >= 0) {
    const rt::Instr &W = p.instrs[size_t(writer[id])];
    if (W.op != OpCode::Cast || W.in.size() != 1)
      break;
    const rt::BufferDesc &from = p.buffers[W.in[0]], &to = p.buffers[id];
    if (from.dtype != to.dtype || from.numElements() != to.numElements())
      break;
    id = W.in[0];
  }
  return id;
}

/// Whether Reduce `R` sums every dim of its input but the last.
bool sumsColumns(const rt::Program &p, const rt::Instr &R) {
  const std::vector<int64_t> &x = p.buffers[R.in[0]].shape;
  if (R.ints.size() != x.size() || R.ints[0] != 0 || x.size() < 2)
    return false;
  for (size_t k = 1; k < R.ints.size(); ++k)
    if (R.ints[k] != int64_t(k - 1))
      return false;
  return true;
}

} // namespace

int64_t foldBiasGradients(rt::Program &p) {
  const size_t n = p.instrs.size();
  const BufferUses uses(p);
  const std::vector<int64_t> &writer = uses.writer;
  const std::vector<std::vector<size_t>> &readers = uses.readers;
  const std::vector<bool> &isOutput = uses.isOutput;
  // The weight-gradient GEMMs by the source of their B operand.
  std::vector<std::vector<size_t>> gemmsOfB(p.buffers.size());
  for (size_t i = 0; i < n; ++i) {
    const rt::Instr &M = p.instrs[i];
    if (M.op != OpCode::MatMul || M.in.size() != 2 || M.out.size() != 1 || M.ints.size() != 2 ||
        M.ints[1] != 0)
      continue;
    const rt::BufferDesc &a = p.buffers[M.in[0]], &b = p.buffers[M.in[1]], &y = p.buffers[M.out[0]];
    if (a.dtype != DType::BF16 || b.dtype != DType::BF16 || y.dtype != DType::BF16 ||
        a.shape.size() != 2 || b.shape.size() != 2)
      continue;
    gemmsOfB[sourceOf(p, writer, M.in[1])].push_back(i);
  }

  // Per buffer, the instruction that overwrites its bytes in place
  // (Program::updates: AdamW's new parameter and moments), or -1.
  std::vector<int64_t> updatedBy(p.buffers.size(), -1);
  for (const rt::InPlaceUpdate &u : p.updates) updatedBy[u.input] = writer[u.output];

  // The new order: each folded Reduce and Cast dropped; what depends on g
  // and ran before M moved to just after M.
  std::vector<bool> removed(n, false);
  std::vector<std::vector<size_t>> after(n); // instructions moved to just after M
  std::vector<bool> moved(n, false);
  int64_t folded = 0;
  for (size_t r = 0; r < n; ++r) {
    const rt::Instr &R = p.instrs[r];
    if (R.op != OpCode::Reduce || R.in.size() != 1 || R.out.size() != 1 || !sumsColumns(p, R))
      continue;
    const uint32_t d = R.in[0], s = R.out[0];
    const rt::BufferDesc &dd = p.buffers[d], &sd = p.buffers[s];
    if (dd.dtype != DType::BF16 || sd.dtype != DType::F32 || isOutput[s] ||
        sd.numElements() != dd.shape.back() || readers[s].size() != 1)
      continue;
    const size_t c = readers[s][0];
    const rt::Instr &C = p.instrs[c];
    if (C.op != OpCode::Cast || C.in.size() != 1 || C.out.size() != 1)
      continue;
    const uint32_t g = C.out[0];
    const rt::BufferDesc &gd = p.buffers[g];
    if (gd.dtype != DType::BF16 || gd.kind != rt::BufferKind::Temp || isOutput[g] ||
        gd.numElements() != sd.numElements())
      continue;
    for (size_t m : gemmsOfB[sourceOf(p, writer, d)]) {
      rt::Instr &M = p.instrs[m];
      if (removed[m] || moved[m] || M.out.size() != 1 ||
          p.buffers[M.in[1]].shape.back() != dd.shape.back())
        continue;
      // What depends on g and ran before M (the bias's AdamW; under FSDP
      // also the widening cast and the reduce-scatter of the sums), to
      // move after it: none already moved or removed or given followers,
      // and M itself not among them (every reader of a moved result up to
      // M is moved too, by construction).
      std::vector<size_t> early;
      std::vector<bool> tainted(p.buffers.size(), false);
      tainted[g] = true;
      for (size_t i = c + 1; i < m; ++i) {
        const rt::Instr &J = p.instrs[i];
        if (!std::any_of(J.in.begin(), J.in.end(), [&](uint32_t id) { return tainted[id]; }))
          continue;
        early.push_back(i);
        for (uint32_t o : J.out) tainted[o] = true;
      }
      bool movable = std::none_of(M.in.begin(), M.in.end(), [&](uint32_t id) { return tainted[id]; });
      for (size_t i : early) {
        movable = movable && !moved[i] && !removed[i] && after[i].empty();
        // Nor may one of them, moved, read bytes that an instruction left
        // behind overwrites in place before M.
        for (uint32_t id : p.instrs[i].in) {
          const int64_t w = updatedBy[id];
          movable = movable && !(w > int64_t(i) && w <= int64_t(m) &&
                                 !std::binary_search(early.begin(), early.end(), size_t(w)));
        }
      }
      if (!movable)
        continue;
      M.out.push_back(g);
      M.ints.push_back(1);
      removed[r] = removed[c] = true;
      for (size_t i : early) {
        moved[i] = true;
        after[m].push_back(i);
      }
      ++folded;
      break;
    }
  }
  if (!folded)
    return 0;
  std::vector<rt::Instr> order;
  for (size_t i = 0; i < n; ++i) {
    if (removed[i] || moved[i])
      continue;
    order.push_back(std::move(p.instrs[i]));
    for (size_t j : after[i]) order.push_back(std::move(p.instrs[j]));
  }
  p.instrs = std::move(order);
  dropUnusedBuffers(p);
  return folded;
}

} // namespace loom
