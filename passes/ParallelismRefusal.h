//===- ParallelismRefusal.h - Why a model refused sp or the vocab-parallel loss -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// With tp, sequence parallelism and the vocabulary-parallel loss are on
// by default, and a model whose attention or head tp cannot split refuses
// them (loom-shard-sequence-parallel, loom-shard-vocab-parallel). The
// compiler then builds the step again without the refused one. What it
// goes by is this typed record, filled by the pass that refused, not the
// text of the error: a refusal is a failure the pass attributes to the
// model's fit for its feature, an internal error (a pass run out of
// order, a malformed @forward) is not one.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_PARALLELISMREFUSAL_H
#define LOOM_PASSES_PARALLELISMREFUSAL_H

#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"

#include <memory>
#include <string>

namespace loom {

enum class RefusedParallelism {
  None,
  Sequence, // tp_sp: sequence parallelism
  Loss,     // loss_parallel: the vocabulary-parallel embedding, head and loss
};

struct ParallelismRefusal {
  RefusedParallelism feature = RefusedParallelism::None;
  std::string reason; // the refusing pass's error, e.g. "sequence parallelism: ..."
};

/// In a pass's runOnOperation: remembers the first error emitted while it
/// lives, so that the pass, on failing for its feature's sake, can record
/// that error (its own, or one a shared helper such as followSequence
/// emitted) as the reason. Errors still reach the other handlers.
class RefusalRecorder {
public:
  RefusalRecorder(mlir::MLIRContext *ctx, ParallelismRefusal *out, RefusedParallelism feature)
      : out_(out), feature_(feature),
        handler_(ctx, [this](mlir::Diagnostic &d) {
          if (d.getSeverity() == mlir::DiagnosticSeverity::Error && first_.empty())
            first_ = d.str();
          return mlir::failure(); // not handled: it is reported as before
        }) {}

  /// The pass fails because the model cannot take the feature.
  void refused() {
    if (out_ && out_->feature == RefusedParallelism::None) {
      out_->feature = feature_;
      out_->reason = first_;
    }
  }

private:
  ParallelismRefusal *out_;
  RefusedParallelism feature_;
  std::string first_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// The passes, recording a refusal into `refusal` (may be null).
std::unique_ptr<mlir::Pass> createShardSequenceParallel(const ShardSequenceParallelOptions &o,
                                                        ParallelismRefusal *refusal);
std::unique_ptr<mlir::Pass> createShardVocabParallel(const ShardVocabParallelOptions &o,
                                                     ParallelismRefusal *refusal);

} // namespace loom

#endif
