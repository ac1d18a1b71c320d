//===- Json.h - A small JSON value, parser and writer -----------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Enough JSON for safetensors headers, checkpoint manifests, hardware
// profiles and reports: objects keep insertion order so written files diff
// cleanly. Numbers are doubles (integers up to 2^53 are exact).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_IO_JSON_H
#define LOOM_RUNTIME_IO_JSON_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loom::json {

class Value {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  Value(bool b) : kind_(Kind::Bool), bool_(b) {}
  Value(double d) : kind_(Kind::Number), num_(d) {}
  Value(int64_t i) : kind_(Kind::Number), num_(double(i)) {}
  Value(int i) : kind_(Kind::Number), num_(i) {}
  Value(uint64_t i) : kind_(Kind::Number), num_(double(i)) {}
  Value(const char *s) : kind_(Kind::String), str_(s) {}
  Value(std::string s) : kind_(Kind::String), str_(std::move(s)) {}
  static Value array() { Value v; v.kind_ = Kind::Array; return v; }
  static Value object() { Value v; v.kind_ = Kind::Object; return v; }

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isNumber() const { return kind_ == Kind::Number; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }
  double number() const { return num_; }
  int64_t integer() const { return int64_t(num_); }
  bool boolean() const { return bool_; }
  const std::string &str() const { return str_; }

  // Arrays.
  const std::vector<Value> &items() const { return items_; }
  void push(Value v) { items_.push_back(std::move(v)); }

  // Objects (insertion-ordered).
  const std::vector<std::pair<std::string, Value>> &fields() const { return fields_; }
  /// The member `key`, or nullptr.
  const Value *get(const std::string &key) const;
  /// Sets (or replaces) member `key`.
  void set(const std::string &key, Value v);

  /// Compact JSON text; `indent` > 0 pretty-prints.
  std::string dump(int indent = 0) const;

private:
  void dumpTo(std::string &out, int indent, int depth) const;
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double num_ = 0;
  std::string str_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> fields_;
};

/// Parses `text`; false with `err` ("at byte N: ...") on malformed input.
bool parse(const std::string &text, Value &out, std::string &err);

} // namespace loom::json

#endif
