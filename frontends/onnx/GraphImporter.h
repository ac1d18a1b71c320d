//===- GraphImporter.h - Walks an ONNX graph, folding or emitting -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Each ONNX value is either known (a HostTensor: folded, or a small
// initializer), an initializer kept as a named weight, or an SSA value of
// the loom function being built. Nodes whose inputs are all known fold in
// the ConstantFolder; the rest are emitted as loom ops by OpEmitters.cpp.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_GRAPHIMPORTER_H
#define LOOM_FRONTENDS_ONNX_GRAPHIMPORTER_H

#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/TorchExportInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::onnx_import {

/// Thrown inside the importer to abort with a one-line message; caught at
/// the entry point, so callers only ever see an error string.
struct ImportError {
  std::string message;
};

class GraphImporter {
public:
  GraphImporter(mlir::OpBuilder &builder, std::string modelDir, int64_t opset,
                const TorchExportInfo &torchInfo, bool weightsAsShapes = false)
      : b(builder), torchInfo(torchInfo), modelDir(std::move(modelDir)), opset(opset),
        weightsAsShapes(weightsAsShapes) {}

  void addInitializer(const onnx::TensorProto &t);
  void bindValue(const std::string &name, mlir::Value v) { entries[name].value = v; }
  /// The IR element type of ONNX type `onnxType` (null when unsupported).
  /// With weightsAsShapes, narrow floats (a bf16 export) come in as f32:
  /// the planner costs values at the plan's precision, and an f32 model
  /// is what the train step is built from.
  mlir::Type elementType(int32_t onnxType) const;
  void importNode(const onnx::NodeProto &node);
  /// Counts the reads of every value in `graph` (node inputs, graph
  /// outputs), so importNode can drop a folded value after its last read:
  /// a long sequence's causal mask folds through several T x T tensors.
  void countUses(const onnx::GraphProto &graph);
  mlir::Value valueOf(const std::string &name);
  /// The value of graph output `name`, once every node is imported; an
  /// error names the output rather than the last node.
  mlir::Value graphOutput(const std::string &name);
  /// After every node: makes each parameter one constant. The optimizer
  /// may fold a tied weight's W^T (a tied LM head) into its own
  /// initializer while the embedding reads W itself; both are the same
  /// parameter, so the copy is replaced by a transpose of the original and
  /// training sees one weight whose gradient sums both uses.
  void tieParameterCopies();

  // --- used by the op emitters ---------------------------------------------
  mlir::OpBuilder &b;
  mlir::Location loc() const { return curLoc; }
  const onnx::NodeProto &node() const { return *curNode; }
  /// The known value of input `k`, if any (omitted inputs: nullopt).
  const HostTensor *known(size_t k);
  /// Input `k` as an SSA value (constants are materialized).
  mlir::Value input(size_t k);
  bool hasInput(size_t k) const;
  /// Binds output `k` of the current node.
  void setOutput(size_t k, mlir::Value v);
  void setSequenceOutput(size_t k, std::vector<mlir::Value> values);
  const std::vector<mlir::Value> &sequenceInput(size_t k);
  /// Builds op `name` with `operands` and attributes, inferring result types
  /// through InferTypeOpInterface; a shape error becomes an ImportError
  /// naming the node.
  mlir::Operation *create(llvm::StringRef name, mlir::ValueRange operands,
                          llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                          unsigned numResults = 1);
  /// Builds op `name` whose result type is given (reshape, expand, cast).
  mlir::Value createTyped(llvm::StringRef name, mlir::Value operand,
                          mlir::Type resultType);
  mlir::Value constant(const HostTensor &t, llvm::StringRef name = "");
  /// Known value `h` converted to `type` as a constant, made once: a
  /// folded causal mask (T^2 elements) feeds every layer.
  mlir::Value convertedConstant(const HostTensor *h, ElemType type);
  [[noreturn]] void fail(const std::string &msg) const;
  /// A zero-filled parameter constant (for parameters the exporter dropped
  /// because their initial value was zero, such as GPT-2's Conv1D biases).
  mlir::Value zeroParam(const std::string &name, llvm::ArrayRef<int64_t> shape, mlir::Type elem);
  const TorchExportInfo &torchInfo;
  int64_t opsetVersion() const { return opset; }

private:
  struct Entry {
    std::optional<HostTensor> host;
    const onnx::TensorProto *init = nullptr;
    bool weight = false; // float matrix initializer: never folded
    mlir::Value value;
    std::vector<mlir::Value> sequence;
  };
  Entry &entry(const std::string &name);
  const HostTensor *knownValue(const std::string &name);
  bool tryFold(const onnx::NodeProto &node);
  mlir::Value weightConstant(const onnx::TensorProto &t, const ParamUse *use);
  /// The constant for initializer `init` seen as parameter `use`: one per
  /// (initializer, parameter) pair, so merged initializers come apart.
  mlir::Value paramConstant(const std::string &init, const ParamUse &use);
  std::map<std::pair<std::string, std::string>, mlir::Value> paramValues;

  std::string modelDir;
  bool weightsAsShapes; // OnnxImportOptions::weightsAsShapes
  int64_t opset;
  std::map<std::string, Entry> entries;
  std::map<std::pair<const HostTensor *, ElemType>, mlir::Value> converted;
  std::map<std::string, int64_t> usesLeft; // countUses; graph outputs never reach 0
  const onnx::NodeProto *curNode = nullptr;
  mlir::Location curLoc = mlir::UnknownLoc::get(b.getContext());
};

/// Element type of an ONNX element type number; null when unsupported.
mlir::Type elementTypeFor(mlir::MLIRContext *ctx, int32_t onnxType);

/// Emits loom ops for `node`; false when the op has no emitter.
bool emitNode(GraphImporter &g, const onnx::NodeProto &node);

/// The op types with an emitter.
std::vector<std::string> emitterOps();

} // namespace loom::onnx_import

#endif
