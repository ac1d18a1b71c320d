//===- FuzzArtifact.cpp - The program-file loader under libFuzzer ---------===//
//
// Part of loom, under the Apache License v2.0.
//
// Any bytes: readArtifact must refuse what is not a whole, checksummed,
// valid program with an error, and a program it accepts must pass
// validate() (what every executor relies on before running it).
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "loom/runtime/Artifact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = loom::fuzz::writeInput(data, size, "input.loomprog");
  loom::rt::Program p;
  std::string err;
  if (readArtifact(path, p, err) && !p.validate().empty())
    __builtin_trap(); // the loader let an invalid program through
  return 0;
}
