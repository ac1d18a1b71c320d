//===- ModelLoading.h - ONNX or artifact to a runnable program --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COMPILER_MODELLOADING_H
#define LOOM_COMPILER_MODELLOADING_H

#include "loom/runtime/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"

#include <functional>

#include <string>

namespace loom::compiler {

/// Whether `path` starts with the artifact magic.
bool isArtifact(const std::string &path);

/// Refuses, naming the file, a module whose @forward tokens are not a
/// static [batch, seq] tensor.
bool checkTokens(mlir::ModuleOp module, const std::string &path, int64_t batch, int64_t seq,
                 std::string &err);

/// The model at `path` as loom IR holding @forward: an ONNX model imported
/// with its dynamic dims specialized to `batch` x `seq` (weights as zero
/// splats of their shapes with `weightsAsShapes`), or a .mlir file parsed
/// as it is. Refuses, naming the file, a model whose tokens are not
/// [batch, seq] (a fixed batch or sequence that differs); null with `err`.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &ctx, const std::string &path,
                                              int64_t batch, int64_t seq, bool weightsAsShapes,
                                              std::string &err);

/// `loom import`: the model imported at `batch` x `seq` (0: as the model
/// has it; weights as zero splats with `shapesOnly`), fused with `fuse`,
/// printed as loom IR with constants of more than `elideLargerThan`
/// elements elided. False with `err`.
bool printImportedModel(const std::string &path, int64_t batch, int64_t seq, bool shapesOnly,
                        bool fuse, int64_t elideLargerThan, std::string &ir, std::string &err);

/// `loom import --coverage`: the ONNX operators the importer handles, as
/// docs/onnx-coverage.md lists them; false when the op registry and the
/// importer disagree.
bool onnxCoverage(std::string &markdown, std::string &err);

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

} // namespace loom::compiler

#endif
