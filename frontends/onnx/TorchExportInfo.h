//===- TorchExportInfo.h - What torch.onnx records about parameters -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// torch.onnx (dynamo) exports keep the FX graph's provenance as metadata:
// the model's `pkg.torch.export.ExportedProgram.graph_signature` maps
// placeholders (p_m_model_..._weight) to parameter names, and each node's
// `pkg.torch.onnx.fx_node` shows the aten call and its arguments. The
// optimizer meanwhile renames and folds weights (a linear's W^T becomes
// initializer `val_94`) and merges initializers with equal contents (every
// all-ones norm weight becomes one initializer). From the metadata the
// importer recovers, per use, which parameter an initializer really is and
// whether it is stored transposed.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_TORCHEXPORTINFO_H
#define LOOM_FRONTENDS_ONNX_TORCHEXPORTINFO_H

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace loom::onnx_import {

/// How an ONNX initializer relates to the parameter it holds.
struct ParamUse {
  std::string name;        // parameter name as torch knows it (m.model.x.weight)
  bool transposed = false; // initializer = parameter^T (folded linear weight)
};

class TorchExportInfo {
public:
  explicit TorchExportInfo(const onnx::ModelProto &model);

  /// Whether the model carried a graph signature (a torch.onnx export).
  bool available() const { return !placeholderToParam_.empty(); }
  /// Whether `name` is a parameter target of the signature.
  bool isParameter(const std::string &name) const { return params_.count(name) != 0; }
  /// Whether initializer `name` holds a buffer and no parameter: a buffer
  /// target itself (GPT-J's embed_positions, a non-persistent sin/cos
  /// table) or, after the optimizer folded it, made only from buffers and
  /// values (its value_info's `pkg.onnxscript.optimizer.folded_from`).
  /// Such a table is a known value even when it is a matrix.
  bool holdsOnlyBuffers(const std::string &name) const;
  /// Every parameter target of the signature.
  const std::set<std::string> &parameters() const { return params_; }
  /// An initializer the optimizer folded from parameter `param` (such as
  /// W^T of a falcon linear, 1 + w of a gemma norm, or the rows of a
  /// position table a static export picks), or "" when none names it.
  std::string initializerFoldedFrom(const std::string &param) const;
  /// The parameter held by input `k` of `node`, when the metadata says.
  bool paramForInput(const onnx::NodeProto &node, int k, ParamUse &use) const;
  /// Parameter arguments of the node's aten call, in call order.
  std::vector<std::string> paramArgs(const onnx::NodeProto &node) const;
  /// The aten target of the node's FX call ("aten.linear.default"), or "".
  static std::string atenTarget(const onnx::NodeProto &node);

private:
  std::map<std::string, std::string> placeholderToParam_;
  std::set<std::string> params_;
  std::set<std::string> buffers_; // BUFFER and CONSTANT_TENSOR targets
  std::map<std::string, std::vector<std::string>> foldedFrom_;
};

} // namespace loom::onnx_import

#endif
