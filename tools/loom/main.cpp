//===- main.cpp - The loom driver -----------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <malloc.h>
#include <string>

static void usage() {
  std::printf(
      "loom: plan, compile and run training of decoder language models\n\n"
      "USAGE: loom COMMAND [OPTIONS]\n\n"
      "COMMANDS:\n"
      "  import   MODEL.onnx            print the model as loom IR\n"
      "  compile  MODEL.onnx -o ART     compile to a runtime artifact\n"
      "  eval     MODEL.onnx|ART        run the forward pass: logits and loss\n"
      "  plan     MODEL.onnx --gpus N   rank parallelism plans: memory, step time, MFU\n"
      "  train    MODEL.onnx --data F   train: forward, backward, AdamW, checkpoints\n"
      "  calibrate -o PROFILE.json      measure this GPU through loom's runtime\n"
      "  verify   MODEL.onnx --plans .. train under each plan, compare with the first\n"
      "  schedule --pp P --microbatches M  a pipeline schedule: check, table, SVG\n\n"
      "Run 'loom COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
  // Large temporaries (the importer folds a long sequence's causal mask
  // through several T x T tensors) come from the heap and are reused once
  // freed, instead of being mapped, zeroed page by page by the kernel and
  // unmapped each time: at T = 8192 that zeroing was most of `loom plan`.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "import") return loom::tools::runImport(argc, argv);
  if (cmd == "compile") return loom::tools::runCompile(argc, argv);
  if (cmd == "eval") return loom::tools::runEval(argc, argv);
  if (cmd == "plan") return loom::tools::runPlan(argc, argv);
  if (cmd == "train") return loom::tools::runTrain(argc, argv);
  if (cmd == "calibrate") return loom::tools::runCalibrate(argc, argv);
  if (cmd == "verify") return loom::tools::runVerify(argc, argv);
  if (cmd == "schedule") return loom::tools::runSchedule(argc, argv);
  std::fprintf(stderr, "loom: error: unknown command '%s' (see loom --help)\n", cmd.c_str());
  return 1;
}
