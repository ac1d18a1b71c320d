//===- HostTensor.h - Known tensor values during ONNX import ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// While importing, every ONNX value whose contents are known (initializers,
// Constant nodes, and anything computed only from those and from static
// shapes) is held as a HostTensor, so shape and mask subgraphs fold away
// before any IR is built. Integers and booleans keep exact int64 values;
// floating point values are kept in double and narrowed when emitted.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_HOSTTENSOR_H
#define LOOM_FRONTENDS_ONNX_HOSTTENSOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::onnx_import {

/// Element types as ONNX numbers them (TensorProto.DataType).
enum class ElemType : int32_t {
  Float = 1, Uint8 = 2, Int8 = 3, Uint16 = 4, Int16 = 5, Int32 = 6, Int64 = 7,
  Bool = 9, Float16 = 10, Double = 11, Uint32 = 12, Uint64 = 13, BFloat16 = 16,
};

inline bool isFloatType(ElemType t) {
  return t == ElemType::Float || t == ElemType::Double || t == ElemType::Float16 ||
         t == ElemType::BFloat16;
}
const char *elemTypeName(int32_t onnxType);

struct HostTensor {
  ElemType type = ElemType::Float;
  std::vector<int64_t> shape;
  std::vector<double> f;  // when isFloatType(type)
  std::vector<int64_t> i; // otherwise (bool as 0/1)

  int64_t numElements() const;
  bool isFloat() const { return isFloatType(type); }
  double at(int64_t k) const { return isFloat() ? f[k] : double(i[k]); }
  int64_t intAt(int64_t k) const { return isFloat() ? int64_t(f[k]) : i[k]; }
  /// Fresh tensor of `type` and `shape`, zero-filled.
  static HostTensor zeros(ElemType type, std::vector<int64_t> shape);
  static HostTensor scalarInt(int64_t v);
  /// 1-D int64 tensor.
  static HostTensor ints(const std::vector<int64_t> &values);
  /// Same values converted to `type` (ONNX Cast semantics).
  HostTensor castTo(ElemType type) const;
  std::vector<int64_t> toInts() const;
};

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

} // namespace loom::onnx_import

#endif
