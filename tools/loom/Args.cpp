//===- Args.cpp -----------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "Args.h"

#include <cstdio>
#include <cstdlib>

namespace loom::tools {

int fail(const std::string &command, const std::string &msg) {
  std::fprintf(stderr, "loom %s: error: %s\n", command.c_str(), msg.c_str());
  return 1;
}

void Args::flag(const std::string &name, const std::string &helpText, bool isSwitch,
                const std::string &fallback) {
  flags[name] = Flag{helpText, fallback, isSwitch, false};
  order.push_back(name);
}

bool Args::parse(int argc, char **argv, int first) {
  for (int k = first; k < argc; ++k) {
    std::string a = argv[k];
    if (a == "--help" || a == "-h") {
      help = true;
      printHelp();
      return false;
    }
    if (a.rfind("--", 0) != 0 && a != "-o") {
      positionals.push_back(a);
      continue;
    }
    std::string name = a == "-o" ? "o" : a.substr(2), value;
    bool inlineValue = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inlineValue = true;
    }
    auto it = flags.find(name);
    if (it == flags.end()) {
      fail(command, "unknown option '" + a + "' (see loom " + command + " --help)");
      return false;
    }
    if (it->second.isSwitch) {
      it->second.value = "1";
    } else if (!inlineValue) {
      if (k + 1 >= argc) {
        fail(command, "option '" + a + "' needs a value");
        return false;
      }
      value = argv[++k];
    }
    if (!it->second.isSwitch)
      it->second.value = value;
    it->second.set = true;
  }
  return true;
}

bool Args::has(const std::string &name) const {
  auto it = flags.find(name);
  return it != flags.end() && (it->second.set || !it->second.value.empty());
}

std::string Args::get(const std::string &name) const {
  auto it = flags.find(name);
  return it == flags.end() ? "" : it->second.value;
}

int64_t Args::getInt(const std::string &name) const {
  std::string v = get(name);
  return v.empty() ? 0 : std::strtoll(v.c_str(), nullptr, 10);
}

double Args::getDouble(const std::string &name) const {
  std::string v = get(name);
  return v.empty() ? 0.0 : std::strtod(v.c_str(), nullptr);
}

void Args::printHelp() const {
  std::printf("USAGE: loom %s %s\n\nOPTIONS:\n", command.c_str(), usage.c_str());
  for (const std::string &name : order) {
    const Flag &f = flags.at(name);
    std::string left = (name == "o" ? "-o" : "--" + name) + (f.isSwitch ? "" : " VALUE");
    std::printf("  %-26s %s\n", left.c_str(), f.help.c_str());
  }
}

} // namespace loom::tools
