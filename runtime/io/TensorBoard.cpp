//===- TensorBoard.cpp - Scalars in TensorBoard's event-file format -------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/TensorBoard.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace loom::rt {

namespace {

struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
  }
};

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// Protobuf wire format, the pieces an Event needs: a key is
// (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32.
void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(uint8_t(v)));
}
template <typename T> void fixed(std::string &out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T)); // x86-64 and aarch64 are little-endian, as the format
  out.append(b, sizeof(T));
}
void bytesField(std::string &out, int field, const std::string &v) {
  varint(out, uint64_t(field) << 3 | 2);
  varint(out, v.size());
  out += v;
}

/// Event { double wall_time = 1; int64 step = 2; oneof { string
/// file_version = 3; Summary summary = 5; } }
std::string event(int64_t step, const std::string *fileVersion, const std::string *summary) {
  std::string e;
  double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  varint(e, 1 << 3 | 1);
  fixed(e, wall);
  varint(e, 2 << 3 | 0);
  varint(e, uint64_t(step));
  if (fileVersion)
    bytesField(e, 3, *fileVersion);
  if (summary)
    bytesField(e, 5, *summary);
  return e;
}

} // namespace

uint32_t crc32c(const void *data, size_t n) {
  static const Crc32cTable table;
  const uint8_t *p = static_cast<const uint8_t *>(data);
  uint32_t c = ~0u;
  for (size_t i = 0; i < n; ++i) c = table.t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_)
    std::fclose(file_);
}

bool TensorBoardWriter::open(const std::string &dir, std::string &err) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    err = "cannot create TensorBoard folder '" + dir + "': " + ec.message();
    return false;
  }
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  long long secs = (long long)std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(secs) + "." +
                                         host + "." + std::to_string(getpid()) + ".loom"))
              .string();
  if (!(file_ = std::fopen(path_.c_str(), "wb"))) {
    err = "cannot create TensorBoard event file '" + path_ + "': " + std::strerror(errno);
    return false;
  }
  const std::string version = "brain.Event:2";
  return writeRecord(event(0, &version, nullptr), err);
}

bool TensorBoardWriter::scalars(int64_t step,
                                const std::vector<std::pair<std::string, float>> &values,
                                std::string &err) {
  // Summary { repeated Value value = 1; }, Value { string tag = 1; float
  // simple_value = 2; }
  std::string summary;
  for (const auto &[tag, v] : values) {
    std::string value;
    bytesField(value, 1, tag);
    varint(value, 2 << 3 | 5);
    fixed(value, v);
    bytesField(summary, 1, value);
  }
  return writeRecord(event(step, nullptr, &summary), err);
}

bool TensorBoardWriter::writeRecord(const std::string &data, std::string &err) {
  if (!file_) {
    err = "TensorBoard event file is not open";
    return false;
  }
  std::string rec;
  uint64_t len = data.size();
  fixed(rec, len);
  fixed(rec, masked(crc32c(rec.data(), 8)));
  rec += data;
  fixed(rec, masked(crc32c(data.data(), data.size())));
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size() || std::fflush(file_) != 0) {
    err = "cannot write TensorBoard event file '" + path_ + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

} // namespace loom::rt
