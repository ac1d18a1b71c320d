//===- Args.h - Small command-line parser for the loom driver ---*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Each subcommand declares its flags; unknown flags and missing values are
// one-line errors, and --help prints the declared flags.
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_ARGS_H
#define LOOM_TOOLS_ARGS_H

#include <map>
#include <string>
#include <vector>

namespace loom::tools {

class Args {
public:
  Args(std::string command, std::string usage) : command(std::move(command)), usage(std::move(usage)) {}
  /// Declares `--name VALUE` (or a boolean switch when isSwitch).
  void flag(const std::string &name, const std::string &help, bool isSwitch = false,
            const std::string &fallback = "");
  /// Parses argv[first..] over the values of `--config FILE` (ConfigFile.h);
  /// returns false after printing an error, the help, or (--print-config)
  /// the merged configuration as TOML.
  bool parse(int argc, char **argv, int first);
  /// True when parse() stopped because it printed what was asked (help or
  /// the configuration): the command then exits 0.
  bool wantsHelp() const { return help; }
  bool has(const std::string &name) const;
  std::string get(const std::string &name) const;
  int64_t getInt(const std::string &name) const;
  double getDouble(const std::string &name) const;
  const std::vector<std::string> &positional() const { return positionals; }
  void printHelp() const;
  /// A value the command took out of argv itself (verify's `--plans A B`),
  /// ranked as the command line: over --config. Before parse().
  void fromCommandLine(const std::string &name, const std::string &value) {
    taken.emplace_back(name, value);
  }
  /// The merged configuration as a TOML file that --config reads back.
  void printConfig() const;

private:
  bool applyConfig(const std::string &path);
  struct Flag { std::string help, value; bool isSwitch = false, set = false; };
  std::string command, usage;
  std::map<std::string, Flag> flags;
  std::vector<std::string> order, positionals;
  std::vector<std::pair<std::string, std::string>> taken;
  std::string configModel; // `model` from --config, used when no positional is given
  bool help = false;
};

/// Prints "loom <command>: error: <msg>" and returns 1.
int fail(const std::string &command, const std::string &msg);

} // namespace loom::tools

#endif
