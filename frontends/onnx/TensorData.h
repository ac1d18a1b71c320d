//===- TensorData.h - Reading ONNX tensor contents --------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Tensor contents come embedded (raw_data or typed fields) or from external
// data files next to the model. External files are read with checks: the
// location must stay inside the model's folder, the file must exist, and the
// byte range must lie inside it.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_TENSORDATA_H
#define LOOM_FRONTENDS_ONNX_TENSORDATA_H

#include "frontends/onnx/HostTensor.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace loom::onnx_import {

/// Bytes per element of an ONNX element type, 0 when unsupported.
size_t elemSize(int32_t onnxType);

/// Checked static shape of a tensor proto (overflow and negative dims).
bool tensorShape(const onnx::TensorProto &t, std::vector<int64_t> &shape,
                 std::string &err);

/// The tensor's contents as little-endian bytes of its element type.
/// `modelDir` resolves external data; `err` is one line naming the tensor.
bool tensorBytes(const onnx::TensorProto &t, const std::string &modelDir,
                 std::vector<char> &bytes, std::string &err);

/// The tensor as a HostTensor.
bool tensorFromProto(const onnx::TensorProto &t, const std::string &modelDir,
                     HostTensor &out, std::string &err);

} // namespace loom::onnx_import

#endif
