//===- WeightFiles.cpp ----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "WeightFiles.h"
#include "loom/io/Safetensors.h"

#include <cstring>
#include <set>

namespace loom::tools {

std::string matchWeightName(const std::string &param, const std::vector<std::string> &names) {
  std::string best;
  for (const std::string &n : names) {
    bool match = n == param || (param.size() > n.size() &&
                                param.compare(param.size() - n.size(), n.size(), n) == 0 &&
                                param[param.size() - n.size() - 1] == '.');
    if (match && n.size() > best.size())
      best = n;
  }
  return best;
}

std::vector<float> transpose2d(const std::vector<float> &x, int64_t rows, int64_t cols) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[c * rows + r] = x[r * cols + c];
  return y;
}

std::string defaultHfName(const std::string &param) {
  for (const char *root : {"model.", "transformer.", "lm_head."}) {
    size_t at = param.find(root);
    if (at != std::string::npos && (at == 0 || param[at - 1] == '.'))
      return param.substr(at);
  }
  return param;
}

static std::string shapeText(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

bool loadInitWeights(const std::string &path, std::vector<ParamSlot> &params,
                     std::vector<std::string> &hfNames,
                     std::map<std::string, std::string> &aliases, std::string &err) {
  io::SafetensorsReader reader;
  if (!reader.open(path, err))
    return false;
  std::vector<std::string> names;
  for (const auto &[n, info] : reader.tensors()) names.push_back(n);
  hfNames.assign(params.size(), "");
  std::set<std::string> used;
  for (size_t i = 0; i < params.size(); ++i) {
    ParamSlot &p = params[i];
    std::string n = matchWeightName(p.name, names);
    if (n.empty()) {
      err = path + ": no weight for parameter '" + p.name + "'";
      return false;
    }
    const io::TensorInfo &info = reader.tensors().at(n);
    std::vector<int64_t> want = p.shape;
    if (p.transposed && want.size() == 2) std::swap(want[0], want[1]);
    if (info.shape != want) {
      err = path + ": weight '" + n + "' has shape " + shapeText(info.shape) + " but parameter '" +
            p.name + "' needs " + shapeText(want);
      return false;
    }
    std::vector<float> v;
    if (!reader.readFloat(n, v, err))
      return false;
    p.value = p.transposed && want.size() == 2 ? transpose2d(v, want[0], want[1]) : v;
    hfNames[i] = n;
    used.insert(n);
  }
  // Unmatched weights: allowed only as tied aliases (same bytes as a match).
  for (const std::string &n : names) {
    if (used.count(n))
      continue;
    std::vector<char> bytes;
    if (!reader.readBytes(n, bytes, err))
      return false;
    std::string aliasOf;
    for (const std::string &u : used) {
      std::vector<char> other;
      if (reader.tensors().at(u).shape == reader.tensors().at(n).shape &&
          reader.readBytes(u, other, err) && other == bytes) {
        aliasOf = u;
        break;
      }
    }
    if (aliasOf.empty()) {
      err = path + ": weight '" + n + "' matches no parameter of the model";
      return false;
    }
    aliases[n] = aliasOf;
  }
  return true;
}

bool exportWeights(const std::string &path, const std::vector<ParamSlot> &params,
                   const std::vector<std::string> &hfNames,
                   const std::map<std::string, std::string> &aliases, std::string &err) {
  std::vector<io::NamedTensor> out;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSlot &p = params[i];
    io::NamedTensor t;
    t.name = i < hfNames.size() && !hfNames[i].empty() ? hfNames[i] : defaultHfName(p.name);
    t.dtype = "F32";
    t.shape = p.shape;
    std::vector<float> v = p.value;
    if (p.transposed && p.shape.size() == 2) {
      v = transpose2d(p.value, p.shape[0], p.shape[1]);
      std::swap(t.shape[0], t.shape[1]);
    }
    t.data.resize(v.size() * sizeof(float));
    std::memcpy(t.data.data(), v.data(), t.data.size());
    index[t.name] = out.size();
    out.push_back(std::move(t));
  }
  for (const auto &[alias, of] : aliases) {
    auto it = index.find(of);
    if (it == index.end())
      continue;
    io::NamedTensor t = out[it->second];
    t.name = alias;
    out.push_back(std::move(t));
  }
  return io::writeSafetensors(path, out, {{"format", "pt"}, {"producer", "loom"}}, err);
}

} // namespace loom::tools
