//===- TokenData.cpp ------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "TokenData.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace loom::tools {

bool TokenFile::load(const std::string &path, std::string &err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = "cannot open token file '" + path + "'";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  size_t width = path.find(".u32") != std::string::npos ? 4 : 2;
  if (bytes.size() % width) {
    err = "token file '" + path + "' size is not a multiple of " + std::to_string(width);
    return false;
  }
  tokens.resize(bytes.size() / width);
  for (size_t k = 0; k < tokens.size(); ++k) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + k * width, width);
    tokens[k] = v;
  }
  return true;
}

bool makeBatch(const TokenFile &f, int64_t step, int64_t batch, int64_t seq,
               Batch &out, std::string &err, BatchRule rule) {
  int64_t len = int64_t(f.tokens.size());
  if (len < seq + 2) {
    err = "token file holds " + std::to_string(len) + " tokens, fewer than seq+2";
    return false;
  }
  out.inputs.resize(batch * seq);
  out.targets.resize(batch * seq);
  for (int64_t i = 0; i < batch; ++i) {
    int64_t stride = rule == BatchRule::Fixture ? 997 : seq;
    int64_t start = ((step * batch + i) * stride) % (len - seq - 1);
    for (int64_t t = 0; t < seq; ++t) {
      out.inputs[i * seq + t] = f.tokens[start + t];
      out.targets[i * seq + t] = f.tokens[start + t + 1];
    }
  }
  return true;
}

} // namespace loom::tools
