//===- GemmTuning.cpp - cuBLASLt algorithm choices kept across runs -------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/GemmTuning.h"

#include "lib/Diagnostics.h"
#include "loom/runtime/AtomicFile.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace loom::rt {

namespace {
constexpr const char *kHeader = "# loom gemm tuning v1: key<TAB>rank in cuBLASLt's heuristic list";

/// "key<TAB>rank" with a non-negative rank, else nothing.
bool parseLine(const std::string &line, std::string &key, int &rank) {
  size_t tab = line.rfind('\t');
  if (tab == std::string::npos || tab == 0 || tab + 1 >= line.size())
    return false;
  char *end = nullptr;
  errno = 0;
  long r = std::strtol(line.c_str() + tab + 1, &end, 10);
  if (errno || *end != '\0' || r < 0 || r > 1024)
    return false;
  key = line.substr(0, tab);
  rank = int(r);
  return true;
}
} // namespace

std::string GemmTuningTable::defaultPath() {
  const char *off = std::getenv("LOOM_GEMM_TUNING");
  if (off && std::strcmp(off, "0") == 0)
    return "";
  if (const char *f = std::getenv("LOOM_GEMM_TUNING_FILE"); f && *f)
    return f;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/loom/gemm-tuning.tsv";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/loom/gemm-tuning.tsv";
  return "";
}

bool GemmTuningTable::load(const std::string &path, std::string &err) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return true;
  std::ifstream in(path);
  if (!in) {
    err = cat("cannot read the GEMM tuning file ", path, ": ", std::strerror(errno));
    return false;
  }
  std::string line, key;
  int rank;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    if (parseLine(line, key, rank))
      entries_[key] = rank;
    else
      ++skipped_;
  }
  return true;
}

bool GemmTuningTable::save(const std::string &path, std::string &err) const {
  GemmTuningTable merged;
  std::string ignored;
  merged.load(path, ignored); // what another process added since; unreadable: rewritten
  for (const auto &[k, r] : entries_) merged.entries_[k] = r;
  std::string text = cat(kHeader, "\n");
  for (const auto &[k, r] : merged.entries_) text += cat(k, "\t", r, "\n");
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path())
    std::filesystem::create_directories(p.parent_path(), ec);
  if (!writeAtomically(path, text, err)) {
    err = cat("cannot write the GEMM tuning file ", path, ": ", err);
    return false;
  }
  return true;
}

std::optional<int> GemmTuningTable::lookup(const std::string &key) const {
  auto it = entries_.find(key);
  if (it == entries_.end())
    return std::nullopt;
  return it->second;
}

} // namespace loom::rt
