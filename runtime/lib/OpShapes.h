//===- OpShapes.h - Per-opcode arity, shape and dtype rules -----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_LIB_OPSHAPES_H
#define LOOM_RUNTIME_LIB_OPSHAPES_H

#include "loom/runtime/Program.h"

#include <string>
#include <vector>

namespace loom::rt {

/// Checks `I` against the rules Program.h states for its opcode: operand and
/// attribute counts, shapes and dtypes. Assumes its buffer ids are in range.
/// Returns "" when it fits, else the problem (without an instruction prefix).
std::string checkOpShapes(const Program &p, const Instr &I);
/// The same for the fp8 opcodes (Fp8OpShapes.cpp).
std::string checkFp8OpShapes(const Program &p, const Instr &I);

/// NumPy broadcast of two shapes (right-aligned, size-1 dims stretch).
/// Returns false when some dim pair is neither equal nor has a 1.
bool broadcastShapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                     std::vector<int64_t> &out);

} // namespace loom::rt

#endif
