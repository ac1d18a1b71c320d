//===- OpRegistry.cpp - What the ONNX importer does with each op ----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OpRegistry.h"
#include "frontends/onnx/ConstantFolder.h"
#include "frontends/onnx/GraphImporter.h"
#include "ir/LoomOps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"

#include <algorithm>
#include <set>

namespace loom {
namespace {

using onnx_import::emitterOps;
using onnx_import::foldingRuleOps;

OnnxOpEntry folded(std::string op, std::string attributes = "", std::string notes = "") {
  OnnxOpEntry e;
  e.op = std::move(op);
  e.attributes = std::move(attributes);
  e.folds = true;
  e.notes = std::move(notes);
  return e;
}

OnnxOpEntry emitted(std::string op, std::vector<std::string> loomOps, bool folds,
                    std::string attributes = "", std::string notes = "") {
  OnnxOpEntry e;
  e.op = std::move(op);
  e.loomOps = std::move(loomOps);
  e.folds = folds;
  e.attributes = std::move(attributes);
  e.notes = std::move(notes);
  return e;
}

std::vector<OnnxOpEntry> makeRegistry() {
  const std::string elementwise = "NumPy broadcasting";
  std::vector<OnnxOpEntry> r = {
      folded("Abs"),
      emitted("Add", {"loom.add"}, true, "", elementwise),
      folded("And"),
      emitted("Cast", {"loom.cast"}, true, "to: float, double, bfloat16, int64, int32, bool"),
      emitted("CastLike", {"loom.cast"}, true),
      folded("Ceil"),
      emitted("Concat", {"loom.concat"}, true, "axis"),
      folded("Constant", "value, value_float, value_int, value_ints, value_floats"),
      folded("ConstantOfShape", "value"),
      emitted("Cos", {"loom.cos"}, true),
      folded("CumSum", "exclusive, reverse"),
      emitted("Div", {"loom.div"}, true, "", elementwise),
      folded("Equal"),
      emitted("Erf", {"loom.erf"}, true, "", "0.5 x (1 + erf(x / sqrt 2)) fuses into loom.gelu (erf)"),
      emitted("Exp", {"loom.exp"}, true),
      emitted("Expand", {"loom.expand"}, true, "", "the shape input must be known"),
      folded("Floor"),
      emitted("Gather", {"loom.embedding"}, true, "axis (0 of a 2-D table for computed ids)",
              "computed ids pick rows of a table (an embedding); known values fold on any axis"),
      folded("GatherElements", "axis", "known values only (GPT-J's sin/cos table)"),
      emitted("GatherND", {"loom.slice", "loom.concat", "loom.reshape"}, true, "batch_dims = 0",
              "the indices must be known: each index tuple is a slice (Falcon's fused qkv)"),
      emitted("Gelu", {"loom.gelu"}, false, "approximate: none, tanh"),
      emitted("Gemm", {"loom.matmul", "loom.mul", "loom.add"}, false, "transA, transB, alpha, beta",
              "alpha and beta other than 1 become multiplications; a dropped zero bias comes back"),
      folded("Greater"),
      folded("GreaterOrEqual"),
      emitted("Identity", {}, true, "", "the input itself"),
      emitted("LayerNormalization", {"loom.layer_norm"}, false,
              "axis = -1, epsilon; the mean and inv-std outputs unused",
              "with or without bias; without weight it reads a ones initializer"),
      folded("Less"),
      folded("LessOrEqual"),
      emitted("Log", {"loom.log"}, true),
      emitted("MatMul", {"loom.matmul"}, true, "", "batch dims broadcast; rank >= 2 operands"),
      emitted("Max", {"loom.max"}, true, "", "one or more inputs"),
      emitted("Min", {"loom.min"}, true, "", "one or more inputs"),
      emitted("Mul", {"loom.mul"}, true, "", elementwise),
      emitted("Neg", {"loom.neg"}, true),
      folded("Not"),
      folded("Or"),
      emitted("Pow", {"loom.pow"}, true, "", "a constant exponent for the gradient"),
      folded("Range"),
      emitted("Reciprocal", {"loom.reciprocal"}, true),
      emitted("ReduceMax", {"loom.reduce"}, false, "axes (input or attribute), keepdims, noop_with_empty_axes"),
      emitted("ReduceMean", {"loom.reduce"}, false, "axes (input or attribute), keepdims, noop_with_empty_axes"),
      emitted("ReduceSum", {"loom.reduce"}, false, "axes (input or attribute), keepdims, noop_with_empty_axes"),
      emitted("Relu", {"loom.relu"}, true),
      emitted("Reshape", {"loom.reshape"}, true, "allowzero", "the shape input must be known"),
      emitted("SequenceAt", {}, false, "", "a known position into a SplitToSequence"),
      folded("Shape", "start, end", "always known: shapes are static after specialization"),
      emitted("Sigmoid", {"loom.sigmoid"}, true, "", "x sigmoid(x) fuses into loom.silu"),
      emitted("Sin", {"loom.sin"}, true),
      emitted("Slice", {"loom.slice"}, true, "", "starts, ends, axes, steps must be known"),
      emitted("Softmax", {"loom.softmax"}, false, "axis",
              "with its score matmuls, scale, causal or sliding-window mask and softcap: loom.attention"),
      emitted("Softplus", {"loom.softplus"}, true),
      emitted("Split", {"loom.split"}, true, "axis, split (input or attribute), num_outputs"),
      emitted("SplitToSequence", {"loom.split", "loom.reshape"}, false, "axis, keepdims"),
      emitted("Sqrt", {"loom.sqrt"}, true),
      emitted("Squeeze", {"loom.reshape"}, true, "axes (input or attribute)"),
      emitted("Sub", {"loom.sub"}, true, "", elementwise),
      emitted("Tanh", {"loom.tanh"}, true),
      emitted("Tile", {"loom.reshape", "loom.expand"}, true, "", "the repeats input must be known"),
      emitted("Transpose", {"loom.transpose"}, true, "perm"),
      emitted("Unsqueeze", {"loom.reshape"}, true, "axes (input or attribute)"),
      emitted("Where", {"loom.where"}, true, "", elementwise),
      folded("Xor"),
  };
  for (OnnxOpEntry &e : r) {
    if (e.op == "Gelu")
      e.sinceOpset = 20; // Gelu entered ONNX in opset 20
    if (e.op == "ReduceMax")
      e.noGradient = "`loom.reduce` max";
    if (e.op == "Softmax") // the flash kernels and cuDNN's graph are plain causal
      e.cuda = "yes (windowed or softcapped attention: loom's GEMM/chunked kernels, not flash or cuDNN)";
  }
  std::sort(r.begin(), r.end(), [](const OnnxOpEntry &a, const OnnxOpEntry &b) { return a.op < b.op; });
  return r;
}

/// Whether loom op `name` has a gradient rule (DifferentiableOpInterface).
bool differentiable(mlir::MLIRContext &ctx, const std::string &name) {
  std::optional<mlir::RegisteredOperationName> op = mlir::RegisteredOperationName::lookup(name, &ctx);
  return op && op->hasInterface<DifferentiableOpInterface>();
}

} // namespace

const std::vector<OnnxOpEntry> &onnxOpRegistry() {
  static const std::vector<OnnxOpEntry> registry = makeRegistry();
  return registry;
}

std::string checkOnnxOpRegistry(mlir::MLIRContext &ctx) {
  ctx.loadDialect<LoomDialect>();
  std::vector<std::string> ruleOps = foldingRuleOps(), emitOps = emitterOps();
  std::set<std::string> folds(ruleOps.begin(), ruleOps.end()), emits(emitOps.begin(), emitOps.end());
  folds.insert({"Shape", "Constant"}); // evaluated by the importer itself
  std::string problems;
  auto note = [&](const std::string &s) { problems += (problems.empty() ? "" : "; ") + s; };
  std::set<std::string> described;
  for (const OnnxOpEntry &e : onnxOpRegistry()) {
    described.insert(e.op);
    if (e.folds != bool(folds.count(e.op)))
      note(e.op + (e.folds ? " is said to fold but has no folding rule" : " folds but is not said to"));
    bool emitted = emits.count(e.op);
    if (!emitted && !e.loomOps.empty())
      note(e.op + " is said to become loom ops but has no emitter");
    for (const std::string &name : e.loomOps)
      if (!mlir::RegisteredOperationName::lookup(name, &ctx))
        note(e.op + " names '" + name + "', which is no loom op");
  }
  for (const std::string &op : folds)
    if (!described.count(op)) note(op + " folds but is not in the registry");
  for (const std::string &op : emits)
    if (!described.count(op)) note(op + " has an emitter but is not in the registry");
  return problems;
}

std::string onnxCoverageMarkdown(mlir::MLIRContext &ctx) {
  ctx.loadDialect<LoomDialect>();
  std::string md =
      "# ONNX operator coverage\n\n"
      "Generated by `loom import --coverage` from the importer's registry\n"
      "(`frontends/onnx/OpRegistry.cpp`, held to the folding rules and emitters by\n"
      "`test/frontends/onnx/coverage.test`); do not edit by hand.\n\n"
      "Opsets: loom imports opset 13-23 models; an op is read in the form of the\n"
      "opset named and later ones. *Folds*: a node whose inputs are all known\n"
      "(shapes, masks, rotary tables) is evaluated at import. *Becomes*: the loom ops\n"
      "a node on computed values is imported as (the fusion passes then recover\n"
      "rms_norm, layer_norm, rotary, silu, swiglu, gelu and attention from them).\n"
      "*Gradient*: every such loom op has a gradient rule (read from the ops'\n"
      "DifferentiableOpInterface). Every loom op runs on the CPU backend. Any other\n"
      "op stops the import with `unsupported op 'X' (opset N)`.\n\n"
      "| ONNX op | opsets | attributes | folds | becomes | gradient | CUDA | notes |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const OnnxOpEntry &e : onnxOpRegistry()) {
    std::string becomes, gradient;
    std::vector<std::string> noGradient;
    for (const std::string &op : e.loomOps) {
      becomes += (becomes.empty() ? "" : ", ") + ("`" + op + "`");
      if (!differentiable(ctx, op)) noGradient.push_back(op);
    }
    if (!e.noGradient.empty())
      noGradient.push_back(e.noGradient);
    if (e.loomOps.empty()) {
      becomes = e.op == "Identity" || e.op == "SequenceAt" ? "(its input)" : "-";
      gradient = e.op == "Identity" || e.op == "SequenceAt" ? "yes" : "-";
    } else if (noGradient.empty()) {
      gradient = "yes";
    } else {
      gradient = "no (";
      for (size_t i = 0; i < noGradient.size(); ++i)
        gradient += (i ? ", " : "") +
                    (noGradient[i][0] == '`' ? noGradient[i] : "`" + noGradient[i] + "`");
      gradient += ")";
    }
    std::string cuda = e.loomOps.empty() && becomes == "-" ? "-" : e.cuda;
    md += "| " + e.op + " | " + std::to_string(e.sinceOpset) + "+ | " +
          (e.attributes.empty() ? "-" : e.attributes) + " | " + (e.folds ? "yes" : "-") + " | " +
          becomes + " | " + gradient + " | " + cuda + " | " + e.notes + " |\n";
  }
  return md;
}

} // namespace loom
