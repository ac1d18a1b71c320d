//===- FuzzOnnxImport.cpp - The ONNX importer under libFuzzer -------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Any bytes, as a binary model or (when they look like text) the protobuf
// text format the lit tests use: import must give a module that verifies,
// or a one-line error. Dynamic dims are specialized to batch 2, seq 8.
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "frontends/onnx/OnnxImporter.h"
#include "ir/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cctype>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bool text = size > 0 && (std::isalpha(data[0]) || data[0] == '#');
  std::string path = loom::fuzz::writeInput(data, size, text ? "m.onnxtxt" : "m.onnx");
  static mlir::MLIRContext *ctx = [] {
    auto *c = new mlir::MLIRContext();
    c->loadDialect<loom::LoomDialect, mlir::func::FuncDialect>();
    c->printOpOnDiagnostic(false);
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) { return mlir::success(); });
    return c;
  }();
  loom::OnnxImportOptions opts;
  opts.batch = 2;
  opts.seq = 8;
  std::string err;
  mlir::OwningOpRef<mlir::ModuleOp> m = loom::importOnnxModel(*ctx, path, opts, err);
  if (m && mlir::failed(mlir::verify(*m)))
    __builtin_trap(); // an imported module must verify
  if (!m && (err.empty() || err.find('\n') != std::string::npos))
    __builtin_trap(); // errors are one line
  return 0;
}
