//===- Json.cpp -----------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/io/Json.h"

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
struct Parser {
  const std::string &s;
  size_t i = 0;
  std::string err;

  bool fail(const std::string &msg) {
    if (err.empty()) err = "at byte " + std::to_string(i) + ": " + msg;
    return false;
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  }
  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (s.compare(i, n, word) != 0) return fail("unexpected token");
    i += n;
    return true;
  }
  bool string(std::string &out) {
    if (s[i] != '"') return fail("expected a string");
    ++i;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') { out += c; continue; }
      if (i >= s.size()) return fail("unterminated escape");
      char e = s[i++];
      switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        if (i + 4 > s.size()) return fail("short \\u escape");
        unsigned code = unsigned(std::strtoul(s.substr(i, 4).c_str(), nullptr, 16));
        i += 4;
        // UTF-8 encode (surrogate pairs are kept as separate code units).
        if (code < 0x80) out += char(code);
        else if (code < 0x800) { out += char(0xC0 | (code >> 6)); out += char(0x80 | (code & 63)); }
        else { out += char(0xE0 | (code >> 12)); out += char(0x80 | ((code >> 6) & 63)); out += char(0x80 | (code & 63)); }
        break;
      }
      default: out += e;
      }
    }
    if (i >= s.size()) return fail("unterminated string");
    ++i;
    return true;
  }
  bool value(Value &out, int depth) {
    if (depth > 256) return fail("nesting too deep");
    ws();
    if (i >= s.size()) return fail("unexpected end");
    char c = s[i];
    if (c == '{') {
      ++i;
      out = Value::object();
      ws();
      if (i < s.size() && s[i] == '}') { ++i; return true; }
      while (true) {
        ws();
        std::string key;
        if (i >= s.size() || !string(key)) return fail("expected a key");
        ws();
        if (i >= s.size() || s[i] != ':') return fail("expected ':'");
        ++i;
        Value v;
        if (!value(v, depth + 1)) return false;
        out.set(key, std::move(v));
        ws();
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        if (i < s.size() && s[i] == '}') { ++i; return true; }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++i;
      out = Value::array();
      ws();
      if (i < s.size() && s[i] == ']') { ++i; return true; }
      while (true) {
        Value v;
        if (!value(v, depth + 1)) return false;
        out.push(std::move(v));
        ws();
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        if (i < s.size() && s[i] == ']') { ++i; return true; }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      std::string str;
      if (!string(str)) return false;
      out = Value(std::move(str));
      return true;
    }
    if (c == 't') { out = Value(true); return literal("true"); }
    if (c == 'f') { out = Value(false); return literal("false"); }
    if (c == 'n') { out = Value(); return literal("null"); }
    char *end = nullptr;
    double d = std::strtod(s.c_str() + i, &end);
    if (end == s.c_str() + i) return fail("unexpected character");
    i = size_t(end - s.c_str());
    out = Value(d);
    return true;
  }
};
} // namespace

bool parse(const std::string &text, Value &out, std::string &err) {
  Parser p{text};
  if (!p.value(out, 0)) {
    err = p.err;
    return false;
  }
  p.ws();
  if (p.i != text.size()) {
    err = "at byte " + std::to_string(p.i) + ": trailing characters";
    return false;
  }
  return true;
}

} // namespace loom::json
