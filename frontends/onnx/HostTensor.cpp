//===- HostTensor.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/HostTensor.h"

#include <cmath>

namespace loom::onnx_import {

const char *elemTypeName(int32_t t) {
  switch (t) {
  case 1: return "float32";
  case 2: return "uint8";
  case 3: return "int8";
  case 4: return "uint16";
  case 5: return "int16";
  case 6: return "int32";
  case 7: return "int64";
  case 8: return "string";
  case 9: return "bool";
  case 10: return "float16";
  case 11: return "float64";
  case 12: return "uint32";
  case 13: return "uint64";
  case 16: return "bfloat16";
  default: return "unknown";
  }
}

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor HostTensor::zeros(ElemType type, std::vector<int64_t> shape) {
  HostTensor t;
  t.type = type;
  t.shape = std::move(shape);
  if (t.isFloat())
    t.f.assign(t.numElements(), 0.0);
  else
    t.i.assign(t.numElements(), 0);
  return t;
}

HostTensor HostTensor::scalarInt(int64_t v) {
  HostTensor t = zeros(ElemType::Int64, {});
  t.i[0] = v;
  return t;
}

HostTensor HostTensor::ints(const std::vector<int64_t> &values) {
  HostTensor t = zeros(ElemType::Int64, {int64_t(values.size())});
  t.i = values;
  return t;
}

HostTensor HostTensor::castTo(ElemType to) const {
  HostTensor out = zeros(to, shape);
  int64_t n = numElements();
  // One loop per case: folded causal masks of long sequences have T^2
  // elements, so the per-element branch is worth hoisting.
  if (out.isFloat()) {
    bool single = to == ElemType::Float;
    for (int64_t k = 0; k < n; ++k) {
      double v = isFloat() ? f[k] : double(i[k]);
      out.f[k] = single ? double(float(v)) : v;
    }
  } else if (to == ElemType::Bool) {
    for (int64_t k = 0; k < n; ++k) out.i[k] = (isFloat() ? f[k] : double(i[k])) != 0.0;
  } else if (isFloat()) {
    // Float to int truncates toward zero, as ONNX Cast does.
    for (int64_t k = 0; k < n; ++k) out.i[k] = int64_t(std::trunc(f[k]));
  } else {
    out.i = i;
  }
  return out;
}

std::vector<int64_t> HostTensor::toInts() const {
  std::vector<int64_t> v(numElements());
  for (size_t k = 0; k < v.size(); ++k) v[k] = intAt(k);
  return v;
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

} // namespace loom::onnx_import
