//===- PrecisionFlags.h - --precision, --fp8, --fp8-lm-head ------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The numeric-format flags of `loom train`, read into TrainOptions.
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_PRECISIONFLAGS_H
#define LOOM_COMPILER_PRECISIONFLAGS_H

#include "compiler/CompileTrainStep.h"

#include <string>

namespace loom::compiler {

/// --precision fp32|bf16, --fp8 off|tensorwise|rowwise and --fp8-lm-head
/// (which needs fp8) into o.bf16, o.fp8 ("" for off) and o.fp8LmHead;
/// false with a one-line `err` naming the flag and the bad value.
bool readPrecisionFlags(const std::string &precision, const std::string &fp8, bool fp8LmHead,
                        TrainOptions &o, std::string &err);

} // namespace loom::compiler

#endif
