//===- Diagnostics.h - Building one-line error messages ---------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Every runtime error is one line of text; these helpers keep the code that
// builds those lines short.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_LIB_DIAGNOSTICS_H
#define LOOM_RUNTIME_LIB_DIAGNOSTICS_H

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace loom::rt {

/// Concatenates the arguments as an ostream would print them.
template <typename... Args> std::string cat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// "[2,3,4]"; "[]" for a scalar.
inline std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace loom::rt

#endif
