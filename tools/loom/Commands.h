//===- Commands.h - loom driver subcommands ---------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_COMMANDS_H
#define LOOM_TOOLS_COMMANDS_H

namespace loom::tools {
int runImport(int argc, char **argv);
int runCompile(int argc, char **argv);
int runEval(int argc, char **argv);
int runTrain(int argc, char **argv);
int runVerify(int argc, char **argv);
int runPlan(int argc, char **argv);
int runCalibrate(int argc, char **argv);
int runSchedule(int argc, char **argv);
} // namespace loom::tools

#endif
