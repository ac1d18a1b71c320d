//===- Checksum.h - FNV-1a 64 over byte ranges -------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Detects truncated or corrupted files (checkpoints); not cryptographic.
//===----------------------------------------------------------------------===//
#ifndef LOOM_IO_CHECKSUM_H
#define LOOM_IO_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace loom::io {

/// h = (h ^ byte) * 0x100000001b3, from 0xcbf29ce484222325.
inline uint64_t fnv1a64(const void *data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

} // namespace loom::io

#endif
