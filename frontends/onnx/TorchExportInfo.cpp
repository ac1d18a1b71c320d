//===- TorchExportInfo.cpp ------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/TorchExportInfo.h"

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <sstream>

namespace loom::onnx_import {
namespace {

std::string metadata(const google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto> &props,
                     const std::string &key) {
  for (const auto &p : props)
    if (p.key() == key)
      return p.value();
  return "";
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The value under `key` of a message's metadata_props when this libonnx
/// predates the field: NodeProto's (field 9) arrived in ONNX 1.16, and
/// GraphProto's (16) and ValueInfoProto's (4) are newer still, so the
/// parser keeps them as unknown fields whose entries are serialized
/// StringStringEntryProto messages.
std::string unknownMetadata(const google::protobuf::Message &message, int field,
                            const std::string &key) {
  const auto &unknown = message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto &f = unknown.field(i);
    if (f.number() != field || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()) && entry.key() == key)
      return entry.value();
  }
  return "";
}

std::string nodeMetadata(const onnx::NodeProto &node, const std::string &key) {
  return unknownMetadata(node, 9, key);
}

std::string graphMetadata(const onnx::GraphProto &graph, const std::string &key) {
  return unknownMetadata(graph, 16, key);
}

std::string valueInfoMetadata(const onnx::ValueInfoProto &info, const std::string &key) {
  return unknownMetadata(info, 4, key);
}

/// The quoted names of a Python list literal: "['a', 'b']" -> {a, b}.
std::vector<std::string> quotedNames(const std::string &list) {
  std::vector<std::string> names;
  for (size_t at = list.find('\''); at != std::string::npos;) {
    size_t end = list.find('\'', at + 1);
    if (end == std::string::npos)
      break;
    names.push_back(list.substr(at + 1, end - at - 1));
    at = list.find('\'', end + 1);
  }
  return names;
}

} // namespace

TorchExportInfo::TorchExportInfo(const onnx::ModelProto &model) {
  // torch.onnx writes the signature on the graph; accept it on the model
  // as well. Lines look like:
  //   p_m_model_norm_weight: PARAMETER target='m.model.norm.weight'
  const char *key = "pkg.torch.export.ExportedProgram.graph_signature";
  std::string text = graphMetadata(model.graph(), key);
  if (text.empty())
    text = metadata(model.metadata_props(), key);
  std::istringstream sig(text);
  for (std::string line; std::getline(sig, line);) {
    for (const char *kind : {": BUFFER target='", ": CONSTANT_TENSOR target='"}) {
      size_t at = line.find(kind);
      if (at == std::string::npos)
        continue;
      size_t start = at + std::string(kind).size();
      buffers_.insert(line.substr(start, line.find('\'', start) - start));
    }
    size_t colon = line.find(": PARAMETER target='");
    if (colon == std::string::npos)
      continue;
    size_t start = colon + std::string(": PARAMETER target='").size();
    size_t end = line.find('\'', start);
    std::string target = line.substr(start, end - start);
    placeholderToParam_[line.substr(0, colon)] = target;
    params_.insert(target);
  }
  for (const onnx::ValueInfoProto &info : model.graph().value_info()) {
    std::string from = valueInfoMetadata(info, "pkg.onnxscript.optimizer.folded_from");
    if (!from.empty())
      foldedFrom_[info.name()] = quotedNames(from);
  }
}

std::string TorchExportInfo::initializerFoldedFrom(const std::string &param) const {
  for (const auto &[name, sources] : foldedFrom_)
    for (const std::string &source : sources)
      if (source == param)
        return name;
  return "";
}

bool TorchExportInfo::holdsOnlyBuffers(const std::string &name) const {
  if (buffers_.count(name))
    return true;
  auto it = foldedFrom_.find(name);
  if (it == foldedFrom_.end())
    return false;
  bool buffer = false;
  for (const std::string &source : it->second) {
    if (params_.count(source))
      return false;
    buffer |= buffers_.count(source) != 0;
  }
  return buffer;
}

std::string TorchExportInfo::atenTarget(const onnx::NodeProto &node) {
  std::string fx = nodeMetadata(node, "pkg.torch.onnx.fx_node");
  size_t at = fx.find("target=torch.ops.");
  if (at == std::string::npos)
    return "";
  at += std::string("target=torch.ops.").size();
  return fx.substr(at, fx.find(']', at) - at);
}

std::vector<std::string> TorchExportInfo::paramArgs(const onnx::NodeProto &node) const {
  std::string fx = nodeMetadata(node, "pkg.torch.onnx.fx_node");
  size_t args = fx.find("(args = (");
  std::vector<std::string> out;
  if (args == std::string::npos)
    return out;
  for (size_t at = fx.find('%', args); at != std::string::npos; at = fx.find('%', at + 1)) {
    size_t end = fx.find_first_of(",) ", at);
    auto it = placeholderToParam_.find(fx.substr(at + 1, end - at - 1));
    if (it != placeholderToParam_.end())
      out.push_back(it->second);
  }
  return out;
}

bool TorchExportInfo::paramForInput(const onnx::NodeProto &node, int k, ParamUse &use) const {
  const std::string &input = node.input(k);
  // The node's FX call names the parameter it really reads. It wins over the
  // initializer's own name: the exporter merges initializers with equal
  // contents, so "layers.0.input_layernorm.weight" may well feed layer 1.
  std::vector<std::string> params = paramArgs(node);
  std::string target = atenTarget(node);
  std::string chosen;
  if (params.size() == 1) {
    chosen = params[0];
  } else if (!params.empty()) {
    // Calls with a weight and a bias: linear(x, W, b) exported as MatMul +
    // Add, addmm(b, x, W) as Gemm, layer_norm(x, w, b).
    bool wantBias = ((node.op_type() == "Gemm" || node.op_type() == "LayerNormalization") && k == 2) ||
                    node.op_type() == "Add";
    for (const std::string &p : params)
      if (endsWith(p, wantBias ? ".bias" : ".weight"))
        chosen = p;
  }
  if (chosen.empty()) {
    if (!isParameter(input))
      return false;
    use = ParamUse{input, false}; // kept under its own name: stored as is
    return true;
  }
  // An initializer the optimizer folded from other tensors is that
  // parameter only if it was folded from it: layer_norm(x, w + 1, b) names
  // one parameter (b), yet its folded w + 1 feeds the weight input.
  if (auto it = foldedFrom_.find(input); it != foldedFrom_.end() && input != chosen &&
                                         std::find(it->second.begin(), it->second.end(),
                                                   chosen) == it->second.end())
    return false;
  // aten.linear(x, W) computes x W^T: the exporter folds W^T into a new
  // initializer, so that initializer holds the parameter transposed (unless
  // it kept a parameter's name, which only untransposed tensors do).
  bool linearWeight = target.rfind("aten.linear", 0) == 0 && endsWith(chosen, ".weight");
  use = ParamUse{chosen, linearWeight && !isParameter(input)};
  return true;
}

} // namespace loom::onnx_import
