//===- loom-opt.cpp - The loom optimizer driver ---------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// mlir-opt with the loom dialect and every loom pass registered: what the
// lit tests drive.
//===----------------------------------------------------------------------===//
#include "ir/LoomDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  loom::registerAllLoomPasses();
  mlir::DialectRegistry registry;
  registry.insert<loom::LoomDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "loom optimizer driver\n", registry));
}
