//===- FuseFp8Amax.h - Fp8Amax folded into the writer of its input -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// `loom.fp8_amax` (ir/Fp8.td) lowers to an Fp8Amax instruction, a pass
// over x for max |x|. After the cast folds and reshape views, the
// instruction that writes x's bytes is known; where it is one that can
// carry amax outputs (loom/runtime/Fp8Amax.h) and x is one of its first
// regular outputs, whole, the Fp8Amax instruction is removed and its
// result becomes that instruction's amax output for x: the producer finds
// the maximum while it writes x. Other Fp8Amax instructions stay.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_FUSEFP8AMAX_H
#define LOOM_CODEGEN_FUSEFP8AMAX_H

#include "loom/runtime/Program.h"

namespace loom {

/// Folds what it can in `p` (before arena planning); returns how many
/// Fp8Amax instructions it removed.
int64_t fuseFp8Amax(rt::Program &p);

} // namespace loom

#endif
