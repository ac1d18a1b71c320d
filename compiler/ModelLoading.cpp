//===- ModelLoading.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/ModelLoading.h"
#include "codegen/LowerToProgram.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OpRegistry.h"
#include "loom/runtime/Artifact.h"
#include "ir/LoomOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <fstream>

namespace loom::compiler {

bool isArtifact(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::memcmp(magic, "LOOMPROG", 8) == 0;
}

bool checkTokens(mlir::ModuleOp module, const std::string &path, int64_t batch, int64_t seq,
                 std::string &err) {
  auto fwd = module.lookupSymbol<mlir::func::FuncOp>("forward");
  auto tokens = fwd && fwd.getNumArguments() >= 1
                    ? llvm::dyn_cast<mlir::RankedTensorType>(fwd.getArgument(0).getType())
                    : nullptr;
  if (!tokens || tokens.getRank() != 2 || !tokens.hasStaticShape()) {
    err = path + ": expected func @forward with static [batch, seq] tokens";
    return false;
  }
  if (tokens.getShape()[0] != batch || tokens.getShape()[1] != seq) {
    err = path + ": the model's tokens are fixed at [" + std::to_string(tokens.getShape()[0]) +
          ", " + std::to_string(tokens.getShape()[1]) + "]; it cannot be compiled at " +
          std::to_string(batch) + " rows of " + std::to_string(seq) + " tokens per rank";
    return false;
  }
  return true;
}

mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &ctx, const std::string &path,
                                              int64_t batch, int64_t seq, bool weightsAsShapes,
                                              std::string &err) {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".mlir") == 0) {
    ctx.getOrLoadDialect<LoomDialect>();
    ctx.getOrLoadDialect<mlir::func::FuncDialect>();
    std::string diag;
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      if (diag.empty()) diag = d.str();
      return mlir::success();
    });
    module = mlir::parseSourceFile<mlir::ModuleOp>(path, &ctx);
    if (!module) {
      err = path + ": " + (diag.empty() ? "cannot parse" : diag);
      return nullptr;
    }
  } else {
    OnnxImportOptions opts{batch, seq};
    opts.weightsAsShapes = weightsAsShapes;
    module = importOnnxModel(ctx, path, opts, err);
    if (!module)
      return nullptr;
  }
  if (!checkTokens(*module, path, batch, seq, err))
    return nullptr;
  return module;
}

bool printImportedModel(const std::string &path, int64_t batch, int64_t seq, bool shapesOnly,
                        bool fuse, int64_t elideLargerThan, std::string &ir, std::string &err) {
  mlir::MLIRContext ctx;
  OnnxImportOptions opts{batch, seq};
  opts.weightsAsShapes = shapesOnly;
  auto module = importOnnxModel(ctx, path, opts, err);
  if (!module)
    return false;
  if (fuse) {
    mlir::PassManager pm(&ctx);
    buildFusionPipeline(pm);
    if (mlir::failed(pm.run(*module))) {
      err = "fusion pipeline failed";
      return false;
    }
  }
  mlir::OpPrintingFlags flags;
  flags.elideLargeElementsAttrs(elideLargerThan);
  llvm::raw_string_ostream os(ir);
  module->print(os, flags);
  os << "\n";
  return true;
}

bool onnxCoverage(std::string &markdown, std::string &err) {
  mlir::MLIRContext ctx;
  if (std::string drift = checkOnnxOpRegistry(ctx); !drift.empty()) {
    err = "the ONNX op registry does not match the importer: " + drift;
    return false;
  }
  markdown = onnxCoverageMarkdown(ctx);
  return true;
}

bool runPipeline(mlir::ModuleOp module, const std::string &path, const std::string &what,
                 const std::function<void(mlir::PassManager &)> &addPasses, std::string &err) {
  mlir::MLIRContext *ctx = module.getContext();
  std::string diag;
  mlir::ScopedDiagnosticHandler handler(ctx, [&](mlir::Diagnostic &d) {
    if (diag.empty()) diag = d.str();
    return mlir::success();
  });
  mlir::PassManager pm(ctx);
  addPasses(pm);
  if (mlir::failed(pm.run(module))) {
    err = path + ": " + what + " failed: " + diag;
    return false;
  }
  return true;
}

bool compileOnnx(const std::string &path, int64_t batch, int64_t seq,
                 rt::Program &program, std::string &err) {
  mlir::MLIRContext ctx;
  auto module = importOnnxModel(ctx, path, OnnxImportOptions{batch, seq}, err);
  if (!module)
    return false;
  if (!runPipeline(*module, path, "fusion pipeline",
                   [](mlir::PassManager &pm) { buildFusionPipeline(pm); }, err))
    return false;
  auto func = module->lookupSymbol<mlir::func::FuncOp>("forward");
  if (!lowerToProgram(func, program, err)) {
    err = path + ": " + err;
    return false;
  }
  return true;
}

bool loadProgram(const std::string &path, int64_t batch, int64_t seq,
                 rt::Program &program, std::string &err) {
  if (isArtifact(path))
    return rt::readArtifact(path, program, err);
  return compileOnnx(path, batch, seq, program, err);
}

} // namespace loom::compiler
