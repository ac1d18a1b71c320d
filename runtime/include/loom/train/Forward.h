//===- Forward.h - One forward pass of a compiled model (loom eval) -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The run side of `loom eval`: a forward program (token ids in, logits
// out) run once on a backend, its mean next-token loss, and its logits
// compared with reference logits saved by PyTorch.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_FORWARD_H
#define LOOM_TRAIN_FORWARD_H

#include "loom/runtime/Program.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::train {

struct ForwardResult {
  std::vector<float> logits;
  std::vector<int64_t> shape; // [B, T, V]
  double setupSeconds = 0;    // creating the executor
  double runSeconds = 0;      // inputs in, the run, logits out
};

/// The token ids of one forward pass: an integer .npy [B, T] at
/// `tokensPath` (setting batch and seq), or else batch `step` of the token
/// file at `dataPath` (the fixtures' rule; batch and seq given), with its
/// next-token targets. False with `err`.
bool readEvalTokens(const std::string &tokensPath, const std::string &dataPath, int64_t step,
                    int64_t &batch, int64_t &seq, std::vector<int64_t> &ids,
                    std::vector<int64_t> &targets, std::string &err);

/// Checks that `program` takes ids.size() int64 token ids and returns f32
/// logits [B, T, V], then runs it once on `backend`; false with `err`.
bool runForward(const std::shared_ptr<rt::Program> &program, const std::vector<int64_t> &ids,
                const std::string &backend, int threads, ForwardResult &out, std::string &err);

/// Mean over rows of logsumexp(row) - row[target], in double.
double meanCrossEntropy(const std::vector<float> &logits, const std::vector<int64_t> &targets,
                        int64_t vocab);

/// The logits as a float32 .npy [B, T, V] at `path`; false with `err`.
bool writeLogits(const ForwardResult &r, const std::string &path, std::string &err);

struct LogitsError {
  double maxRel = 0; // max |diff| / max |ref|
  double l2Rel = 0;  // ||diff|| / ||ref||
  bool finite = true;
};

/// Compares `r` with the reference logits in the .npy at `refPath` (same
/// shape); false with `err` when it cannot be read or has another shape.
bool compareLogits(const ForwardResult &r, const std::string &refPath, LogitsError &out,
                   std::string &err);

} // namespace loom::train

#endif
