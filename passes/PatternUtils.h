//===- PatternUtils.h - Matching helpers for the fusion passes --*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_PATTERNUTILS_H
#define LOOM_PASSES_PATTERNUTILS_H

#include "ir/LoomOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <optional>

namespace loom {

/// The value of a constant whose elements are all equal (any shape).
std::optional<double> splatValue(mlir::Value v);

/// Whether `v` is a constant equal to `expected` within `tol` relative.
bool isConstantNear(mlir::Value v, double expected, double tol = 1e-6);

/// For a commutative binary op, tries (lhs, rhs) then (rhs, lhs): calls
/// `match(first, second)` and returns true on the first success.
template <typename OpTy, typename Fn>
bool matchEitherOrder(OpTy op, Fn &&match) {
  return match(op.getLhs(), op.getRhs()) || match(op.getRhs(), op.getLhs());
}

/// `v` as `x * c` (either order) with c a scalar constant near `c`; sets x.
bool matchMulByConstant(mlir::Value v, double c, mlir::Value &x);

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}

/// `t` with dim `d` divided by `n`: the local type of a shard.
mlir::RankedTensorType shardType(mlir::RankedTensorType t, int64_t d, int64_t n);

/// Rank 0's slice of parameter constant `c` (rank <= 2) split along `d`
/// into `n` parts (in `blocks` equal blocks, each split on its own), as
/// the local constant's value; the driver supplies every rank's own slice.
mlir::DenseElementsAttr firstShardOf(ConstantOp c, int64_t d, int64_t n, int64_t blocks = 1);

/// Whether `add` sums two operands of its own type, f32 or f64 (not bf16,
/// not a broadcast): the gradient sums that the accumulate fusions fold
/// into the kernel making one of the operands.
bool isSameTypeWideSum(AddOp add);

/// `v` is defined before `op` in op's block, or is one of the block's
/// arguments: an operand `op` could read where it stands.
bool availableAt(mlir::Value v, mlir::Operation *op);

/// The gradient-sum fusions' shared walk (loom-fuse-norm-grad-accumulate,
/// loom-fuse-embedding-grad-accumulate): for each add of f's one block that
/// isSameTypeWideSum, where producerOf accepts one operand (returning the op
/// that makes it, or null) and the other operand is available where that op
/// stands, fold(op, other) makes the other operand the op's addend; the add's
/// readers then read the accepted operand and the add is erased. The add's
/// right operand is tried as the product first.
void foldAddsIntoProducers(mlir::func::FuncOp f,
                           llvm::function_ref<mlir::Operation *(mlir::Value)> producerOf,
                           llvm::function_ref<void(mlir::Operation *, mlir::Value)> fold);

/// Greedy rewriting for loom: constants are not merged by value, because
/// two equal initializers can be different parameters (every all-ones norm
/// weight starts equal) and must stay apart to be trained apart.
mlir::GreedyRewriteConfig rewriteConfig();

} // namespace loom

#endif
