//===- LinkCheck.cpp - The training runtime links on its own --------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Built only by scripts/check-layering.sh (-DLOOM_ENABLE_COMPILER=OFF):
// takes the address of each part of the training runtime's interface, so
// the link pulls in every object file of LoomTrain and LoomRuntime, and
// fails should any of them need MLIR, LLVM or the compiler's libraries.
//===----------------------------------------------------------------------===//
#include "loom/runtime/Artifact.h"
#include "loom/train/Checkpoint.h"
#include "loom/train/Forward.h"
#include "loom/train/Launcher.h"
#include "loom/train/PipelineRunner.h"
#include "loom/train/PlanComparison.h"
#include "loom/train/TrainJob.h"
#include "loom/train/WeightFiles.h"

#include <cstdio>

int main() {
  using namespace loom;
  // Volatile: the compiler may not fold the addresses away, so the linker
  // must resolve every one of them.
  const void *volatile parts[] = {
      reinterpret_cast<const void *>(&train::StepRunner::create),
      reinterpret_cast<const void *>(&train::StepRunner::createDistributed),
      reinterpret_cast<const void *>(&train::createPipelineRunner),
      reinterpret_cast<const void *>(&train::runTrainLoop),
      reinterpret_cast<const void *>(&train::restoreTrainState),
      reinterpret_cast<const void *>(&train::saveCheckpoint),
      reinterpret_cast<const void *>(&train::loadInitWeights),
      reinterpret_cast<const void *>(&train::launchLocalRanks),
      reinterpret_cast<const void *>(&train::runPlan),
      reinterpret_cast<const void *>(&train::runForward),
      reinterpret_cast<const void *>(&rt::readArtifact),
  };
  int resolved = 0;
  for (const void *p : parts)
    resolved += p != nullptr;
  std::printf("loom-train-link-check: %d parts of the training runtime linked without the compiler\n",
              resolved);
  return resolved == int(sizeof parts / sizeof parts[0]) ? 0 : 1;
}
