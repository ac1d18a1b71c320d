//===- ConfigFile.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ConfigFile.h"

// toml++ (Debian's libtomlplusplus-dev), header-only and without
// exceptions: parse errors come back as values.
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include <cstdio>
#include <cstdlib>
#include <regex>

namespace loom::tools {

namespace {

/// The shortest text that reads back as the same double (0.0003, not
/// 0.00029999999999999997), always with a point or an exponent so that
/// TOML reads a float back.
std::string shortestDouble(double v) {
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

std::string numberText(const toml::node &n) {
  char buf[64];
  if (auto i = n.value_exact<int64_t>()) {
    std::snprintf(buf, sizeof buf, "%lld", (long long)*i);
    return buf;
  }
  return shortestDouble(*n.value_exact<double>());
}

/// One key's value, or a one-line error.
bool entryOf(const std::string &path, const std::string &key, const toml::node &n, ConfigEntry &e,
             std::string &err) {
  e.key = key;
  e.line = int(n.source().begin.line);
  auto where = [&] { return path + ":" + std::to_string(e.line) + ": '" + key + "'"; };
  if (n.is_string()) {
    e.text = *n.value_exact<std::string>();
  } else if (n.is_integer() || n.is_floating_point()) {
    e.text = numberText(n);
  } else if (n.is_boolean()) {
    e.kind = ConfigEntry::Bool;
    e.flag = *n.value_exact<bool>();
  } else if (const toml::array *a = n.as_array()) {
    e.kind = ConfigEntry::List;
    for (const toml::node &item : *a) {
      if (item.is_string())
        e.list.push_back(*item.value_exact<std::string>());
      else if (item.is_integer() || item.is_floating_point())
        e.list.push_back(numberText(item));
      else {
        err = where() + ": list items must be strings or numbers";
        return false;
      }
    }
  } else {
    err = where() + ": expected a string, a number, a boolean or a list";
    return false;
  }
  return true;
}

} // namespace

bool readConfigFile(const std::string &path, const std::string &command,
                    std::vector<ConfigEntry> &out, std::string &err) {
  toml::parse_result parsed = toml::parse_file(path);
  if (!parsed) {
    const toml::parse_error &pe = parsed.error();
    err = path + ":" + std::to_string(pe.source().begin.line) + ": " + std::string(pe.description());
    return false;
  }
  const toml::table &root = parsed.table();
  const toml::table *own = nullptr;
  for (const auto &[k, v] : root) {
    std::string key(k.str());
    if (const toml::table *t = v.as_table()) {
      if (key == command)
        own = t;
      continue; // another command's table
    }
    ConfigEntry e;
    if (!entryOf(path, key, v, e, err))
      return false;
    out.push_back(std::move(e));
  }
  if (own)
    for (const auto &[k, v] : *own) {
      std::string key(k.str());
      if (v.is_table()) {
        err = path + ":" + std::to_string(v.source().begin.line) + ": '[" + command + "." + key +
              "]': nested tables are not options";
        return false;
      }
      ConfigEntry e;
      if (!entryOf(path, key, v, e, err))
        return false;
      out.push_back(std::move(e));
    }
  return true;
}

std::string tomlValue(const std::string &value) {
  // A TOML integer or float as the command line would write it (no leading
  // zeros, digits on both sides of the point) stays bare; anything else is
  // a string.
  static const std::regex number("[+-]?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
  if (std::regex_match(value, number)) {
    if (value.find_first_of(".eE") == std::string::npos)
      return value;
    // Floats in one form whatever their spelling, so that a printed
    // configuration reads back to the same text.
    return shortestDouble(std::strtod(value.c_str(), nullptr));
  }
  std::string q = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\')
      q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + "\"";
}

} // namespace loom::tools
