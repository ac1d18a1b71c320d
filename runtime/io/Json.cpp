//===- Json.cpp -----------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/io/Json.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace loom::json {

const Value *Value::get(const std::string &key) const {
  for (const auto &f : fields_)
    if (f.first == key)
      return &f.second;
  return nullptr;
}

void Value::set(const std::string &key, Value v) {
  kind_ = Kind::Object;
  for (auto &f : fields_)
    if (f.first == key) {
      f.second = std::move(v);
      return;
    }
  fields_.emplace_back(key, std::move(v));
}

static void escape(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  out += '"';
}

void Value::dumpTo(std::string &out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent > 0) {
      out += '\n';
      out.append(size_t(indent * d), ' ');
    }
  };
  switch (kind_) {
  case Kind::Null: out += "null"; break;
  case Kind::Bool: out += bool_ ? "true" : "false"; break;
  case Kind::Number: {
    char buf[40];
    if (std::isfinite(num_) && num_ == std::floor(num_) && std::fabs(num_) < 9.007e15)
      std::snprintf(buf, sizeof buf, "%lld", (long long)num_);
    else if (std::isfinite(num_))
      std::snprintf(buf, sizeof buf, "%.17g", num_);
    else
      std::snprintf(buf, sizeof buf, "null"); // JSON has no NaN/Inf
    out += buf;
    break;
  }
  case Kind::String: escape(out, str_); break;
  case Kind::Array:
    out += '[';
    for (size_t i = 0; i < items_.size(); ++i) {
      if (i) out += ',';
      newline(depth + 1);
      items_[i].dumpTo(out, indent, depth + 1);
    }
    if (!items_.empty()) newline(depth);
    out += ']';
    break;
  case Kind::Object:
    out += '{';
    for (size_t i = 0; i < fields_.size(); ++i) {
      if (i) out += ',';
      newline(depth + 1);
      escape(out, fields_[i].first);
      out += indent > 0 ? ": " : ":";
      fields_[i].second.dumpTo(out, indent, depth + 1);
    }
    if (!fields_.empty()) newline(depth);
    out += '}';
    break;
  }
}

std::string Value::dump(int indent) const {
  std::string out;
  dumpTo(out, indent, 0);
  return out;
}

namespace {

/// nlohmann's document (insertion-ordered objects) as loom's Value. Depth
/// is bounded: a hostile file must not exhaust the stack on the way back.
bool convert(const nlohmann::ordered_json &j, Value &out, int depth, std::string &err) {
  if (depth > 256) {
    err = "nested deeper than 256 levels";
    return false;
  }
  switch (j.type()) {
  case nlohmann::json::value_t::null:
    out = Value();
    return true;
  case nlohmann::json::value_t::boolean:
    out = Value(j.get<bool>());
    return true;
  case nlohmann::json::value_t::number_integer:
    out = Value(double(j.get<int64_t>()));
    return true;
  case nlohmann::json::value_t::number_unsigned:
    out = Value(double(j.get<uint64_t>()));
    return true;
  case nlohmann::json::value_t::number_float:
    out = Value(j.get<double>());
    return true;
  case nlohmann::json::value_t::string:
    out = Value(j.get<std::string>());
    return true;
  case nlohmann::json::value_t::array:
    out = Value::array();
    for (const auto &item : j) {
      Value v;
      if (!convert(item, v, depth + 1, err))
        return false;
      out.push(std::move(v));
    }
    return true;
  case nlohmann::json::value_t::object:
    out = Value::object();
    for (const auto &[k, item] : j.items()) {
      Value v;
      if (!convert(item, v, depth + 1, err))
        return false;
      out.set(k, std::move(v));
    }
    return true;
  default: // binary, discarded
    err = "unsupported JSON value";
    return false;
  }
}

} // namespace

bool parse(const std::string &text, Value &out, std::string &err) {
  // nlohmann-json (Debian's nlohmann-json3-dev) reads; its parse errors
  // carry the byte where they happened.
  nlohmann::ordered_json doc;
  try {
    doc = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    std::string what = e.what();
    size_t colon = what.rfind(": ");
    err = "at byte " + std::to_string(e.byte) + ": " +
          (colon == std::string::npos ? what : what.substr(colon + 2));
    return false;
  } catch (const nlohmann::json::exception &e) { // e.g. a number too large for a double
    std::string what = e.what();
    size_t close = what.find("] ");
    err = close == std::string::npos ? what : what.substr(close + 2);
    return false;
  }
  return convert(doc, out, 0, err);
}

} // namespace loom::json
