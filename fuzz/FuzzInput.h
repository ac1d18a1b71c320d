//===- FuzzInput.h - A fuzzer's bytes as a file -----------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// loom's readers take paths (they check sizes and ranges against the file,
// and the ONNX importer resolves external data next to it), so each fuzz
// input is written to a file of its own in a private temp folder first.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FUZZ_FUZZINPUT_H
#define LOOM_FUZZ_FUZZINPUT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace loom::fuzz {

/// A file holding `data`, in a folder made once per process (removed by
/// the caller's next input: the name is reused).
inline std::string writeInput(const uint8_t *data, size_t size, const char *name) {
  static std::string dir = [] {
    char tmpl[] = "/tmp/loom-fuzz-XXXXXX";
    const char *d = mkdtemp(tmpl);
    if (!d)
      std::abort();
    return std::string(d);
  }();
  std::string path = dir + "/" + name;
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size)
    std::abort();
  std::fclose(f);
  return path;
}

} // namespace loom::fuzz

#endif
