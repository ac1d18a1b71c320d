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
  /// Parses argv[first..]; returns false after printing an error or help.
  bool parse(int argc, char **argv, int first);
  bool wantsHelp() const { return help; }
  bool has(const std::string &name) const;
  std::string get(const std::string &name) const;
  int64_t getInt(const std::string &name) const;
  double getDouble(const std::string &name) const;
  const std::vector<std::string> &positional() const { return positionals; }
  void printHelp() const;

private:
  struct Flag { std::string help, value; bool isSwitch = false, set = false; };
  std::string command, usage;
  std::map<std::string, Flag> flags;
  std::vector<std::string> order, positionals;
  bool help = false;
};

/// Prints "loom <command>: error: <msg>" and returns 1.
int fail(const std::string &command, const std::string &msg);

} // namespace loom::tools

#endif
