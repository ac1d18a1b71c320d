//===- FuzzSafetensors.cpp - The safetensors reader under libFuzzer -------===//
//
// Part of loom, under the Apache License v2.0.
//
// Any bytes: open() must accept them or fail with an error (no crash, no
// read outside the file, no unbounded allocation); every tensor it accepts
// must read back within its declared size.
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "loom/io/Safetensors.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = loom::fuzz::writeInput(data, size, "input.safetensors");
  loom::io::SafetensorsReader r;
  std::string err;
  if (!r.open(path, err))
    return 0;
  for (const auto &[name, info] : r.tensors()) {
    std::vector<char> bytes;
    std::vector<float> values;
    (void)r.readBytes(name, bytes, err);
    (void)r.readFloat(name, values, err);
  }
  return 0;
}
