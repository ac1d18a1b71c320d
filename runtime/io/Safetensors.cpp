//===- Safetensors.cpp ----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/io/Safetensors.h"
#include "loom/io/Json.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace loom::io {

int64_t TensorInfo::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t safetensorsDtypeSize(const std::string &d) {
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

bool SafetensorsReader::open(const std::string &path, std::string &err) {
  path_ = path;
  tensors_.clear();
  metadata_.clear();
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    err = "cannot open '" + path + "'";
    return false;
  }
  uint64_t size = uint64_t(in.tellg());
  in.seekg(0);
  uint64_t headerLen = 0;
  if (size < 8 || !in.read(reinterpret_cast<char *>(&headerLen), 8) || headerLen > size - 8) {
    err = path + ": not a safetensors file (bad header length)";
    return false;
  }
  std::string header(headerLen, '\0');
  in.read(header.data(), std::streamsize(headerLen));
  json::Value root;
  std::string jerr;
  if (!json::parse(header, root, jerr) || !root.isObject()) {
    err = path + ": safetensors header is not valid JSON (" + jerr + ")";
    return false;
  }
  dataStart_ = 8 + headerLen;
  uint64_t dataSize = size - dataStart_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto &[name, v] : root.fields()) {
    if (name == "__metadata__") {
      for (const auto &[k, mv] : v.fields())
        if (mv.isString()) metadata_[k] = mv.str();
      continue;
    }
    const json::Value *dt = v.get("dtype"), *shape = v.get("shape"), *offs = v.get("data_offsets");
    if (!dt || !shape || !offs || !dt->isString() || !shape->isArray() || !offs->isArray() ||
        offs->items().size() != 2) {
      err = path + ": tensor '" + name + "' has a malformed header entry";
      return false;
    }
    TensorInfo t;
    t.dtype = dt->str();
    for (const auto &d : shape->items()) t.shape.push_back(d.integer());
    t.begin = uint64_t(offs->items()[0].integer());
    t.end = uint64_t(offs->items()[1].integer());
    size_t es = safetensorsDtypeSize(t.dtype);
    if (es == 0) {
      err = path + ": tensor '" + name + "' has unsupported dtype " + t.dtype;
      return false;
    }
    if (t.end < t.begin || t.end > dataSize ||
        t.end - t.begin != uint64_t(t.numElements()) * es) {
      err = path + ": tensor '" + name + "' byte range [" + std::to_string(t.begin) + ", " +
            std::to_string(t.end) + ") does not fit its shape or the file (truncated?)";
      return false;
    }
    ranges.emplace_back(t.begin, t.end);
    tensors_[name] = t;
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k)
    if (ranges[k].first < ranges[k - 1].second) {
      err = path + ": tensors overlap in the data section";
      return false;
    }
  return true;
}

bool SafetensorsReader::readBytes(const std::string &name, std::vector<char> &out,
                                  std::string &err) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    err = path_ + ": no tensor '" + name + "'";
    return false;
  }
  std::ifstream in(path_, std::ios::binary);
  out.resize(it->second.end - it->second.begin);
  in.seekg(std::streamoff(dataStart_ + it->second.begin));
  if (!in.read(out.data(), std::streamsize(out.size()))) {
    err = path_ + ": cannot read tensor '" + name + "'";
    return false;
  }
  return true;
}

static float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 31, mant = h & 1023, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalize
      exp = 113;
      while (!(mant & 1024)) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 1023) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool SafetensorsReader::readFloat(const std::string &name, std::vector<float> &out,
                                  std::string &err) const {
  std::vector<char> raw;
  if (!readBytes(name, raw, err))
    return false;
  const TensorInfo &t = tensors_.at(name);
  int64_t n = t.numElements();
  out.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    if (t.dtype == "F32") {
      std::memcpy(&out[k], raw.data() + 4 * k, 4);
    } else if (t.dtype == "F64") {
      double d;
      std::memcpy(&d, raw.data() + 8 * k, 8);
      out[k] = float(d);
    } else if (t.dtype == "BF16") {
      uint32_t bits = uint32_t(uint16_t(uint8_t(raw[2 * k]) | (uint8_t(raw[2 * k + 1]) << 8))) << 16;
      std::memcpy(&out[k], &bits, 4);
    } else if (t.dtype == "F16") {
      out[k] = halfToFloat(uint16_t(uint8_t(raw[2 * k]) | (uint8_t(raw[2 * k + 1]) << 8)));
    } else {
      err = path_ + ": tensor '" + name + "' is " + t.dtype + ", not floating point";
      return false;
    }
  }
  return true;
}

bool writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata, std::string &err) {
  std::vector<const NamedTensor *> sorted;
  for (const NamedTensor &t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const NamedTensor *a, const NamedTensor *b) { return a->name < b->name; });
  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value meta = json::Value::object();
    for (const auto &[k, v] : metadata) meta.set(k, v);
    header.set("__metadata__", meta);
  }
  uint64_t offset = 0;
  for (const NamedTensor *t : sorted) {
    json::Value e = json::Value::object(), shape = json::Value::array(), offs = json::Value::array();
    for (int64_t d : t->shape) shape.push(d);
    offs.push(offset);
    offs.push(offset + t->data.size());
    e.set("dtype", t->dtype);
    e.set("shape", shape);
    e.set("data_offsets", offs);
    header.set(t->name, e);
    offset += t->data.size();
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' '; // keep the data 8-byte aligned
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    uint64_t len = h.size();
    out.write(reinterpret_cast<const char *>(&len), 8);
    out.write(h.data(), std::streamsize(h.size()));
    for (const NamedTensor *t : sorted) out.write(t->data.data(), std::streamsize(t->data.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      err = "cannot write '" + path + "'";
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    err = "cannot rename into '" + path + "'";
    return false;
  }
  return true;
}

} // namespace loom::io
