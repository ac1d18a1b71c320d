//===- NodeAttributes.h - Reading ONNX node attributes ----------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_NODEATTRIBUTES_H
#define LOOM_FRONTENDS_ONNX_NODEATTRIBUTES_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace loom::onnx_import {

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                     const std::string &name);
int64_t attrInt(const onnx::NodeProto &node, const std::string &name,
                int64_t fallback);
float attrFloat(const onnx::NodeProto &node, const std::string &name,
                float fallback);
std::vector<int64_t> attrInts(const onnx::NodeProto &node,
                              const std::string &name);
/// "node 'name' (OpType)" for error messages.
std::string describeNode(const onnx::NodeProto &node);

} // namespace loom::onnx_import

#endif
