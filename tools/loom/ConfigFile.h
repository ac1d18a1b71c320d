//===- ConfigFile.h - Options from a TOML job file --------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// `loom train|verify|plan|... --config job.toml`: every option of a command
// can live in a TOML file, under its flag name (`batch = 8`, `plan =
// "dp_shard=4"`, `precision = "bf16"`, switches as booleans, `plans =
// ["1", "dp_shard=2"]` for verify), plus `model` for the positional model
// path. Keys at the top level apply to every command, keys in a table
// named after the command (`[train]`, `[verify]`) to that one only and
// override the top level; other commands' tables are ignored. The command
// line overrides the file.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_CONFIGFILE_H
#define LOOM_TOOLS_CONFIGFILE_H

#include <string>
#include <vector>

namespace loom::tools {

struct ConfigEntry {
  std::string key;
  enum Kind { Text, Bool, List } kind = Text;
  std::string text;              // Text: the value as the command line would give it
  bool flag = false;             // Bool
  std::vector<std::string> list; // List (strings or numbers as text)
  int line = 0;                  // where it was set, for errors
};

/// Reads the entries of `path` that apply to `command`, in file order (top
/// level first, then the command's table). False with a one-line `err`
/// naming the file and line on a syntax error or an unsupported value.
bool readConfigFile(const std::string &path, const std::string &command,
                    std::vector<ConfigEntry> &out, std::string &err);

/// `value` as a TOML value: numbers and booleans bare, the rest quoted.
std::string tomlValue(const std::string &value);

} // namespace loom::tools

#endif
