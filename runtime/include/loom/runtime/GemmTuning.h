//===- GemmTuning.h - cuBLASLt algorithm choices kept across runs -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// cuBLASLt's heuristic ranks several algorithms for a product; its first is
// not always the fastest (on an H200, the best of its first eight took
// 3.5% less time over Llama-3.2-1B's step, up to 16% on one shape:
// bench/gpu/h200-2026-11-28-b/call4). The CUDA backend times the
// candidates of each product once and keeps the winner's rank in this
// table, a text file, so every later run (and every executor of this
// process: simulated ranks, a recomputed clone) takes the same algorithm
// and so computes the same bits: a choice is made once per machine, GPU,
// cuBLASLt version and product, never again per run.
//
// The file: a header line, then "key<TAB>rank" lines. save() merges with
// what the file holds when it writes (another process may have added
// entries) and replaces it atomically (temp file, rename).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_GEMMTUNING_H
#define LOOM_RUNTIME_GEMMTUNING_H

#include <map>
#include <optional>
#include <string>

namespace loom::rt {

class GemmTuningTable {
public:
  /// Where the choices live: LOOM_GEMM_TUNING_FILE, else
  /// $XDG_CACHE_HOME/loom/gemm-tuning.tsv, else
  /// $HOME/.cache/loom/gemm-tuning.tsv. Empty when LOOM_GEMM_TUNING=0 (the
  /// heuristic's first algorithm for every product, nothing timed or kept)
  /// or when no location is known.
  static std::string defaultPath();

  /// Adds the entries of `path` (a missing file is an empty table). Lines
  /// that are not "key<TAB>rank" are skipped and counted (skipped()).
  /// False with `err` when the file exists but cannot be read.
  bool load(const std::string &path, std::string &err);
  /// Writes the table to `path`, merged with the entries the file holds
  /// now (this table's win), through a temp file renamed into place; makes
  /// the directory. False with `err` on failure (nothing partial is left).
  bool save(const std::string &path, std::string &err) const;

  std::optional<int> lookup(const std::string &key) const;
  void record(const std::string &key, int rank) { entries_[key] = rank; }
  size_t size() const { return entries_.size(); }
  int skipped() const { return skipped_; }

private:
  std::map<std::string, int> entries_;
  int skipped_ = 0;
};

} // namespace loom::rt

#endif
