//===- OpRegistry.h - What the ONNX importer does with each op --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// One entry per ONNX op the importer handles: the opsets whose form it
// reads, the attributes it honours, whether known inputs fold
// (ConstantFolder.cpp) and which loom ops a node on computed values becomes
// (OpEmitters.cpp). docs/onnx-coverage.md is generated from it (`loom
// import --coverage`), with the gradient column read from the loom ops
// themselves (DifferentiableOpInterface); checkOnnxOpRegistry() holds it to
// the importer's actual tables, so neither can drift from the other.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_OPREGISTRY_H
#define LOOM_FRONTENDS_ONNX_OPREGISTRY_H

#include <string>
#include <vector>

namespace mlir {
class MLIRContext;
}

namespace loom {

struct OnnxOpEntry {
  std::string op;
  int sinceOpset = 13;    // the first opset whose form is read (13: loom's minimum)
  std::string attributes; // honoured attributes and accepted values; "" when none
  bool folds = false;     // known inputs are evaluated at import (shapes, masks, tables)
  std::vector<std::string> loomOps; // what a node on computed values becomes; empty: folds only
  std::string cuda = "yes";         // the CUDA backend's support of those loom ops
  // Set when the op's form has no gradient although its loom ops implement
  // the interface (a max reduction: loom.reduce's rule covers sum and mean).
  std::string noGradient;
  std::string notes;
};

/// Every ONNX op the importer handles, in alphabetical order.
const std::vector<OnnxOpEntry> &onnxOpRegistry();

/// "" when the registry names exactly the ops the importer folds and emits
/// (ConstantFolder's rules, OpEmitters' table, Shape and Constant) and
/// every loom op it lists exists in `ctx`'s loom dialect; else what differs.
std::string checkOnnxOpRegistry(mlir::MLIRContext &ctx);

/// docs/onnx-coverage.md.
std::string onnxCoverageMarkdown(mlir::MLIRContext &ctx);

} // namespace loom

#endif
