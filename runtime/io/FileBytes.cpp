//===- FileBytes.cpp ------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//

#include "loom/io/FileBytes.h"

#include <fstream>
#include <sstream>

namespace loom::io {

bool readFileBytes(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

} // namespace loom::io
