//===- AtomicFile.h - Writing a file whole or not at all --------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_ATOMICFILE_H
#define LOOM_TRAIN_ATOMICFILE_H

#include <string>

namespace loom::train {

/// Writes `text` to PATH.tmp, then renames it to `path`, so a reader never
/// sees half a file; false with a one-line `err` (no .tmp left behind).
bool writeAtomically(const std::string &path, const std::string &text, std::string &err);

} // namespace loom::train

#endif
