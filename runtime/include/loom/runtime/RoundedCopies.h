//===- RoundedCopies.h - Parameters' bf16 copies kept between runs -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A bf16 training step reads each f32 master weight through a Cast to bf16
// at its start: one more read of 4 bytes and write of 2 per parameter,
// every step. AdamW already holds the new f32 value in a register, so it
// may store it a second time, rounded (its optional fourth output): the
// copy the next run's GEMMs read. That copy is a Temp read before anything
// in the run writes it; it lives in the arena for the whole run and keeps
// its bytes from one run to the next, like the in-place updated state.
//
// The rules, all derived from the instruction (nothing in the artifact
// says more): a fourth output of AdamW is the rounded copy of the input
// its first output updates in place (Program::updates); the executor
// rounds that input into the copy before a run whenever the caller has
// set the input since the last run (the first run included), so the copy
// always equals round(input) as the run begins, bit for bit what the Cast
// it replaces would have written.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ROUNDEDCOPIES_H
#define LOOM_RUNTIME_ROUNDEDCOPIES_H

#include "loom/runtime/Program.h"

#include <string>
#include <vector>

namespace loom::rt {

struct RoundedCopy {
  uint32_t copy = 0;  // buffer id: AdamW's fourth output (a Temp)
  uint32_t input = 0; // buffer id: the parameter Input it is a copy of
  size_t instr = 0;   // the AdamW instruction that keeps it current
};

/// Every AdamW with a fourth output whose first output updates an input in
/// place, in instruction order.
std::vector<RoundedCopy> roundedCopies(const Program &p);

/// Why the program's rounded copies break the rules above (an AdamW with a
/// fourth output and no in-place update of its parameter; a copy that is
/// not a Temp of the parameter's shape, or that another instruction also
/// writes); empty when they are well formed.
std::string checkRoundedCopies(const Program &p);

/// An executor's record of which copies no longer equal round(input):
/// all of them at first, and those of an input the caller sets.
class StaleRoundedCopies {
public:
  explicit StaleRoundedCopies(const Program &p);
  /// The caller wrote input `index` (Program::inputs order).
  void inputSet(size_t index);
  /// The copies to round before this run; they count as fresh afterwards
  /// (AdamW keeps them current).
  std::vector<RoundedCopy> take();
  bool any() const { return staleCount_ > 0; }

private:
  std::vector<RoundedCopy> copies_;
  std::vector<std::vector<size_t>> byInput_; // per input index, its copies
  std::vector<bool> stale_;
  size_t staleCount_ = 0;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_ROUNDEDCOPIES_H
