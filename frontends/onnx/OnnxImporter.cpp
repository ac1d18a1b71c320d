//===- OnnxImporter.cpp - Loading a model and specializing its inputs -----===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/ShapeRules.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/text_format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace mlir;
namespace fs = std::filesystem;

namespace loom {
using namespace onnx_import;

namespace {

constexpr int64_t kMinOpset = 13, kMaxOpset = 23;

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Keeps the first text-format parse error, so it ends up in the one-line
/// message instead of on stderr through protobuf's default logger.
class FirstTextError : public google::protobuf::io::ErrorCollector {
public:
  std::string first;
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string &message) override {
    if (first.empty())
      first = std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string &) override {}
};

bool loadModel(const std::string &path, onnx::ModelProto &model,
               std::string &err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = "cannot open '" + path + "'";
    return false;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  std::string data = buf.str();
  bool ok;
  FirstTextError textError;
  if (endsWith(path, ".onnxtxt") || endsWith(path, ".textproto")) {
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&textError);
    ok = parser.ParseFromString(data, &model);
  } else {
    google::protobuf::io::CodedInputStream stream(
        reinterpret_cast<const uint8_t *>(data.data()), int(data.size()));
    stream.SetRecursionLimit(256);
    ok = model.ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage();
  }
  if (!ok && !textError.first.empty()) {
    err = path + ": not a valid ONNX model (text format error at " + textError.first + ")";
    return false;
  }
  if (!ok || !model.has_graph()) {
    err = path + ": not a valid ONNX model (truncated or corrupt protobuf)";
    return false;
  }
  return true;
}

/// The input's type with dynamic dims specialized: an input's first dynamic
/// dim takes --batch, its second --seq.
RankedTensorType specializeInput(MLIRContext &ctx, const onnx::ValueInfoProto &vi,
                                 const OnnxImportOptions &opts) {
  const auto &tt = vi.type().tensor_type();
  Type elem = elementTypeFor(&ctx, tt.elem_type());
  if (!vi.type().has_tensor_type() || !elem)
    throw ImportError{"graph input '" + vi.name() + "' is not a tensor of a "
                      "supported element type"};
  if (!tt.has_shape())
    throw ImportError{"graph input '" + vi.name() + "' has no shape"};
  std::vector<int64_t> shape;
  int dynamicSeen = 0;
  // Token ids [batch, seq] take --batch and --seq by position, so an export
  // with a static batch of 1 and a dynamic sequence gets its --seq. Other
  // inputs: the first dynamic dim takes --batch, the second --seq.
  bool tokens = tt.shape().dim_size() == 2;
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto &dim = tt.shape().dim(d);
    bool isBatch = tokens ? d == 0 : dynamicSeen == 0;
    int64_t given = isBatch ? opts.batch : opts.seq;
    const char *flag = isBatch ? "--batch" : "--seq";
    if (dim.has_dim_value()) {
      if (dim.dim_value() <= 0)
        throw ImportError{"graph input '" + vi.name() + "' dim " + std::to_string(d) +
                          " is " + std::to_string(dim.dim_value())};
      if (tokens && given > 0 && given != dim.dim_value())
        throw ImportError{"graph input '" + vi.name() + "' dim " + std::to_string(d) +
                          " is static " + std::to_string(dim.dim_value()) + " but " + flag +
                          " asks for " + std::to_string(given)};
      shape.push_back(dim.dim_value());
      continue;
    }
    if (dynamicSeen >= 2)
      throw ImportError{"graph input '" + vi.name() + "' has more than two dynamic dims"};
    if (given <= 0)
      throw ImportError{"graph input '" + vi.name() + "' dim " + std::to_string(d) +
                        " ('" + dim.dim_param() + "') is dynamic: pass " + flag};
    shape.push_back(given);
    ++dynamicSeen;
  }
  int64_t n;
  if (!checkedNumElements(shape, n))
    throw ImportError{"graph input '" + vi.name() + "' dims overflow"};
  return RankedTensorType::get(shape, elem);
}

/// Parameters of the export's signature that no constant of the imported
/// graph holds and that the exporter's optimizer folded into another
/// initializer (falcon's W^T, gemma's 1 + w, a static export's position
/// rows). Inference is unaffected; training them is impossible from this
/// export, which BuildTrainStep reports. Recorded on the module as
/// `loom.unread_params`: parameter -> the initializer it was folded into.
/// (A parameter read by no node and folded into nothing is not recorded:
/// that is also how torch.export leaves the second name of a tied weight.)
void recordUnreadParameters(ModuleOp module, const TorchExportInfo &info) {
  std::set<std::string> present;
  module.walk([&](ConstantOp c) {
    if (auto p = c.getParamAttr())
      present.insert(p.getName().str());
  });
  Builder b(module.getContext());
  SmallVector<NamedAttribute> unread;
  for (const std::string &param : info.parameters()) {
    std::string into = present.count(param) ? "" : info.initializerFoldedFrom(param);
    if (!into.empty())
      unread.push_back(b.getNamedAttr(param, b.getStringAttr(into)));
  }
  if (!unread.empty())
    module->setAttr(kUnreadParamsAttrName, b.getDictionaryAttr(unread));
}

} // namespace

OwningOpRef<ModuleOp> importOnnxModel(MLIRContext &ctx, const std::string &path,
                                      const OnnxImportOptions &opts,
                                      std::string &err) {
  ctx.loadDialect<LoomDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (!loadModel(path, model, err))
    return nullptr;
  int64_t opset = -1;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset < kMinOpset || opset > kMaxOpset) {
    err = path + ": opset " + std::to_string(opset) + " is not supported (loom imports opset " +
          std::to_string(kMinOpset) + "-" + std::to_string(kMaxOpset) + ")";
    return nullptr;
  }
  const onnx::GraphProto &graph = model.graph();
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty())
    dir = ".";

  OpBuilder b(&ctx);
  auto loc = FileLineColLoc::get(&ctx, path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  try {
    TorchExportInfo torchInfo(model);
    GraphImporter g(b, dir, opset, torchInfo, opts.weightsAsShapes);
    std::set<std::string> initNames;
    for (const auto &t : graph.initializer()) {
      g.addInitializer(t);
      initNames.insert(t.name());
    }
    SmallVector<Type> argTypes;
    std::vector<const onnx::ValueInfoProto *> args;
    for (const auto &vi : graph.input()) {
      if (initNames.count(vi.name()))
        continue;
      argTypes.push_back(specializeInput(ctx, vi, opts));
      args.push_back(&vi);
    }
    b.setInsertionPointToEnd(module->getBody());
    auto func = b.create<func::FuncOp>(loc, "forward", b.getFunctionType(argTypes, {}));
    Block *body = func.addEntryBlock();
    for (size_t k = 0; k < args.size(); ++k) {
      func.setArgAttr(k, "loom.name", b.getStringAttr(args[k]->name()));
      g.bindValue(args[k]->name(), body->getArgument(k));
    }
    b.setInsertionPointToEnd(body);
    g.countUses(graph);
    for (const auto &node : graph.node())
      g.importNode(node);
    g.tieParameterCopies();
    SmallVector<Value> results;
    SmallVector<Type> resultTypes;
    for (const auto &out : graph.output()) {
      results.push_back(g.graphOutput(out.name()));
      resultTypes.push_back(results.back().getType());
    }
    b.create<func::ReturnOp>(loc, results);
    func.setType(b.getFunctionType(argTypes, resultTypes));
    recordUnreadParameters(*module, torchInfo);
    for (size_t k = 0; k < results.size(); ++k)
      func.setResultAttr(k, "loom.name", b.getStringAttr(graph.output(k).name()));
  } catch (const ImportError &e) {
    err = path + ": " + e.message;
    return nullptr;
  }
  std::string diag;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    if (diag.empty()) diag = d.str();
    return success();
  });
  if (failed(verify(*module))) {
    err = path + ": imported IR does not verify: " + diag;
    return nullptr;
  }
  return module;
}

bool loadOnnxModel(const std::string &path, onnx::ModelProto &model, std::string &err) {
  return loadModel(path, model, err);
}

} // namespace loom
