//===- RoundedCopies.h - What AdamW keeps of a parameter between runs -*- C++ -*-===//
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
//
// An fp8 tensorwise step also reads each quantized weight once more for
// its scale, max |p| (Fp8Scale over the f32 parameter). AdamW may find
// that maximum of the value it stores, too: with ints = [1] its last
// output is max |p'| ([1, 1] f32, the maximum of the magnitudes' bit
// patterns, as Fp8Scale takes it, loom/runtime/Fp8Amax.h), and the next
// run's Fp8Scale reads that one value instead of the weight. It is kept
// and refreshed exactly like the rounded copy (the executor takes max
// |input| when the caller set the input), so it equals the amax the
// Fp8Scale would have found, and the scale is the same bits.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ROUNDEDCOPIES_H
#define LOOM_RUNTIME_ROUNDEDCOPIES_H

#include "loom/runtime/Program.h"

#include <string>
#include <vector>

namespace loom::rt {

/// Whether AdamW instruction `I` writes max |p'| as its last output (ints = [1]).
inline bool adamwKeepsAmax(const Instr &I) {
  return I.op == OpCode::AdamW && I.ints.size() == 1 && I.ints[0] == 1;
}

/// Whether AdamW instruction `I` writes the rounded copy (output 3).
inline bool adamwKeepsCopy(const Instr &I) {
  return I.op == OpCode::AdamW && I.out.size() == (adamwKeepsAmax(I) ? 5u : 4u);
}

struct RoundedCopy {
  enum Kind { Rounded, Amax };
  uint32_t copy = 0;  // buffer id: AdamW's rounded copy or amax output (a Temp)
  uint32_t input = 0; // buffer id: the parameter Input it is derived from
  size_t instr = 0;   // the AdamW instruction that keeps it current
  Kind kind = Rounded; // round(input), or max |input| ([1, 1] f32)
};

/// The rounded copies and amaxes of every AdamW whose first output updates
/// an input in place, in instruction order (a copy before its amax).
std::vector<RoundedCopy> roundedCopies(const Program &p);

/// Why the program's rounded copies or amaxes break the rules above (an
/// AdamW keeping one without an in-place update of its parameter; one
/// that is no Temp, a view, or written by another instruction too; an
/// amax that is not [1, 1] f32); empty when they are well formed.
std::string checkRoundedCopies(const Program &p);

/// An executor's record of which copies no longer equal round(input) (or
/// max |input|): all of them at first, and those of an input the caller
/// sets.
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
