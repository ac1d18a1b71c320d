//===- BufferPlanMemory.h - Memory of a compiled training step --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Reads the compiler's own buffer plan (the arena codegen laid out for the
// @train_step program) and splits its peak into the planner's categories.
// Buffer lifetimes follow codegen: inputs live for the whole program,
// outputs from their definition to the end, temporaries from definition to
// last read. At the instruction where the most bytes are live:
//   parameters      : AdamW's parameter inputs and updated-parameter outputs
//   optimizer state : AdamW's moment inputs and updated-moment outputs
//   gradients       : AdamW's gradient inputs (and, with clipping, the
//                     unscaled gradients they are a scalar multiple of)
//   communication   : what collectives read and write besides the above
//                     (FSDP's gathered parameters and unsharded
//                     gradients, DDP's buckets, gathered activations)
//   activations     : forward temporaries (defined up to the loss, the
//                     vocabulary-parallel one too) and the token inputs
//   workspace       : backward temporaries, values computed from the
//                     weights alone (autocast's bf16 copies of them),
//                     scalars, the arena's fragmentation (arena size -
//                     peak live) and the constant blob (rotary tables, masks)
// so the parts sum to arena + constants exactly.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_BUFFERPLANMEMORY_H
#define LOOM_PLANNER_BUFFERPLANMEMORY_H

#include "loom/runtime/Program.h"
#include "planner/ModelCost.h"

#include <string>

namespace loom::planner {

/// False with `err` when the program is not a training step (no AdamW).
bool bufferPlanMemory(const rt::Program &program, MemoryBreakdown &out, std::string &err);

} // namespace loom::planner

#endif
