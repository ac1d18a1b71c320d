//===- Artifact.h - Reading and writing the versioned program file --------===//
//
// Part of loom, under the Apache License v2.0.
//
// The artifact is the file `loom compile` writes and `loom eval`/`loom train`
// read, so compiling (CPU machine) and running (GPU machine) can be separate
// steps. Its byte layout is specified in docs/artifact-format.md.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ARTIFACT_H
#define LOOM_RUNTIME_ARTIFACT_H

#include "loom/runtime/Program.h"

#include <string>

namespace loom::rt {

/// Current artifact format version. Bump on any layout change; readers refuse
/// versions they do not know. Version 3 added the view table; this reader
/// also reads version 2 files (no views).
constexpr uint32_t kArtifactVersion = 3;
constexpr uint32_t kOldestArtifactVersion = 2;

/// Serializes `p` to `path` atomically (temp file in the same directory, then
/// rename). Returns false and sets `err` (one line) on failure; on failure no
/// file is left at `path` or at the temp name.
bool writeArtifact(const Program &p, const std::string &path, std::string &err);

/// Reads and validates an artifact. Returns false and sets `err` (one line
/// naming the file and the problem: bad magic, unknown version, truncated,
/// inconsistent tables) on failure.
bool readArtifact(const std::string &path, Program &p, std::string &err);

} // namespace loom::rt

#endif
