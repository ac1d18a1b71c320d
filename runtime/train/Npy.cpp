//===- Npy.cpp ------------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/Npy.h"
#include "loom/io/FileBytes.h"
#include "loom/runtime/AtomicFile.h"

#include <cstdio>
#include <cstring>

namespace loom::train {

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static size_t itemSize(const std::string &d) {
  if (d == "<f4" || d == "<i4" || d == "<u4") return 4;
  if (d == "<f8" || d == "<i8" || d == "<u8") return 8;
  if (d == "<u2" || d == "<i2") return 2;
  if (d == "|u1" || d == "|b1" || d == "|i1") return 1;
  return 0;
}

template <typename T> static T load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

static double elementAt(const NpyArray &a, int64_t k) {
  const char *p = a.data.data() + k * itemSize(a.dtype);
  const std::string &d = a.dtype;
  if (d == "<f4") return load<float>(p);
  if (d == "<f8") return load<double>(p);
  if (d == "<i4") return load<int32_t>(p);
  if (d == "<u4") return load<uint32_t>(p);
  if (d == "<i8") return double(load<int64_t>(p));
  if (d == "<u8") return double(load<uint64_t>(p));
  if (d == "<u2") return load<uint16_t>(p);
  if (d == "<i2") return load<int16_t>(p);
  return uint8_t(*p);
}

std::vector<double> NpyArray::asDoubles() const {
  std::vector<double> v(numElements());
  for (int64_t k = 0; k < numElements(); ++k) v[k] = elementAt(*this, k);
  return v;
}

std::vector<int64_t> NpyArray::asInts() const {
  std::vector<int64_t> v(numElements());
  for (int64_t k = 0; k < numElements(); ++k)
    v[k] = dtype == "<i8" ? load<int64_t>(data.data() + 8 * k) : int64_t(elementAt(*this, k));
  return v;
}

/// Value of `'key': value` in the header dict, as raw text.
static std::string headerField(const std::string &h, const std::string &key) {
  size_t at = h.find("'" + key + "'");
  if (at == std::string::npos) return "";
  at = h.find(':', at);
  if (at == std::string::npos) return "";
  size_t end = key == "shape" ? h.find(')', at) + 1 : h.find_first_of(",}", at);
  return h.substr(at + 1, end - at - 1);
}

bool readNpy(const std::string &path, NpyArray &out, std::string &err) {
  std::string bytes;
  if (!io::readFileBytes(path, bytes)) {
    err = "cannot open '" + path + "'";
    return false;
  }
  return parseNpy(bytes, path, out, err);
}

bool parseNpy(const std::string &f, const std::string &path, NpyArray &out, std::string &err) {
  if (f.size() < 10 || f.compare(0, 6, "\x93NUMPY") != 0) {
    err = path + ": not a .npy file";
    return false;
  }
  int major = uint8_t(f[6]);
  size_t headerLen = major == 1 ? load<uint16_t>(&f[8]) : load<uint32_t>(&f[8]);
  size_t start = major == 1 ? 10 : 12;
  if (start + headerLen > f.size()) {
    err = path + ": truncated .npy header";
    return false;
  }
  std::string h = f.substr(start, headerLen);
  std::string descr = headerField(h, "descr"), order = headerField(h, "fortran_order"),
              shape = headerField(h, "shape");
  size_t q1 = descr.find('\''), q2 = descr.rfind('\'');
  out.dtype = q1 == std::string::npos ? "" : descr.substr(q1 + 1, q2 - q1 - 1);
  if (itemSize(out.dtype) == 0) {
    err = path + ": unsupported .npy dtype '" + out.dtype + "'";
    return false;
  }
  if (order.find("True") != std::string::npos) {
    err = path + ": Fortran-order .npy files are not supported";
    return false;
  }
  out.shape.clear();
  for (size_t k = shape.find('(') + 1; k < shape.size();) {
    size_t e = shape.find_first_of(",)", k);
    std::string num = shape.substr(k, e - k);
    if (num.find_first_of("0123456789") != std::string::npos)
      out.shape.push_back(std::stoll(num));
    k = e + 1;
  }
  size_t bytes = size_t(out.numElements()) * itemSize(out.dtype);
  if (start + headerLen + bytes != f.size()) {
    err = path + ": data size does not match shape";
    return false;
  }
  out.data.assign(f.begin() + start + headerLen, f.end());
  return true;
}

bool writeNpy(const std::string &path, const NpyArray &a, std::string &err) {
  // NumPy's tuple spelling: "()", "(7,)", "(2, 3)".
  std::string shape = "(";
  for (size_t k = 0; k < a.shape.size(); ++k)
    shape += (k ? ", " : "") + std::to_string(a.shape[k]);
  shape += a.shape.size() == 1 ? ",)" : ")";
  std::string h = "{'descr': '" + a.dtype + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  uint16_t len = uint16_t(h.size());
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes.append(reinterpret_cast<const char *>(&len), 2);
  bytes += h;
  bytes.append(a.data.data(), a.data.size());
  return rt::writeAtomically(path, bytes, err);
}

} // namespace loom::train

namespace loom::train {

// A .npz is a zip archive of .npy members. numpy.savez stores them
// uncompressed (method 0), which is all we read; the local file headers
// carry the sizes, so the central directory is not needed.
bool readNpz(const std::string &path, std::map<std::string, NpyArray> &out, std::string &err) {
  std::string f;
  if (!io::readFileBytes(path, f)) {
    err = "cannot open '" + path + "'";
    return false;
  }
  size_t at = 0;
  while (at + 30 <= f.size() && load<uint32_t>(&f[at]) == 0x04034b50) {
    uint16_t flags = load<uint16_t>(&f[at + 6]), method = load<uint16_t>(&f[at + 8]);
    uint64_t size = load<uint32_t>(&f[at + 18]);
    uint16_t nameLen = load<uint16_t>(&f[at + 26]), extraLen = load<uint16_t>(&f[at + 28]);
    if (at + 30 + nameLen > f.size()) {
      err = path + ": truncated zip entry header";
      return false;
    }
    std::string name = f.substr(at + 30, nameLen);
    size_t extraAt = at + 30 + nameLen;
    // ZIP64: sizes of 0xffffffff live in extra field 0x0001.
    for (size_t e = extraAt; e + 4 <= extraAt + extraLen && e + 4 <= f.size();) {
      uint16_t id = load<uint16_t>(&f[e]), len = load<uint16_t>(&f[e + 2]);
      if (id == 1 && size == 0xffffffffu && e + 4 + 16 <= f.size())
        size = load<uint64_t>(&f[e + 4 + 8]);
      e += 4 + len;
    }
    if (method != 0 || (flags & 8)) {
      err = path + ": member '" + name + "' is compressed; save with numpy.savez, not savez_compressed";
      return false;
    }
    size_t data = extraAt + extraLen;
    if (data + size > f.size()) {
      err = path + ": member '" + name + "' runs past the end of the file";
      return false;
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    if (!parseNpy(f.substr(data, size), path + ":" + name, out[name], err))
      return false;
    at = data + size;
  }
  if (out.empty()) {
    err = path + ": not a .npz file (no zip entries)";
    return false;
  }
  return true;
}

} // namespace loom::train
