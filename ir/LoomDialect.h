//===- LoomDialect.h - The loom dialect -------------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_LOOMDIALECT_H
#define LOOM_IR_LOOMDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ir/LoomDialect.h.inc"

#endif
