//===- LowerToProgram.h - loom IR to a runtime program ----------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_CODEGEN_LOWERTOPROGRAM_H
#define LOOM_CODEGEN_LOWERTOPROGRAM_H

#include "loom/runtime/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace loom {

/// Lowers a function of loom ops into a runtime program: one buffer per
/// value (constants copied into the blob), one instruction per op, and
/// arena offsets planned from liveness so dead intermediates share memory.
/// Returns false with `err` (one line naming the op) on an op codegen does
/// not handle.
bool lowerToProgram(mlir::func::FuncOp func, rt::Program &program, std::string &err);

} // namespace loom

#endif
