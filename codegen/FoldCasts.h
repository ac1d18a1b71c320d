//===- FoldCasts.h - Folding f32 <-> bf16 casts into their neighbours -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Autocast (passes/AutocastBf16.cpp) brackets ops with f32 -> bf16 -> f32
// cast pairs; lowered one to one, each cast is an instruction and a full
// pass over memory. Many kernels can instead read bf16 and compute in f32,
// or compute in f32 and store bf16 (Program.h, bf16StorageAllowed), with
// bit-identical results. This runs on the lowered program, before arena
// planning, and removes the casts it can:
//   consumer fold: y = Cast(x: bf16 -> f32) whose readers all accept bf16
//     in that slot (or are Casts, which convert anyway): they read x;
//   producer fold: y = Cast(x: f32 -> bf16) where x is read by this cast
//     only and its writer may store bf16 in that slot (or is a Cast): the
//     writer stores y directly.
// Buffers left without any reference are dropped from the table.
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_FOLDCASTS_H
#define LOOM_CODEGEN_FOLDCASTS_H

#include "loom/runtime/Program.h"

namespace loom {

/// Folds what it can in `p` (buffers not yet placed: offsets are ignored).
/// Returns the number of cast instructions removed.
int64_t foldBf16Casts(rt::Program &p);

/// Drops buffers no instruction, calling list, update or view names, and
/// renumbers the rest (after rewrites that leave some unreferenced).
void dropUnusedBuffers(rt::Program &p);

/// Who writes and who reads each buffer of a program, and which buffers
/// are program outputs: the tables the folds on lowered programs start
/// from (a snapshot: rewrites do not update it).
struct BufferUses {
  std::vector<int64_t> writer;              // the last instruction writing it, or -1
  std::vector<std::vector<size_t>> readers; // instructions reading it, in program order
  std::vector<bool> isOutput;               // named in Program::outputs
  explicit BufferUses(const rt::Program &p);
};

} // namespace loom

#endif
