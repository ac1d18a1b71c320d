//===- CompileCommand.cpp - `loom compile` --------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "compiler/CompileTrainStep.h"
#include "compiler/ModelLoading.h"
#include "loom/runtime/Artifact.h"

#include <cstdio>

namespace loom::tools {
using namespace compiler;
using namespace train;

int runCompile(int argc, char **argv) {
  Args args("compile", "MODEL.onnx --batch B --seq T -o ARTIFACT");
  args.flag("batch", "batch size (specializes a dynamic batch dim)");
  args.flag("seq", "sequence length (specializes a dynamic sequence dim)");
  args.flag("o", "output artifact path (written atomically)");
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  if (args.positional().size() != 1)
    return fail("compile", "expected one model file (see loom compile --help)");
  if (!args.has("o"))
    return fail("compile", "missing -o ARTIFACT");
  rt::Program program;
  std::string err;
  if (!compileOnnx(args.positional()[0], args.getInt("batch"), args.getInt("seq"),
                   program, err))
    return fail("compile", err);
  if (!rt::writeArtifact(program, args.get("o"), err))
    return fail("compile", err);
  std::printf("wrote %s: %zu buffers, %zu instructions, arena %.2f MiB, constants %.2f MiB\n",
              args.get("o").c_str(), program.buffers.size(), program.instrs.size(),
              program.arenaBytes / 1048576.0, program.constants.size() / 1048576.0);
  return 0;
}

} // namespace loom::tools
