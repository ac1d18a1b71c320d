//===- ModelLoading.h - ONNX or artifact to a runnable program --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_MODELLOADING_H
#define LOOM_TOOLS_MODELLOADING_H

#include "loom/runtime/Program.h"

#include <string>

namespace loom::tools {

/// Whether `path` starts with the artifact magic.
bool isArtifact(const std::string &path);

/// Imports an ONNX model specialized to batch x seq, runs the fusion
/// pipeline and lowers it to a program.
bool compileOnnx(const std::string &path, int64_t batch, int64_t seq,
                 rt::Program &program, std::string &err);

/// An artifact, or an ONNX model compiled on the fly.
bool loadProgram(const std::string &path, int64_t batch, int64_t seq,
                 rt::Program &program, std::string &err);

} // namespace loom::tools

#endif
