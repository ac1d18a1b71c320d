//===- Recompute.h - Activation checkpointing on the training step -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The forward values of @train_step that the backward reads are what a
// training step keeps in memory between its two passes. The recompute pass
// (loom-recompute) lets the backward rebuild some of them instead: each
// dropped value is recomputed by clones of the forward ops that made it,
// from values that are kept, placed right before the first backward op
// that reads it, so the forward's copy dies as soon as the forward is done
// with it and the clone lives only through the part of the backward that
// reads it. The clones are the same ops on the same operands, lowered to
// the same kernels, so the step computes the same bits.
//
// This file is the analysis shared by the pass and the planner: which
// transformer layer every forward value belongs to (from the parameter
// names, as the planner reads them), which values a policy lets the
// backward rebuild, what that keeps and re-runs, and the greedy order in
// which the memory-budget policy drops values.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_RECOMPUTE_H
#define LOOM_PASSES_RECOMPUTE_H

#include "ir/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <optional>
#include <string>
#include <vector>

namespace loom {

/// What the pass keeps of each checkpointed transformer layer.
enum class RecomputePolicy {
  none,      // everything the backward reads (no recompute)
  full,      // only the layer's input; the backward re-runs its forward
  selective, // torchtitan's op-level save list: every other matmul output,
             // attention's output and logsumexp; the rest is recomputed
  budget,    // what fits a memory budget at the least recompute time
};

const char *recomputePolicyName(RecomputePolicy p);
std::optional<RecomputePolicy> parseRecomputePolicy(llvm::StringRef s);

/// Unit attribute on every op the pass cloned into the backward.
inline constexpr llvm::StringLiteral kRecomputedAttrName = "loom.recomputed";
/// Unit attribute on every forward op a result of which the rewritten step
/// keeps for the backward (read by a backward op or a clone): what the
/// policy keeps, visible in the IR.
inline constexpr llvm::StringLiteral kSavedAttrName = "loom.saved";

/// The layer of values outside every transformer layer before them (token
/// and position embeddings); the head (final norm, LM head, loss) is layer
/// numLayers().
inline constexpr int kEmbeddingGroup = -1;

class RecomputeAnalysis {
public:
  /// Reads @train_step (BuildTrainStep's output, after any SPMD and
  /// cleanup passes). Fails, with an error on `step`, when it has no loss
  /// or no backward.
  static mlir::FailureOr<RecomputeAnalysis> analyze(mlir::func::FuncOp step);

  mlir::func::FuncOp step() const { return fn; }
  int numLayers() const { return layers; }
  /// Layers a policy applies to: the every-th, 2·every-th, ... (1-based,
  /// as torchtitan counts its ac_freq), so every=1 is all of them.
  bool checkpointed(int layer, int64_t every) const {
    return layer >= 0 && layer < layers && (layer + 1) % every == 0;
  }

  /// Layer of a value: its defining op's, the highest layer among that
  /// op's operands (parameters from their names; the embedding table and
  /// position table in kEmbeddingGroup, other unnumbered parameters in the
  /// head). Arguments that are not parameters and constants: the embedding
  /// group.
  int layerOf(mlir::Value v) const;
  /// A result of a forward op (at or before the loss), not a constant.
  bool isForwardValue(mlir::Value v) const;
  /// An op at or after the backward's first op (cross_entropy_grad, or
  /// vocab_shard_cross_entropy_grad under loss parallelism).
  bool isBackwardOp(mlir::Operation *op) const;

  /// Values the backward may rebuild under a policy, in checkpointed layers.
  /// full: everything but the layer's boundary (the values another layer
  /// reads: its input from the previous layer, its output to the next).
  /// selective: also not the save list (see RecomputePolicy).
  llvm::SetVector<mlir::Value> fullSet(int64_t every) const;
  llvm::SetVector<mlir::Value> selectiveSet(int64_t every) const;

  /// The budget policy's candidates in the order it drops them: greedy by
  /// memory saved per second of recompute (the H100 profile's peak and HBM
  /// bandwidth, planner/profiles/h100.json), one move (a value with the
  /// cheap ops behind it, or through one or two GEMMs) of one layer at a
  /// time, re-scored in that layer after each move; the last move drops
  /// what is left, so the prefix of all moves is fullSet(every).
  std::vector<llvm::SmallVector<mlir::Value>> budgetMoves(int64_t every) const;

  /// What rebuilding `rebuilt` means, without changing the IR.
  struct Outcome {
    /// Forward values that stay live into the backward (read by backward
    /// ops, or by the clones), in program order.
    std::vector<mlir::Value> kept;
    /// Forward ops the backward re-runs, in program order.
    std::vector<mlir::Operation *> recomputed;
    double recomputeSeconds = 0; // estimated, H100 profile
    double recomputeFlops = 0;   // GEMM and attention FLOPs re-run
  };
  Outcome simulate(const llvm::DenseSet<mlir::Value> &rebuilt) const;

  /// Rewrites the step: every backward read of a value in `rebuilt` reads a
  /// clone instead, cloned (with its own operands in `rebuilt`, once each)
  /// right before the first backward op that needs it. An FSDP parameter
  /// gather the clones read is the backward's own gather of that parameter
  /// (moved up to the first clone), so the forward's gathered copy still
  /// dies after the forward. Marks the forward ops whose results the
  /// backward still reads (kSavedAttrName). Invalidates this analysis.
  void apply(const llvm::DenseSet<mlir::Value> &rebuilt);

  /// "matmul q_proj", "attention", "rms_norm input_layernorm", ...: the op
  /// and the module of the parameter it reads, for reports.
  std::string describe(mlir::Operation *op) const;
  /// A kept tensor for reports: the op that computed it, seen through
  /// autocast's casts and reshapes ("rotary", "matmul gate_proj", "weight
  /// q_proj" for a parameter in another form).
  std::string describeValue(mlir::Value v) const;
  /// Bytes a value holds on the device (a reshape or a widening cast of a
  /// bf16 tensor is its source's bytes: codegen makes it a view or folds it).
  uint64_t storageBytes(mlir::Value v) const;
  /// The tensor whose bytes hold `v` (through reshapes and widening casts).
  mlir::Value storageRoot(mlir::Value v) const;

private:
  RecomputeAnalysis() = default;
  bool isBoundary(mlir::Value v) const;
  bool isCandidate(mlir::Value v, int64_t every) const;
  /// A parameter in another form through casts and reshapes only (the
  /// bf16 weight a GEMM reads, and its widening): never rebuilt.
  bool isWeightForm(mlir::Value v) const;
  llvm::SmallVector<mlir::Value> savePoints(mlir::Operation *matmulOrAttention) const;
  /// Estimated time of re-running `op` (the H100 profile; see budgetMoves).
  double seconds(mlir::Operation *op) const;

  mlir::func::FuncOp fn;
  int layers = 0;
  std::vector<mlir::Operation *> ops; // the body, in order (no terminator)
  llvm::DenseMap<mlir::Operation *, int> position;
  int lossAt = -1, backwardAt = -1;
  llvm::DenseMap<mlir::Value, int> paramLayer;
  llvm::DenseMap<mlir::Operation *, int> opLayer;
  llvm::DenseMap<mlir::Value, std::string> paramModule; // "q_proj" of ...q_proj.weight
};

} // namespace loom

#endif
