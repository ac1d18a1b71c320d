//===- TokenData.h - Token files and the batching rule ----------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A token file is a flat little-endian array of uint16 or uint32 ids.
// Batch `step` holds B windows of T+1 tokens; window i starts at
// ((step * B + i) * stride) mod (len - T - 1); inputs are the first T
// tokens, targets the last T. The stride is T for the sequential rule
// (consecutive windows, wrapping around: every token is seen once per
// epoch, up to the wrap) and 997 for the fixtures' rule
// (shared/fixtures/reference.json), which lets runs compare with PyTorch.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_TOKENDATA_H
#define LOOM_TRAIN_TOKENDATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::train {

struct TokenFile {
  std::vector<int64_t> tokens;
  /// Reads `path`; width 2 or 4 bytes per token (".u32.bin" means 4).
  bool load(const std::string &path, std::string &err);
};

struct Batch {
  std::vector<int64_t> inputs;  // [B, T]
  std::vector<int64_t> targets; // [B, T]
};

enum class BatchRule { Fixture, Sequential };

/// Batch `step` by the rule above; false when the file is too short.
bool makeBatch(const TokenFile &f, int64_t step, int64_t batch, int64_t seq,
               Batch &out, std::string &err, BatchRule rule = BatchRule::Fixture);

} // namespace loom::train

#endif
