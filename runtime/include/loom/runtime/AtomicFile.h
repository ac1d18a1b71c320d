//===- AtomicFile.h - Writing a file whole or not at all --------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ATOMICFILE_H
#define LOOM_RUNTIME_ATOMICFILE_H

#include <string>

namespace loom::rt {

/// Writes `text` to PATH.tmp.PID, then renames it to `path`, so a reader
/// never sees half a file, and processes writing the same file at once
/// (ranks; the GEMM tuning table) never share a temp file: the last rename
/// wins whole. False with a one-line `err` (no temp file left behind).
bool writeAtomically(const std::string &path, const std::string &text, std::string &err);

} // namespace loom::rt

#endif
