//===- TokenData.cpp ------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/TokenData.h"
#include "loom/io/FileBytes.h"
#include "loom/train/Npy.h"

#include <cstring>

namespace loom::train {

/// A 1-D .npy of token ids: integer dtypes only. A float array is refused
/// rather than truncated (ids 3.7 or 1e9 are data errors, not tokens), as
/// are negative ids and ids past uint32.
static bool loadNpyTokens(const std::string &path, std::vector<int64_t> &tokens, std::string &err) {
  NpyArray a;
  if (!readNpy(path, a, err))
    return false;
  if (a.dtype.size() < 2 || (a.dtype[1] != 'i' && a.dtype[1] != 'u')) {
    err = path + ": token ids must have an integer dtype, not '" + a.dtype + "'";
    return false;
  }
  if (a.shape.size() != 1) {
    err = path + ": token ids must be a 1-D array, not " + std::to_string(a.shape.size()) + "-D";
    return false;
  }
  std::vector<int64_t> ids = a.asInts();
  tokens.resize(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] > int64_t(UINT32_MAX)) {
      err = path + ": token id " + std::to_string(ids[k]) + " at position " + std::to_string(k) +
            " is out of range";
      return false;
    }
    tokens[k] = ids[k];
  }
  return true;
}

bool TokenFile::load(const std::string &path, std::string &err) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0)
    return loadNpyTokens(path, tokens, err);
  std::string bytes;
  if (!io::readFileBytes(path, bytes)) {
    err = "cannot open token file '" + path + "'";
    return false;
  }
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

} // namespace loom::train
