//===- Artifact.h - Reading and writing the versioned program file --------===//
//
// Part of loom, under the Apache License v2.0.
//
// The artifact is the file `loom compile` writes and `loom eval` reads, so
// compiling (CPU machine) and running (GPU machine) can be separate steps.
// It holds one Program: a training step (a TrainProgram's parameter table,
// a pipeline's stages) does not travel as a file yet (docs/architecture.md).
// Its byte layout is specified in docs/artifact-format.md.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ARTIFACT_H
#define LOOM_RUNTIME_ARTIFACT_H

#include "loom/runtime/Program.h"

#include <string>

namespace loom::rt {

/// Current artifact format version. Bump on any change to the layout or to
/// the meaning of a record; readers refuse versions they do not know.
/// Version 3 added the view table; version 4 gave attention its lse output
/// and attention_grad its o and lse inputs. An older file's attention
/// instructions cannot be read as version 4's (its backward has no saved
/// statistics to read), so this reader refuses everything before 4.
constexpr uint32_t kArtifactVersion = 5;
constexpr uint32_t kOldestArtifactVersion = 4;

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
