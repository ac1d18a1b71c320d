//===- ReshapeViews.h - Reshapes as views instead of copies -----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Codegen lowers loom.reshape (and a cast that also reshapes) to a Cast
// instruction: a full copy. A reshape of a contiguous temporary needs no
// copy at all: the result can name the same bytes under its own shape
// (rt::BufferView). In a bf16 training step these copies are mostly the
// [B, T, D] -> [B T, D] flattening before each weight-gradient GEMM and the
// head split and merge around attention: about one copy per GEMM.
//
// Two steps, run on the lowered program before arena planning:
//   splitConvertingReshapes, before foldBf16Casts: a Cast that changes both
//     dtype and shape becomes a same-shape conversion and a same-dtype
//     reshape, ordered so that the conversion touches the kernel it may fold
//     into (widening: reshape, then convert for the reader; narrowing:
//     convert what the writer wrote, then reshape);
//   makeReshapeViews, after it: every same-dtype Cast from a temporary to a
//     temporary is dropped and its result becomes a view of the source (of
//     the source's base, when the source is a view itself).
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_RESHAPEVIEWS_H
#define LOOM_CODEGEN_RESHAPEVIEWS_H

#include "loom/runtime/Program.h"

namespace loom {

/// Splits every dtype-and-shape-changing Cast in two. Returns how many.
int64_t splitConvertingReshapes(rt::Program &p);

/// Turns same-dtype Casts between temporaries into views (p.views); returns
/// how many instructions it removed. Offsets are not placed yet: the arena
/// planner gives a view its base's offset and keeps the base live while any
/// of its views is read.
int64_t makeReshapeViews(rt::Program &p);

} // namespace loom

#endif
