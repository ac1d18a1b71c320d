//===- ProgramStats.cpp - Opcode counts and where the casts sit -----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/ProgramStats.h"
#include "loom/runtime/AdamWGroups.h"
#include "loom/runtime/FusedAttentionEligibility.h"
#include "lib/Diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

namespace loom::rt {

ProgramStats programStats(const Program &p) {
  ProgramStats s;
  s.instrs = int64_t(p.instrs.size());
  for (const BufferView &v : p.views) ++(v.column >= 0 ? s.columnBlocks : s.views);
  for (const AdamWGroup &g : smallAdamWGroups(p)) {
    s.groupedAdamWs += int64_t(g.members.size());
    ++s.adamwGroups;
  }
  std::vector<int64_t> writer(p.buffers.size(), -1);
  std::vector<std::vector<int64_t>> readers(p.buffers.size());
  std::vector<uint32_t> base = viewBases(p);
  // An instruction that reads a reshape view reads its base's bytes: a
  // cast whose result is read only through views is not unused.
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    for (uint32_t id : p.instrs[i].out) writer[id] = int64_t(i);
    for (uint32_t id : p.instrs[i].in) readers[base[id]].push_back(int64_t(i));
  }
  for (const Instr &I : p.instrs) {
    ++s.perOpcode[opcodeName(I.op)];
    int64_t &bytes = s.bytesPerOpcode[opcodeName(I.op)];
    for (uint32_t id : I.in) bytes += int64_t(p.buffers[id].bytes);
    for (uint32_t id : I.out) bytes += int64_t(p.buffers[id].bytes);
    if (I.op == OpCode::MatMul || I.op == OpCode::ScaledMatMul) {
      // ints[0] transposes a: its contracted dim is then the next-to-last.
      const std::vector<int64_t> &a = p.buffers[I.in[0]].shape;
      int64_t k = a.empty() ? 1 : !I.ints.empty() && I.ints[0] && a.size() >= 2 ? a[a.size() - 2]
                                                                                 : a.back();
      s.gemmFlops += 2.0 * double(k) * double(p.buffers[I.out[0]].numElements());
    }
    if (I.op == OpCode::MatMul) {
      DType a = p.buffers[I.in[0]].dtype, b = p.buffers[I.in[1]].dtype;
      std::string third = matMulThirdInput(p, I);
      ++s.gemmKinds[cat(dtypeName(a), " x ", dtypeName(b), " -> ",
                        dtypeName(p.buffers[I.out[0]].dtype),
                        third.empty() ? "" : " (+" + third + ")",
                        matMulSumsB(I) ? " (+B's column sums)" : "")];
      s.f32Gemms += a == DType::F32 && b == DType::F32;
    }
    if (I.op == OpCode::Attention || I.op == OpCode::AttentionGrad) {
      ++s.attention;
      FusedAttentionCheck c = checkFusedAttention(p, I);
      if (c.eligible)
        ++s.fusedAttention;
      else
        ++s.attentionRefusals[c.why];
    }
    if (I.op == OpCode::Fp8Scale) {
      const BufferDesc &x = p.buffers[I.in[0]];
      int64_t w = writer[base[I.in[0]]]; // a reshape view's bytes are its base's
      ++s.fp8ScaleSources[cat(x.numElements() == 1 ? "amax" : "tensor", " from ",
                              w < 0 ? "input" : opcodeName(p.instrs[size_t(w)].op))];
    }
    if (I.op != OpCode::Cast)
      continue;
    DType from = p.buffers[I.in[0]].dtype, to = p.buffers[I.out[0]].dtype;
    if (from == to) {
      ++s.castKinds["copy"];
      continue;
    }
    ++s.converting;
    std::string kind = cat(dtypeName(from), "->", dtypeName(to));
    ++s.castKinds[kind];
    uint32_t src = I.in[0], dst = I.out[0];
    std::string producer = writer[src] >= 0 ? opcodeName(p.instrs[writer[src]].op)
                           : p.buffers[src].kind == BufferKind::Constant ? "constant"
                                                                         : "input";
    std::set<std::string> consumers; // sorted, so equal neighbourhoods share a key
    for (int64_t r : readers[base[dst]]) consumers.insert(opcodeName(p.instrs[r].op));
    if (p.buffers[dst].kind == BufferKind::Output)
      consumers.insert("output");
    std::string users;
    for (const std::string &c : consumers) users += (users.empty() ? "" : ", ") + c;
    ++s.castSites[cat(producer, " -> [", kind, "] -> ", users.empty() ? "(unused)" : users)];
  }
  return s;
}

namespace {

/// Bytes as MiB with three decimals (never a bare integer, so a count
/// and a size never read alike).
std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", double(bytes) / (1 << 20));
  return buf;
}

void appendSorted(std::string &out, const std::map<std::string, int64_t> &m, const char *indent) {
  std::vector<std::pair<std::string, int64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.second > b.second; });
  for (auto &[k, n] : v) out += cat(indent, n, "  ", k, "\n");
}

} // namespace

std::string formatProgramStats(const ProgramStats &s) {
  std::string out = cat("program: ", s.instrs, " instructions, ", s.converting,
                        " converting casts, ", s.views, " reshape views",
                        s.columnBlocks ? cat(", ", s.columnBlocks, " column blocks") : std::string(),
                        "\n");
  int64_t gemms = 0;
  for (auto &[k, n] : s.gemmKinds) gemms += n;
  out += cat("matmuls: ", gemms, " (", s.f32Gemms, " with f32 operands)\n");
  appendSorted(out, s.gemmKinds, "  ");
  if (s.attention) {
    out += cat("attention: ", s.fusedAttention, " of ", s.attention,
               " instructions eligible for fused bf16 engines\n");
    appendSorted(out, s.attentionRefusals, "  not eligible: ");
  }
  out += "instructions per opcode:\n";
  appendSorted(out, s.perOpcode, "  ");
  if (s.adamwGroups)
    out += cat("small adamw instructions: ", s.groupedAdamWs, " in ", s.adamwGroups,
               " grouped CUDA launches\n");
  if (!s.fp8ScaleSources.empty()) {
    out += "fp8_scale inputs:\n";
    appendSorted(out, s.fp8ScaleSources, "  ");
  }
  out += "casts by dtype:\n";
  appendSorted(out, s.castKinds, "  ");
  out += "converting casts by producer -> consumers:\n";
  appendSorted(out, s.castSites, "  ");
  int64_t total = 0;
  for (auto &[k, n] : s.bytesPerOpcode) total += n;
  out += cat("bytes moved per opcode (operands read once, results written once): ",
             mib(total), " MiB in all; GEMMs ", s.gemmFlops / 1e9, " GFLOP\n");
  std::vector<std::pair<std::string, int64_t>> v(s.bytesPerOpcode.begin(), s.bytesPerOpcode.end());
  std::stable_sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.second > b.second; });
  for (auto &[k, n] : v) out += cat("  ", mib(n), " MiB  ", k, "\n");
  return out;
}

} // namespace loom::rt
