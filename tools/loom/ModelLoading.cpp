//===- ModelLoading.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ModelLoading.h"
#include "codegen/LowerToProgram.h"
#include "frontends/onnx/OnnxImporter.h"
#include "loom/runtime/Artifact.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <cstring>
#include <fstream>

namespace loom::tools {

bool isArtifact(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::memcmp(magic, "LOOMPROG", 8) == 0;
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

} // namespace loom::tools
