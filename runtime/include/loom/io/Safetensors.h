//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// mapping tensor names to {dtype, shape, data_offsets: [begin, end)}
// (offsets relative to the data that follows), then the data.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_IO_SAFETENSORS_H
#define LOOM_RUNTIME_IO_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::io {

struct TensorInfo {
  std::string dtype; // "F32", "BF16", "F16", "F64", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte range inside the data section
  int64_t numElements() const;
};

class SafetensorsReader {
public:
  /// Reads and checks the header: offsets inside the file, sizes matching
  /// shapes and dtypes, no overlapping ranges. Errors name the file.
  bool open(const std::string &path, std::string &err);
  const std::map<std::string, TensorInfo> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  /// The tensor's values as float32 (from F32, F64, F16 or BF16).
  bool readFloat(const std::string &name, std::vector<float> &out, std::string &err) const;
  /// The tensor's raw bytes.
  bool readBytes(const std::string &name, std::vector<char> &out, std::string &err) const;

private:
  std::string path_;
  uint64_t dataStart_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  std::string dtype; // "F32" or "BF16" or "I64"
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// Writes tensors (sorted by name, as the reference implementation does) and
/// string metadata atomically: a temp file in the same folder, then rename.
bool writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata, std::string &err);

size_t safetensorsDtypeSize(const std::string &dtype);

} // namespace loom::io

#endif
