//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Version 1/2 .npy files, little-endian, C order: what the fixtures and
// users exchange logits and tokens in.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_NPY_H
#define LOOM_TRAIN_NPY_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::train {

struct NpyArray {
  std::string dtype; // NumPy descr: "<f4", "<i8", "<i4", "<u2", "<f8"
  std::vector<int64_t> shape;
  std::vector<char> data;
  int64_t numElements() const;
  /// Elements as double / int64, converting from the stored dtype.
  std::vector<double> asDoubles() const;
  std::vector<int64_t> asInts() const;
};

bool readNpy(const std::string &path, NpyArray &out, std::string &err);
/// Parses .npy bytes; `path` names them in errors.
bool parseNpy(const std::string &bytes, const std::string &path, NpyArray &out, std::string &err);
/// Every member of an uncompressed .npz (numpy.savez), by name without ".npy".
bool readNpz(const std::string &path, std::map<std::string, NpyArray> &out, std::string &err);
/// Writes atomically (temp file, then rename).
bool writeNpy(const std::string &path, const NpyArray &a, std::string &err);

} // namespace loom::train

#endif
