//===- WeightFiles.h - Parameters to and from HF-named safetensors -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Hugging Face checkpoints name weights "model.layers.0.mlp.up_proj.weight"
// and store linear weights as [out, in]. An exported model may know the
// same parameter under a wrapper prefix ("m.model.layers...") and store it
// transposed (a folded W^T initializer). Matching is by name suffix at a
// dot boundary; transposes follow #loom.param.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_WEIGHTFILES_H
#define LOOM_TRAIN_WEIGHTFILES_H

#include "loom/train/TrainProgram.h"

#include <map>
#include <string>
#include <vector>

namespace loom::train {

/// The file's tensor name that `param` refers to: equal, or a suffix of it
/// that starts after a '.', the longest such; "" if none.
std::string matchWeightName(const std::string &param, const std::vector<std::string> &names);

/// Loads every parameter from an HF-named safetensors file (or the shards
/// of an HF `*.safetensors.index.json`), transposing
/// where the model stores the transpose. Errors (one line, naming the file
/// and the tensor): a parameter with no weight, a shape that does not fit,
/// a weight that matches no parameter (unless it is a byte-identical alias
/// of a matched one, as tied embeddings are saved). `hfNames` receives the
/// file name used for each parameter and `aliases` the tied extra names.
bool loadInitWeights(const std::string &path, std::vector<ParamSlot> &params,
                     std::vector<std::string> &hfNames,
                     std::map<std::string, std::string> &aliases, std::string &err);

/// Writes parameters in HF layout under `hfNames` (and the tied aliases):
/// one file, or, past `maxShardBytes` (HF's default max_shard_size, 5 GB),
/// HF's shards `<stem>-0000k-of-0000n.safetensors` and `<path>.index.json`.
bool exportWeights(const std::string &path, const std::vector<ParamSlot> &params,
                   const std::vector<std::string> &hfNames,
                   const std::map<std::string, std::string> &aliases, std::string &err,
                   uint64_t maxShardBytes = 5000000000ull);

/// [rows, cols] -> [cols, rows].
std::vector<float> transpose2d(const std::vector<float> &x, int64_t rows, int64_t cols);

/// The HF name of a parameter when no weight file says: the model's name
/// with a wrapper prefix ("m.") removed when the rest looks like HF.
std::string defaultHfName(const std::string &param);

} // namespace loom::train

#endif
