//===- OnnxExporter.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxExporter.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/TorchExportInfo.h"

#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <unistd.h>

namespace loom {

using onnx_import::ParamUse;
using onnx_import::TorchExportInfo;

namespace {

void setFloatData(onnx::TensorProto &t, const std::vector<float> &v) {
  t.clear_float_data();
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  t.set_raw_data(std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(float)));
}

int64_t numElements(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  return n;
}

} // namespace

bool exportOnnxWithParameters(const std::string &inPath, const std::string &outPath,
                              const std::map<std::string, std::vector<float>> &params,
                              std::string &err) {
  onnx::ModelProto model;
  if (!loadOnnxModel(inPath, model, err))
    return false;
  TorchExportInfo info(model);
  onnx::GraphProto *graph = model.mutable_graph();
  std::map<std::string, onnx::TensorProto *> inits;
  for (auto &t : *graph->mutable_initializer()) inits[t.name()] = &t;

  // Which parameter each (node, input) reads, grouped by initializer.
  struct Use { onnx::NodeProto *node; int input; std::string param; };
  std::map<std::string, std::vector<Use>> usesOf;
  std::set<std::string> placed;
  for (auto &node : *graph->mutable_node())
    for (int k = 0; k < node.input_size(); ++k) {
      auto it = inits.find(node.input(k));
      if (it == inits.end() || it->second->data_type() != onnx::TensorProto::FLOAT)
        continue;
      ParamUse use;
      std::string param;
      if (info.paramForInput(node, k, use))
        param = use.name;
      else if (params.count(node.input(k)))
        param = node.input(k); // a named constant trained by --trainable
      if (!param.empty() && params.count(param))
        usesOf[it->first].push_back(Use{&node, k, param});
    }

  std::vector<onnx::TensorProto> added;
  for (auto &[initName, uses] : usesOf) {
    std::set<std::string> owners;
    for (const Use &u : uses) owners.insert(u.param);
    onnx::TensorProto *init = inits.at(initName);
    for (const std::string &param : owners) {
      const std::vector<float> &v = params.at(param);
      if (int64_t(v.size()) != numElements(*init)) {
        err = outPath + ": parameter '" + param + "' has " + std::to_string(v.size()) +
              " values but initializer '" + initName + "' holds " +
              std::to_string(numElements(*init));
        return false;
      }
      placed.insert(param);
      if (owners.size() == 1) {
        setFloatData(*init, v);
        continue;
      }
      // A merged initializer: give this parameter its own copy and rewire.
      onnx::TensorProto copy = *init;
      std::string name = inits.count(param) ? param + ".trained" : param;
      copy.set_name(name);
      setFloatData(copy, v);
      added.push_back(copy);
      for (const Use &u : uses)
        if (u.param == param)
          u.node->set_input(u.input, name);
    }
  }
  for (auto &t : added) *graph->add_initializer() = t;
  // Parameters the graph has no initializer for: the exporter dropped an
  // all-zero bias. Still zero is fine; trained values cannot be placed.
  for (const auto &[name, v] : params) {
    if (placed.count(name))
      continue;
    bool allZero = true;
    for (float x : v) allZero = allZero && x == 0.0f;
    if (!allZero) {
      err = outPath + ": parameter '" + name + "' has no initializer in " + inPath +
            " (the exporter dropped it); export to safetensors instead";
      return false;
    }
  }
  // Drop initializers no node reads any more (merged ones fully rewired).
  std::set<std::string> read;
  for (const auto &node : graph->node())
    for (const auto &in : node.input()) read.insert(in);
  for (const auto &o : graph->output()) read.insert(o.name());
  auto *list = graph->mutable_initializer();
  for (int i = list->size() - 1; i >= 0; --i)
    if (!read.count(list->Get(i).name()))
      list->DeleteSubrange(i, 1);

  std::string tmp = outPath + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out || !model.SerializeToOstream(&out) || !out.flush()) {
      std::remove(tmp.c_str());
      err = "cannot write '" + outPath + "'";
      return false;
    }
  }
  if (std::rename(tmp.c_str(), outPath.c_str()) != 0) {
    std::remove(tmp.c_str());
    err = "cannot rename '" + tmp + "' to '" + outPath + "'";
    return false;
  }
  return true;
}

} // namespace loom
