//===- ModelLoading.h - ONNX or artifact to a runnable program --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_MODELLOADING_H
#define LOOM_TOOLS_MODELLOADING_H

#include "loom/runtime/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <functional>

#include <string>

namespace loom::tools {

/// Whether `path` starts with the artifact magic.
bool isArtifact(const std::string &path);

/// Runs the passes `addPasses` puts in a pass manager over `module`; on
/// failure sets `err` to "<path>: <what> failed: <first diagnostic>".
bool runPipeline(mlir::ModuleOp module, const std::string &path, const std::string &what,
                 const std::function<void(mlir::PassManager &)> &addPasses, std::string &err);

/// Imports an ONNX model specialized to batch x seq, runs the fusion
/// pipeline and lowers it to a program.
bool compileOnnx(const std::string &path, int64_t batch, int64_t seq,
                 rt::Program &program, std::string &err);

/// An artifact, or an ONNX model compiled on the fly.
bool loadProgram(const std::string &path, int64_t batch, int64_t seq,
                 rt::Program &program, std::string &err);

} // namespace loom::tools

#endif
