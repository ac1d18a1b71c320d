//===- Args.cpp -----------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "ConfigFile.h"

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

bool Args::applyConfig(const std::string &path) {
  std::vector<ConfigEntry> entries;
  std::string err;
  if (!readConfigFile(path, command, entries, err)) {
    fail(command, err);
    return false;
  }
  for (const ConfigEntry &e : entries) {
    std::string at = path + ":" + std::to_string(e.line) + ": ";
    if (e.key == "model") {
      if (e.kind != ConfigEntry::Text) {
        fail(command, at + "'model' must be a path");
        return false;
      }
      configModel = e.text;
      continue;
    }
    auto it = flags.find(e.key);
    if (it == flags.end() || e.key == "config" || e.key == "print-config") {
      fail(command, at + "unknown option '" + e.key + "' for loom " + command + " (see loom " +
                        command + " --help)");
      return false;
    }
    Flag &f = it->second;
    if (f.isSwitch != (e.kind == ConfigEntry::Bool)) {
      fail(command, at + "'" + e.key + "' takes " + (f.isSwitch ? "true or false" : "a value"));
      return false;
    }
    if (e.kind == ConfigEntry::Bool) {
      f.value = e.flag ? "1" : "";
      f.set = e.flag;
    } else {
      std::string v = e.text;
      if (e.kind == ConfigEntry::List) { // lists travel as one line per item
        v.clear();
        for (size_t i = 0; i < e.list.size(); ++i) v += (i ? "\n" : "") + e.list[i];
      }
      f.value = v;
      f.set = true;
    }
  }
  return true;
}

bool Args::parse(int argc, char **argv, int first) {
  flag("config", "read options from this TOML file (the command line overrides it)");
  flag("print-config", "print the merged configuration as TOML and exit", true);
  // The file first, so that every flag on the command line overrides it.
  for (int k = first; k < argc; ++k) {
    std::string a = argv[k];
    std::string path = a.rfind("--config=", 0) == 0 ? a.substr(9)
                       : a == "--config" && k + 1 < argc ? argv[k + 1]
                                                         : "";
    if (!path.empty() && !applyConfig(path))
      return false;
  }
  for (const auto &[name, value] : taken) {
    Flag &f = flags.at(name);
    f.value = value;
    f.set = true;
  }
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
  if (positionals.empty() && !configModel.empty())
    positionals.push_back(configModel);
  if (has("print-config")) {
    printConfig();
    help = true; // done: the command exits 0
    return false;
  }
  return true;
}

void Args::printConfig() const {
  std::printf("# loom %s: the command line over --config over the defaults\n", command.c_str());
  if (!positionals.empty())
    std::printf("model = %s\n", tomlValue(positionals[0]).c_str());
  for (const std::string &name : order) {
    const Flag &f = flags.at(name);
    if (name == "config" || name == "print-config" || name == "o")
      continue;
    if (f.isSwitch) {
      std::printf("%s = %s\n", name.c_str(), f.set ? "true" : "false");
      continue;
    }
    if (f.value.empty())
      continue;
    if (f.value.find('\n') == std::string::npos) {
      std::printf("%s = %s\n", name.c_str(), tomlValue(f.value).c_str());
      continue;
    }
    std::string list;
    size_t from = 0;
    while (from <= f.value.size()) {
      size_t nl = f.value.find('\n', from);
      std::string item = f.value.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
      list += (list.empty() ? "\"" : ", \"") + item + "\""; // plans and names: strings
      if (nl == std::string::npos)
        break;
      from = nl + 1;
    }
    std::printf("%s = [%s]\n", name.c_str(), list.c_str());
  }
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
