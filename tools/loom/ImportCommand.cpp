//===- ImportCommand.cpp - `loom import` ----------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "compiler/ModelLoading.h"

#include <cstdio>

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
  std::string text, err;
  if (args.has("coverage") && args.get("coverage") == "1") {
    if (!compiler::onnxCoverage(text, err))
      return fail("import", err);
  } else if (args.positional().size() != 1) {
    return fail("import", "expected one model file (see loom import --help)");
  } else if (!compiler::printImportedModel(
                 args.positional()[0], args.getInt("batch"), args.getInt("seq"),
                 args.has("shapes-only") && args.get("shapes-only") == "1",
                 args.has("fuse") && args.get("fuse") == "1",
                 args.getInt("elide-constants-larger-than"), text, err)) {
    return fail("import", err);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

} // namespace loom::tools
