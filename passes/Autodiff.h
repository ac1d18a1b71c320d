//===- Autodiff.h - Reverse-mode differentiation of loom ops ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The core of BuildTrainStep, reusable on any straight-line list of ops
// (the gradient-check tests drive it on small f64 functions).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_AUTODIFF_H
#define LOOM_PASSES_AUTODIFF_H

#include "ir/LoomOps.h"

#include "llvm/ADT/DenseMap.h"

namespace loom {

/// Appends, at `b`'s insertion point, the vector-Jacobian products of `ops`
/// (in program order) for the output `y` seeded with `seed` (dL/dy), with
/// respect to the values in `wrt`. Only ops reachable from `wrt` are
/// differentiated; each calls its DifferentiableOpInterface rule, and
/// gradients of a value used more than once add up. On return `grads` maps
/// every reached value (including each of `wrt` that influences `y`) to its
/// gradient. Fails, with an error on the op, when an op on the path has no
/// rule.
mlir::LogicalResult buildReverseMode(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Operation *> ops,
                                     llvm::ArrayRef<mlir::Value> wrt, mlir::Value y,
                                     mlir::Value seed,
                                     llvm::DenseMap<mlir::Value, mlir::Value> &grads);

} // namespace loom

#endif
