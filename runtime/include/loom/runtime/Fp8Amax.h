//===- Fp8Amax.h - amax outputs fused into producing instructions -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Tensorwise fp8 scaling needs max |x| of each quantized tensor. Reading
// the tensor once more for it (an Fp8Scale over x) costs a full pass; the
// instruction that writes x can find it on the way instead. Such an
// instruction carries extra outputs after its regular ones: out[R + k]
// ([1, 1] f32, R = fusedAmaxRegularOutputs(op)) holds max |out[k]| over the
// values out[k] stores (a bf16 output's values as stored, widened), NaN if
// any is NaN. The maximum is taken, like Fp8Scale's, over the magnitudes'
// bit patterns (fp8AbsBits: they order like the values, NaN above all), so
// any order of reduction, and atomicMax of partial results on a GPU, gives
// the same bits; an Fp8Scale of that [1, 1] tensor then gives the scale of
// x bit for bit. At most as many amax outputs as regular outputs that can
// have one (fusedAmaxLimit); amax k always belongs to regular output k.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_FP8AMAX_H
#define LOOM_RUNTIME_FP8AMAX_H

#include "loom/runtime/Program.h"

#include <string>

namespace loom::rt {

/// How many regular outputs an instruction of `op` has when it may carry
/// fused amax outputs; 0 when it may not.
size_t fusedAmaxRegularOutputs(OpCode op);

/// How many of those regular outputs may have an amax (the first ones).
size_t fusedAmaxLimit(OpCode op);

/// The fused amax outputs `I` carries (0 for most instructions; 0 for a
/// norm gradient whose extra output is dx's rounded copy).
inline size_t fusedAmaxCount(const Instr &I) {
  size_t r = fusedAmaxRegularOutputs(I.op);
  return r && I.out.size() > r && !storesRoundedDx(I) ? I.out.size() - r : 0;
}

/// "" or why `I`'s amax outputs are malformed (count, shape, dtype).
std::string checkFusedAmax(const Program &p, const Instr &I);

/// `I` without its amax outputs (to check its regular operands as usual).
Instr withoutFusedAmax(const Instr &I);

} // namespace loom::rt

#endif
