//===- WeightFiles.cpp ----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/WeightFiles.h"
#include "loom/io/Json.h"
#include "loom/io/Safetensors.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <set>

namespace loom::train {

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

namespace {

/// The tensors of one safetensors file, or of every shard an HF index
/// (`model.safetensors.index.json`: {"weight_map": {name: shard file}})
/// names, looked up by tensor name.
struct WeightSource {
  std::vector<std::unique_ptr<io::SafetensorsReader>> files;
  std::map<std::string, const io::SafetensorsReader *> byName;

  bool open(const std::string &path, std::string &err) {
    const std::string suffix = ".index.json";
    if (path.size() <= suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix)) {
      files.push_back(std::make_unique<io::SafetensorsReader>());
      if (!files.back()->open(path, err))
        return false;
      for (const auto &[n, info] : files.back()->tensors()) byName[n] = files.back().get();
      return true;
    }
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    json::Value index;
    if (!in || !json::parse(text.str(), index, err)) {
      err = path + ": " + (in ? "not valid JSON (" + err + ")" : "cannot read the index");
      return false;
    }
    const json::Value *map = index.get("weight_map");
    if (!map || !map->isObject() || map->fields().empty()) {
      err = path + ": no weight_map in the index";
      return false;
    }
    std::map<std::string, const io::SafetensorsReader *> shardOf;
    std::string dir = std::filesystem::path(path).parent_path().string();
    for (const auto &[name, file] : map->fields()) {
      if (!file.isString() || file.str().find('/') != std::string::npos || file.str().empty()) {
        err = path + ": weight '" + name + "' names no shard file in the index's folder";
        return false;
      }
      auto it = shardOf.find(file.str());
      if (it == shardOf.end()) {
        files.push_back(std::make_unique<io::SafetensorsReader>());
        if (!files.back()->open((dir.empty() ? "" : dir + "/") + file.str(), err))
          return false;
        it = shardOf.emplace(file.str(), files.back().get()).first;
      }
      if (!it->second->tensors().count(name)) {
        err = path + ": the index puts weight '" + name + "' in " + file.str() + ", which lacks it";
        return false;
      }
      byName[name] = it->second;
    }
    return true;
  }
  const io::TensorInfo &info(const std::string &n) const { return byName.at(n)->tensors().at(n); }
};

} // namespace

bool loadInitWeights(const std::string &path, std::vector<ParamSlot> &params,
                     std::vector<std::string> &hfNames,
                     std::map<std::string, std::string> &aliases, std::string &err) {
  WeightSource source;
  if (!source.open(path, err))
    return false;
  std::vector<std::string> names;
  for (const auto &[n, r] : source.byName) names.push_back(n);
  hfNames.assign(params.size(), "");
  std::set<std::string> used;
  for (size_t i = 0; i < params.size(); ++i) {
    ParamSlot &p = params[i];
    std::string n = matchWeightName(p.name, names);
    if (n.empty()) {
      err = path + ": no weight for parameter '" + p.name + "'";
      return false;
    }
    const io::TensorInfo &info = source.info(n);
    std::vector<int64_t> want = p.shape;
    if (p.transposed && want.size() == 2) std::swap(want[0], want[1]);
    if (info.shape != want) {
      err = path + ": weight '" + n + "' has shape " + shapeText(info.shape) + " but parameter '" +
            p.name + "' needs " + shapeText(want);
      return false;
    }
    std::vector<float> v;
    if (!source.byName.at(n)->readFloat(n, v, err))
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
    if (!source.byName.at(n)->readBytes(n, bytes, err))
      return false;
    std::string aliasOf;
    for (const std::string &u : used) {
      std::vector<char> other;
      if (source.info(u).shape == source.info(n).shape &&
          source.byName.at(u)->readBytes(u, other, err) && other == bytes) {
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
                   const std::map<std::string, std::string> &aliases, std::string &err,
                   uint64_t maxShardBytes) {
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
  uint64_t total = 0;
  for (const io::NamedTensor &t : out) total += t.data.size();
  std::map<std::string, std::string> meta{{"format", "pt"}, {"producer", "loom"}};
  if (total <= maxShardBytes)
    return io::writeSafetensors(path, out, meta, err);
  // Hugging Face's sharded layout: `<stem>-0000k-of-0000n.safetensors`
  // beside `path`, each up to maxShardBytes (a tensor larger than that gets
  // a shard of its own), and `<path>.index.json` mapping every weight to
  // its shard, written last: a reader that finds the index finds whole
  // shards.
  std::vector<std::vector<io::NamedTensor>> shards(1);
  uint64_t inShard = 0;
  for (io::NamedTensor &t : out) {
    if (inShard > 0 && inShard + t.data.size() > maxShardBytes) {
      shards.emplace_back();
      inShard = 0;
    }
    inShard += t.data.size();
    shards.back().push_back(std::move(t));
  }
  std::filesystem::path p(path);
  std::string stem = p.stem().string(), dir = p.parent_path().string();
  char of[16];
  std::snprintf(of, sizeof of, "%05zu", shards.size());
  json::Value hfIndex = json::Value::object(), weightMap = json::Value::object(), md = json::Value::object();
  md.set("total_size", json::Value(uint64_t(total)));
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "-%05zu-of-%s.safetensors", k + 1, of);
    std::string file = stem + name;
    if (!io::writeSafetensors((dir.empty() ? "" : dir + "/") + file, shards[k], meta, err))
      return false;
    for (const io::NamedTensor &t : shards[k]) weightMap.set(t.name, json::Value(file));
  }
  hfIndex.set("metadata", std::move(md));
  hfIndex.set("weight_map", std::move(weightMap));
  std::string indexPath = path + ".index.json", tmp = indexPath + ".tmp";
  std::ofstream f(tmp);
  f << hfIndex.dump(2) << "\n";
  f.close();
  if (!f || std::rename(tmp.c_str(), indexPath.c_str()) != 0) {
    std::remove(tmp.c_str());
    err = "cannot write " + indexPath;
    return false;
  }
  return true;
}

} // namespace loom::train
