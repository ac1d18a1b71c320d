//===- TensorData.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/TensorData.h"
#include "frontends/onnx/ShapeRules.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace loom::onnx_import {

size_t elemSize(int32_t t) {
  switch (t) {
  case 1: case 6: case 12: return 4;
  case 7: case 11: case 13: return 8;
  case 2: case 3: case 9: return 1;
  case 4: case 5: case 10: case 16: return 2;
  default: return 0;
  }
}

bool tensorShape(const onnx::TensorProto &t, std::vector<int64_t> &shape,
                 std::string &err) {
  shape.assign(t.dims().begin(), t.dims().end());
  int64_t n;
  if (!checkedNumElements(shape, n)) {
    err = "tensor '" + t.name() + "' has dims " + shapeToString(shape) +
          " that are negative or overflow";
    return false;
  }
  return true;
}

namespace {

bool readExternal(const onnx::TensorProto &t, const std::string &modelDir,
                  uint64_t expected, std::vector<char> &bytes, std::string &err) {
  std::string location;
  uint64_t offset = 0, length = expected;
  bool hasLength = false;
  // Offsets and lengths are decimal strings; anything else (signs, spaces,
  // trailing text, overflow) is an error rather than an exception.
  auto parseNumber = [&](const std::string &key, const std::string &text,
                         uint64_t &out) {
    errno = 0;
    char *end = nullptr;
    unsigned long long v = text.empty() || !std::isdigit(uint8_t(text[0]))
                               ? 0 : std::strtoull(text.c_str(), &end, 10);
    if (!end || *end || errno == ERANGE) {
      err = "tensor '" + t.name() + "': external data " + key + " '" + text +
            "' is not a number";
      return false;
    }
    out = v;
    return true;
  };
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") {
      if (!parseNumber("offset", kv.value(), offset)) return false;
    } else if (kv.key() == "length") {
      if (!parseNumber("length", kv.value(), length)) return false;
      hasLength = true;
    }
  }
  if (location.empty()) {
    err = "tensor '" + t.name() + "' has external data without a location";
    return false;
  }
  fs::path rel(location);
  // The location is relative to the model's folder and may not leave it:
  // a model file must not make loom read arbitrary files.
  fs::path norm = rel.lexically_normal();
  if (rel.is_absolute() || norm.empty() || *norm.begin() == "..") {
    err = "tensor '" + t.name() + "': external data location '" + location +
          "' escapes the model's folder";
    return false;
  }
  fs::path file = fs::path(modelDir) / norm;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    err = "tensor '" + t.name() + "': external data file '" + file.string() +
          "' not found";
    return false;
  }
  // The same rule for the file a symbolic link names (CVE-2024-27318, which
  // the ONNX checker refuses since 1.16): every link on the way is followed
  // and the real path must still lie inside the model's real folder.
  fs::path realDir = fs::canonical(fs::path(modelDir).empty() ? fs::path(".") : fs::path(modelDir), ec);
  fs::path realFile = ec ? fs::path() : fs::canonical(file, ec);
  if (ec) {
    err = "tensor '" + t.name() + "': cannot resolve external data file '" + file.string() +
          "': " + ec.message();
    return false;
  }
  fs::path inside = realFile.lexically_relative(realDir);
  if (inside.empty() || *inside.begin() == "..") {
    err = "tensor '" + t.name() + "': external data file '" + file.string() +
          "' is a link to '" + realFile.string() + "', outside the model's folder";
    return false;
  }
  uint64_t size = fs::file_size(file, ec);
  if (hasLength && length != expected) {
    err = "tensor '" + t.name() + "': external data length " +
          std::to_string(length) + " does not match its shape (" +
          std::to_string(expected) + " bytes)";
    return false;
  }
  if (offset > size || length > size - offset) {
    err = "tensor '" + t.name() + "': external data range [" +
          std::to_string(offset) + ", " + std::to_string(offset + length) +
          ") is past the end of '" + file.string() + "' (" +
          std::to_string(size) + " bytes)";
    return false;
  }
  std::ifstream in(file, std::ios::binary);
  bytes.resize(length);
  in.seekg(std::streamoff(offset));
  if (!in.read(bytes.data(), std::streamsize(length))) {
    err = "tensor '" + t.name() + "': cannot read '" + file.string() + "'";
    return false;
  }
  return true;
}

template <typename T, typename Field>
void copyField(const Field &field, std::vector<char> &bytes) {
  bytes.resize(field.size() * sizeof(T));
  for (int k = 0; k < field.size(); ++k) {
    T v = T(field.Get(k));
    std::memcpy(bytes.data() + k * sizeof(T), &v, sizeof(T));
  }
}

} // namespace

bool tensorBytes(const onnx::TensorProto &t, const std::string &modelDir,
                 std::vector<char> &bytes, std::string &err) {
  std::vector<int64_t> shape;
  if (!tensorShape(t, shape, err))
    return false;
  size_t es = elemSize(t.data_type());
  if (es == 0) {
    err = "tensor '" + t.name() + "' has unsupported element type " +
          elemTypeName(t.data_type());
    return false;
  }
  int64_t n;
  checkedNumElements(shape, n);
  if (n > int64_t(uint64_t(1) << 40) / int64_t(es)) {
    err = "tensor '" + t.name() + "' is too large (" + std::to_string(n) +
          " elements)";
    return false;
  }
  uint64_t expected = uint64_t(n) * es;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!readExternal(t, modelDir, expected, bytes, err))
      return false;
  } else if (t.has_raw_data()) {
    bytes.assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    switch (t.data_type()) {
    case 1: copyField<float>(t.float_data(), bytes); break;
    case 11: copyField<double>(t.double_data(), bytes); break;
    case 7: copyField<int64_t>(t.int64_data(), bytes); break;
    case 13: copyField<uint64_t>(t.uint64_data(), bytes); break;
    case 6: copyField<int32_t>(t.int32_data(), bytes); break;
    case 12: copyField<uint32_t>(t.uint64_data(), bytes); break;
    case 2: case 9: copyField<uint8_t>(t.int32_data(), bytes); break;
    case 3: copyField<int8_t>(t.int32_data(), bytes); break;
    case 4: case 10: case 16: copyField<uint16_t>(t.int32_data(), bytes); break;
    case 5: copyField<int16_t>(t.int32_data(), bytes); break;
    default: break;
    }
  }
  if (bytes.size() != expected) {
    err = "tensor '" + t.name() + "' holds " + std::to_string(bytes.size()) +
          " bytes but its shape " + shapeToString(shape) + " needs " +
          std::to_string(expected);
    return false;
  }
  return true;
}

namespace {
double bf16ToDouble(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
double halfToDouble(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double v = exp == 0 ? std::ldexp(mant, -24)
             : exp == 31 ? (mant ? NAN : INFINITY)
                         : std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}
} // namespace

bool tensorFromProto(const onnx::TensorProto &t, const std::string &modelDir,
                     HostTensor &out, std::string &err) {
  std::vector<char> bytes;
  if (!tensorBytes(t, modelDir, bytes, err))
    return false;
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  out = HostTensor::zeros(ElemType(t.data_type()), shape);
  int64_t n = out.numElements();
  const char *p = bytes.data();
  for (int64_t k = 0; k < n; ++k) {
    switch (t.data_type()) {
    case 1: { float v; std::memcpy(&v, p + 4 * k, 4); out.f[k] = v; break; }
    case 11: { double v; std::memcpy(&v, p + 8 * k, 8); out.f[k] = v; break; }
    case 16: { uint16_t v; std::memcpy(&v, p + 2 * k, 2); out.f[k] = bf16ToDouble(v); break; }
    case 10: { uint16_t v; std::memcpy(&v, p + 2 * k, 2); out.f[k] = halfToDouble(v); break; }
    case 7: case 13: { int64_t v; std::memcpy(&v, p + 8 * k, 8); out.i[k] = v; break; }
    case 6: { int32_t v; std::memcpy(&v, p + 4 * k, 4); out.i[k] = v; break; }
    case 12: { uint32_t v; std::memcpy(&v, p + 4 * k, 4); out.i[k] = v; break; }
    case 2: case 9: out.i[k] = uint8_t(p[k]); break;
    case 3: out.i[k] = int8_t(p[k]); break;
    case 4: { uint16_t v; std::memcpy(&v, p + 2 * k, 2); out.i[k] = v; break; }
    case 5: { int16_t v; std::memcpy(&v, p + 2 * k, 2); out.i[k] = v; break; }
    default: err = "unsupported element type"; return false;
    }
  }
  return true;
}

} // namespace loom::onnx_import
