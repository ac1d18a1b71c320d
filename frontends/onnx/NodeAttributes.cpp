//===- NodeAttributes.cpp -------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/NodeAttributes.h"

namespace loom::onnx_import {

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                     const std::string &name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t attrInt(const onnx::NodeProto &node, const std::string &name,
                int64_t fallback) {
  const auto *a = findAttr(node, name);
  return a ? a->i() : fallback;
}

float attrFloat(const onnx::NodeProto &node, const std::string &name,
                float fallback) {
  const auto *a = findAttr(node, name);
  return a ? a->f() : fallback;
}

std::vector<int64_t> attrInts(const onnx::NodeProto &node,
                              const std::string &name) {
  const auto *a = findAttr(node, name);
  if (!a)
    return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string describeNode(const onnx::NodeProto &node) {
  std::string name = node.name().empty()
                         ? (node.output_size() ? node.output(0) : "?")
                         : node.name();
  return "node '" + name + "' (" + node.op_type() + ")";
}

} // namespace loom::onnx_import
