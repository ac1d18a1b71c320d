//===- OnnxImporter.h - ONNX model to loom IR -------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_ONNXIMPORTER_H
#define LOOM_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace onnx {
class ModelProto;
}

namespace loom {

struct OnnxImportOptions {
  /// Values for the dynamic dims of the model's inputs: the first dynamic
  /// dim of an input is the batch, the second the sequence. 0: not given.
  int64_t batch = 0;
  int64_t seq = 0;
  /// Weights (float initializers of two or more non-trivial dims) import
  /// as zero splats of their shape and type: their bytes, embedded or in
  /// external data files, are never read. For `loom plan`, which reads
  /// shapes only: a graph-only export whose weight files are absent plans
  /// the same as the full one, and a 16 GB model plans without reading it.
  bool weightsAsShapes = false;
};

/// Reads an ONNX model (binary `.onnx`, or text format when the file name
/// ends in `.onnxtxt`/`.textproto`) and imports it into a module holding
/// `func.func @forward`. Returns null and sets `err` to one line naming the
/// file and the problem (node, op, opset, dim) on failure.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxModel(mlir::MLIRContext &ctx,
                                                  const std::string &path,
                                                  const OnnxImportOptions &opts,
                                                  std::string &err);

/// Parses a model file (binary, or text format for .onnxtxt/.textproto)
/// with the same checks and one-line errors as importOnnxModel.
bool loadOnnxModel(const std::string &path, onnx::ModelProto &model, std::string &err);

} // namespace loom

#endif
