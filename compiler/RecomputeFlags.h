//===- RecomputeFlags.h - --ac, --ac-layers, --ac-memory-budget -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The activation-checkpointing flags of `loom train` and `loom verify`, and
// the line that says what the recompute pass did to the compiled step.
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_RECOMPUTEFLAGS_H
#define LOOM_COMPILER_RECOMPUTEFLAGS_H

#include "compiler/CompileTrainStep.h"

#include <string>

namespace loom::compiler {

/// Reads the values of --ac, --ac-layers and --ac-memory-budget ("" when
/// not given) into `o`, with the backend whose memory a budget counts;
/// false with a one-line `err` naming the bad value.
bool readRecomputeFlags(const std::string &ac, const std::string &layers,
                        const std::string &memoryBudget, const std::string &backend,
                        TrainOptions &o, std::string &err);

/// "recompute: --ac selective (every layer): the backward re-runs 112 ops
/// (32 matmul, 16 rms_norm, ...)"; nothing under --ac none.
std::string recomputeSummary(const TrainOptions &o, const TrainProgram &tp);

} // namespace loom::compiler

#endif
