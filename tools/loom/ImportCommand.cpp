//===- ImportCommand.cpp - `loom import` ----------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OpRegistry.h"
#include "passes/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

namespace loom::tools {

int runImport(int argc, char **argv) {
  Args args("import", "MODEL.onnx [--batch B --seq T] [--fuse]");
  args.flag("batch", "batch size for a dynamic batch dim");
  args.flag("seq", "sequence length for a dynamic sequence dim");
  args.flag("fuse", "run the fusion pipeline before printing", true);
  args.flag("shapes-only", "weights become zero splats, never read (graph-only exports); "
                           "bf16 becomes f32: the IR loom plan costs", true);
  args.flag("elide-constants-larger-than", "print constants with more elements as <elided>", false, "16");
  args.flag("coverage", "print the ONNX operators the importer handles (docs/onnx-coverage.md) "
                        "and exit", true);
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  if (args.has("coverage") && args.get("coverage") == "1") {
    mlir::MLIRContext ctx;
    if (std::string drift = checkOnnxOpRegistry(ctx); !drift.empty())
      return fail("import", "the ONNX op registry does not match the importer: " + drift);
    llvm::outs() << onnxCoverageMarkdown(ctx);
    return 0;
  }
  if (args.positional().size() != 1)
    return fail("import", "expected one model file (see loom import --help)");
  mlir::MLIRContext ctx;
  OnnxImportOptions opts{args.getInt("batch"), args.getInt("seq")};
  opts.weightsAsShapes = args.has("shapes-only") && args.get("shapes-only") == "1";
  std::string err;
  auto module = importOnnxModel(ctx, args.positional()[0], opts, err);
  if (!module)
    return fail("import", err);
  if (args.has("fuse") && args.get("fuse") == "1") {
    mlir::PassManager pm(&ctx);
    buildFusionPipeline(pm);
    if (mlir::failed(pm.run(*module)))
      return fail("import", "fusion pipeline failed");
  }
  mlir::OpPrintingFlags flags;
  flags.elideLargeElementsAttrs(args.getInt("elide-constants-larger-than"));
  module->print(llvm::outs(), flags);
  llvm::outs() << "\n";
  return 0;
}

} // namespace loom::tools
