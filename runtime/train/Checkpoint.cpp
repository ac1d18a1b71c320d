//===- Checkpoint.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/Checkpoint.h"
#include "loom/io/Checksum.h"
#include "loom/io/FileBytes.h"
#include "loom/io/Json.h"
#include "loom/io/Safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace loom::train {
namespace {

constexpr int kVersion = 1;

io::NamedTensor f32Tensor(const std::string &name, const std::vector<int64_t> &shape,
                          const std::vector<float> &v) {
  io::NamedTensor t;
  t.name = name;
  t.dtype = "F32";
  t.shape = shape;
  t.data.resize(v.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

std::string stepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)step);
  return buf;
}

/// Checkpoint folders in `dir`, oldest first.
std::vector<fs::path> checkpointsIn(const fs::path &dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0)
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

bool readTensor(const io::SafetensorsReader &r, const std::string &file, const std::string &name,
                const std::vector<int64_t> &shape, std::vector<float> &out, std::string &err) {
  auto it = r.tensors().find(name);
  if (it == r.tensors().end()) {
    err = file + ": no tensor '" + name + "' (checkpoint of another model?)";
    return false;
  }
  if (it->second.shape != shape || it->second.dtype != "F32") {
    err = file + ": tensor '" + name + "' has another shape or dtype than the model's";
    return false;
  }
  return r.readFloat(name, out, err);
}

} // namespace

bool saveCheckpoint(const std::string &dir, const TrainState &s, int keep, std::string &path,
                    std::string &err) {
  return saveCheckpointAt(dir, s, s.step, keep, path, err);
}

bool saveCheckpointAt(const std::string &dir, const TrainState &s, int64_t step, int keep,
                      std::string &path, std::string &err) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    err = "cannot create checkpoint folder '" + dir + "': " + ec.message();
    return false;
  }
  fs::path final = fs::path(dir) / stepDirName(step);
  fs::path tmp = fs::path(dir) / ("." + stepDirName(step) + ".tmp-" + std::to_string(getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) {
    err = "cannot create '" + tmp.string() + "': " + ec.message();
    return false;
  }
  auto cleanup = [&] { std::error_code e2; fs::remove_all(tmp, e2); };
  std::vector<io::NamedTensor> params, optim;
  for (size_t i = 0; i < s.params.size(); ++i) {
    const ParamSlot &p = s.params[i];
    params.push_back(f32Tensor(p.name, p.shape, p.value));
    optim.push_back(f32Tensor("exp_avg." + p.name, p.shape, s.expAvg[i]));
    optim.push_back(f32Tensor("exp_avg_sq." + p.name, p.shape, s.expAvgSq[i]));
  }
  if (!io::writeSafetensors((tmp / "params.safetensors").string(), params, {}, err) ||
      !io::writeSafetensors((tmp / "optimizer.safetensors").string(), optim, {}, err)) {
    cleanup();
    return false;
  }
  json::Value files = json::Value::object();
  for (const char *f : {"params.safetensors", "optimizer.safetensors"}) {
    std::string bytes;
    if (!io::readFileBytes((tmp / f).string(), bytes)) {
      cleanup();
      err = "cannot read back '" + (tmp / f).string() + "'";
      return false;
    }
    json::Value entry = json::Value::object();
    entry.set("bytes", uint64_t(bytes.size()));
    entry.set("fnv1a64", io::hex64(io::fnv1a64(bytes.data(), bytes.size())));
    files.set(f, entry);
  }
  json::Value m = json::Value::object();
  m.set("format", "loom-checkpoint");
  m.set("version", kVersion);
  m.set("step", step);
  m.set("batch", s.batch);
  m.set("seq", s.seq);
  json::Value data = json::Value::object();
  data.set("rule", s.dataRule);
  data.set("next_batch", step);
  m.set("data", data);
  m.set("files", files);
  {
    std::ofstream out(tmp / "manifest.json", std::ios::binary);
    out << m.dump(1) << "\n";
    if (!out.flush()) {
      cleanup();
      err = "cannot write '" + (tmp / "manifest.json").string() + "'";
      return false;
    }
  }
  fs::remove_all(final, ec);
  fs::rename(tmp, final, ec);
  if (ec) {
    cleanup();
    err = "cannot rename '" + tmp.string() + "' to '" + final.string() + "': " + ec.message();
    return false;
  }
  path = final.string();
  if (keep > 0) {
    std::vector<fs::path> all = checkpointsIn(dir);
    for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i], ec);
  }
  return true;
}

bool loadCheckpoint(const std::string &path, TrainState &s, std::string &loadedFrom,
                    std::string &err) {
  fs::path dir = path;
  if (!fs::exists(dir / "manifest.json")) {
    std::vector<fs::path> all = checkpointsIn(dir);
    if (all.empty()) {
      err = "no checkpoint in '" + path + "' (expected manifest.json or step-* folders)";
      return false;
    }
    dir = all.back();
  }
  loadedFrom = dir.string();
  // Where to point the user when this one is bad.
  std::string previous;
  {
    std::vector<fs::path> all = checkpointsIn(dir.parent_path());
    for (const fs::path &p : all)
      if (p.filename() < dir.filename()) previous = p.string();
  }
  auto refuse = [&](const std::string &why) {
    err = "checkpoint '" + dir.string() + "' is unusable: " + why +
          (previous.empty() ? "" : "; the previous checkpoint is '" + previous + "'");
    return false;
  };
  std::string text;
  if (!io::readFileBytes((dir / "manifest.json").string(), text))
    return refuse("manifest.json is missing");
  json::Value m;
  std::string jerr;
  if (!json::parse(text, m, jerr) || !m.isObject())
    return refuse("manifest.json is not valid JSON (" + jerr + ")");
  const json::Value *format = m.get("format"), *version = m.get("version"), *step = m.get("step"),
                    *files = m.get("files"), *batch = m.get("batch"), *seq = m.get("seq");
  if (!format || !format->isString() || format->str() != "loom-checkpoint")
    return refuse("manifest.json is not a loom checkpoint manifest");
  if (!version || !version->isNumber() || version->integer() != kVersion)
    return refuse("unsupported checkpoint version");
  if (!step || !step->isNumber() || !files || !files->isObject() || !batch || !seq)
    return refuse("manifest.json lacks step, batch, seq or files");
  for (const char *f : {"params.safetensors", "optimizer.safetensors"}) {
    const json::Value *e = files->get(f);
    std::string bytes;
    if (!e || !e->isObject() || !e->get("bytes") || !e->get("fnv1a64"))
      return refuse(std::string("manifest.json has no entry for ") + f);
    if (!io::readFileBytes((dir / f).string(), bytes))
      return refuse(std::string(f) + " is missing");
    if (uint64_t(bytes.size()) != uint64_t(e->get("bytes")->integer()))
      return refuse(std::string(f) + " has " + std::to_string(bytes.size()) + " bytes, the manifest says " +
                    std::to_string(e->get("bytes")->integer()) + " (truncated?)");
    if (io::hex64(io::fnv1a64(bytes.data(), bytes.size())) != e->get("fnv1a64")->str())
      return refuse(std::string(f) + " fails its checksum (corrupted)");
  }
  if (batch->integer() != s.batch || seq->integer() != s.seq)
    return refuse("it was trained with batch " + std::to_string(batch->integer()) + " x seq " +
                  std::to_string(seq->integer()) + ", this run uses " + std::to_string(s.batch) +
                  " x " + std::to_string(s.seq));
  io::SafetensorsReader params, optim;
  std::string pf = (dir / "params.safetensors").string(), of = (dir / "optimizer.safetensors").string();
  if (!params.open(pf, err) || !optim.open(of, err))
    return false;
  if (params.tensors().size() != s.params.size())
    return refuse("it holds " + std::to_string(params.tensors().size()) + " parameters, the model has " +
                  std::to_string(s.params.size()));
  s.expAvg.resize(s.params.size());
  s.expAvgSq.resize(s.params.size());
  for (size_t i = 0; i < s.params.size(); ++i) {
    ParamSlot &p = s.params[i];
    if (!readTensor(params, pf, p.name, p.shape, p.value, err) ||
        !readTensor(optim, of, "exp_avg." + p.name, p.shape, s.expAvg[i], err) ||
        !readTensor(optim, of, "exp_avg_sq." + p.name, p.shape, s.expAvgSq[i], err))
      return false;
  }
  s.step = step->integer();
  return true;
}

bool resumeNewest(const std::string &dir, TrainState &s, std::string &loadedFrom,
                  std::vector<std::string> &skipped, std::string &err) {
  err.clear();
  std::vector<fs::path> all = checkpointsIn(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    TrainState attempt = s;
    std::string why;
    if (loadCheckpoint(it->string(), attempt, loadedFrom, why)) {
      s = std::move(attempt);
      return true;
    }
    // Damage (a killed writer, a truncated copy) is skipped; a checkpoint
    // of another run is not: restarting must not silently train something
    // else from scratch.
    if (why.find("it was trained with batch") != std::string::npos ||
        why.find("parameters, the model has") != std::string::npos ||
        why.find("checkpoint of another model") != std::string::npos) {
      err = why;
      return false;
    }
    skipped.push_back(why);
  }
  return false;
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  std::string path, err;
  wait(path, err);
}

void AsyncCheckpointWriter::start(const std::string &dir, TrainState &s, int keep,
                                  StateReader read) {
  std::string path, err;
  wait(path, err); // callers wait first; this keeps one write in flight regardless
  ok_ = true;
  path_.clear();
  err_.clear();
  // The step is taken now: the training loop moves s.step on meanwhile.
  int64_t step = s.step;
  thread_ = std::thread([this, dir, &s, keep, step, read = std::move(read)] {
    ok_ = (!read || read(s, err_)) && saveCheckpointAt(dir, s, step, keep, path_, err_);
  });
}

bool AsyncCheckpointWriter::wait(std::string &path, std::string &err) {
  path.clear();
  if (!thread_.joinable())
    return true;
  thread_.join();
  path = path_;
  if (!ok_)
    err = err_;
  return ok_;
}

} // namespace loom::train
