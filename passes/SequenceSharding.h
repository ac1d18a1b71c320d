//===- SequenceSharding.h - Following the sequence dim through @forward -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Context parallelism (cp) and Megatron's sequence parallelism (tp) both
// cut activations along the sequence. They share this engine: from seed
// values whose sequence dim is known (the token ids, a reduce_scatter's
// result), follow every reader and work out which dim of each result holds
// the sequence; then give every value of that region its local type (the
// sequence dim divided by the ranks), slice the position tables it meets
// (rotary cos/sin, position ids: "foreign" operands with the full sequence)
// and mark the parameters it reads, whose gradients are now partial sums
// over the ranks.
//
// A dim "holds the sequence" when the sequence positions are its innermost
// factor: [B, T, D] holds it in dim 1, the flattened [B T, D] in dim 0
// (each rank keeps rows (b, t) for its own t, so row-local ops such as
// matmuls by weights, norms and bias adds need no change). Anything that
// mixes positions (attention, a reduction over the sequence, a reshape
// moving positions into features) is either a rule of the caller
// (attention under cp) or an error naming the op.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_SEQUENCESHARDING_H
#define LOOM_PASSES_SEQUENCESHARDING_H

#include "ir/Sharding.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

#include <functional>

namespace loom {

/// What one propagation found.
struct SequenceRegion {
  llvm::MapVector<mlir::Value, int64_t> dims;      // value -> its sequence dim
  llvm::SmallVector<std::pair<mlir::OpOperand *, int64_t>> slices; // full-length tables, their dim
  llvm::SmallVector<mlir::OpOperand *> partialUses; // parameters (or their casts) read per row
  llvm::SmallVector<AttentionOp> attentions;        // attention reached (q, k, v in the region)
  bool reachesReturn = false;                       // the logits are in the region
};

/// Follows the sequence dim of `seeds` (value, dim) through their readers,
/// in a function whose sequence length is `seqLen`. `stop(use)` says that a
/// use leaves the region (its owner is not followed). Attention is followed
/// (its results hold the sequence in dim 2) when `allowAttention`, else it
/// is an error. Fails after an error naming the op that cannot be split.
mlir::LogicalResult followSequence(mlir::func::FuncOp f, int64_t seqLen,
                                   llvm::ArrayRef<std::pair<mlir::Value, int64_t>> seeds,
                                   const std::function<bool(mlir::OpOperand &)> &stop,
                                   bool allowAttention, llvm::StringRef why,
                                   SequenceRegion &out);

/// Values that depend on a parameter constant (what autodiff differentiates).
llvm::DenseSet<mlir::Value> activeValues(mlir::func::FuncOp f);

/// Applies a region: every value takes its local type (sequence dim / n);
/// each full-length table operand is replaced by slice(table, dim) (one
/// per distinct table and dim); each parameter operand read per row is
/// wrapped in copy_to_parallel over `axes` (one per distinct value), whose
/// gradient sums the ranks' shares. The function type is refreshed.
void applySequenceRegion(mlir::func::FuncOp f, SequenceRegion &region, int64_t n,
                         mlir::ArrayAttr axes,
                         const std::function<mlir::Value(mlir::OpBuilder &, mlir::Value,
                                                         int64_t)> &slice);

/// `x` [..., n_d = f T, ...] with the sequence innermost in dim d, as [...,
/// f, T, ...] (a view), so that a collective can cut or join T alone; and
/// back. Identity when f = 1.
mlir::Value splitSequenceDim(mlir::OpBuilder &b, mlir::Value x, int64_t d, int64_t seqLen);
mlir::Value mergeSequenceDim(mlir::OpBuilder &b, mlir::Value x, int64_t d, int64_t outer);

/// Replaces every copy_to_parallel in `f` by its input: the identity once
/// autodiff has used its gradient rule, and a copy of a parameter per
/// step if codegen saw it.
void dropCopiesToParallel(mlir::func::FuncOp f);

/// Appends `p` to the `loom.sharding` of result `r` of `f` (or argument
/// `r` when `argument`).
void addSharding(mlir::func::FuncOp f, unsigned r, bool argument, PlacementAttr p);

} // namespace loom

#endif
