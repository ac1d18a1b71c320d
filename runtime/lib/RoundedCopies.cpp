//===- RoundedCopies.cpp - What AdamW keeps of a parameter between runs ---===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/RoundedCopies.h"
#include "lib/Diagnostics.h"

#include <utility>

namespace loom::rt {
namespace {

std::string label(const Program &p, uint32_t id) {
  return cat("buffer ", id, " '", p.buffers[id].name, "'");
}

/// The input that `I`'s first output updates in place, or -1.
int64_t updatedInput(const Program &p, const Instr &I) {
  for (const InPlaceUpdate &u : p.updates)
    if (u.output == I.out[0])
      return u.input;
  return -1;
}

/// The buffers AdamW instruction `I` keeps between runs, with their kinds.
std::vector<std::pair<uint32_t, RoundedCopy::Kind>> keptOutputs(const Instr &I) {
  std::vector<std::pair<uint32_t, RoundedCopy::Kind>> kept;
  if (adamwKeepsCopy(I))
    kept.push_back({I.out[3], RoundedCopy::Rounded});
  if (adamwKeepsAmax(I) && I.out.size() > 3)
    kept.push_back({I.out.back(), RoundedCopy::Amax});
  return kept;
}

} // namespace

std::vector<RoundedCopy> roundedCopies(const Program &p) {
  std::vector<RoundedCopy> copies;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr &I = p.instrs[i];
    if (I.op != OpCode::AdamW || I.out.empty())
      continue;
    int64_t input = updatedInput(p, I);
    for (auto [id, kind] : keptOutputs(I))
      // Out-of-range ids are validate()'s to report; skipping them keeps
      // this safe on a program not yet validated (a fuzzed artifact).
      if (input >= 0 && id < p.buffers.size())
        copies.push_back({id, uint32_t(input), i, kind});
  }
  return copies;
}

std::string checkRoundedCopies(const Program &p) {
  std::vector<int64_t> writers(p.buffers.size(), 0);
  for (const Instr &I : p.instrs)
    for (uint32_t id : I.out)
      if (id < writers.size())
        ++writers[id];
  std::vector<bool> isView(p.buffers.size(), false);
  // A reshape view is never written; a column block may be the copy
  // (sibling weights side by side, BufferView).
  for (const BufferView &v : p.views)
    if (v.view < isView.size() && v.column < 0)
      isView[v.view] = true;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr &I = p.instrs[i];
    std::vector<std::pair<uint32_t, RoundedCopy::Kind>> kept = keptOutputs(I);
    bool idsInRange = !I.in.empty() && I.out[0] < p.buffers.size() && I.in[0] < p.buffers.size();
    for (auto [id, kind] : kept)
      idsInRange = idsInRange && id < p.buffers.size();
    if (kept.empty() || !idsInRange)
      continue; // arity and ids are checkInstrIds/checkOpShapes' to report
    std::string where = cat("instr ", i, " (adamw): ");
    int64_t input = updatedInput(p, I);
    for (auto [id, kind] : kept) {
      const char *what = kind == RoundedCopy::Amax ? "amax" : "rounded copy";
      if (input < 0 || uint32_t(input) != I.in[0])
        return where + cat(kind == RoundedCopy::Amax ? "an " : "a ", what, " ", label(p, id),
                           " needs the parameter updated in place, but ",
                           label(p, I.out[0]), " is not an in-place update of ",
                           label(p, I.in[0]));
      const BufferDesc &copy = p.buffers[id];
      if (copy.kind != BufferKind::Temp || isView[id])
        return where + cat("the ", what, " ", label(p, id), " must be a temporary that is no reshape view");
      if (writers[id] != 1)
        return where + cat("the ", what, " ", label(p, id), " has ", writers[id],
                           " writers, not AdamW alone");
    }
  }
  return "";
}

StaleRoundedCopies::StaleRoundedCopies(const Program &p)
    : copies_(roundedCopies(p)), byInput_(p.inputs.size()), stale_(copies_.size(), true),
      staleCount_(copies_.size()) {
  for (size_t k = 0; k < copies_.size(); ++k)
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (p.inputs[i] == copies_[k].input)
        byInput_[i].push_back(k);
}

void StaleRoundedCopies::inputSet(size_t index) {
  if (index >= byInput_.size())
    return;
  for (size_t k : byInput_[index])
    if (!stale_[k]) {
      stale_[k] = true;
      ++staleCount_;
    }
}

std::vector<RoundedCopy> StaleRoundedCopies::take() {
  std::vector<RoundedCopy> out;
  for (size_t k = 0; k < copies_.size() && staleCount_; ++k)
    if (stale_[k]) {
      out.push_back(copies_[k]);
      stale_[k] = false;
      --staleCount_;
    }
  return out;
}

} // namespace loom::rt
