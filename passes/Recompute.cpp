//===- Recompute.cpp - Activation checkpointing as a compiler pass --------===//
//
// Part of loom, under the Apache License v2.0.
//
// Picks the values the backward rebuilds (RecomputeAnalysis) and rewrites
// the step. The memory-budget policy measures its choices on the buffer
// plan codegen makes of the rewritten step (a copy of @train_step per
// probe), so "fits" means what the backend will allocate, not an estimate.
//===----------------------------------------------------------------------===//
#include "codegen/LowerToProgram.h"
#include "loom/runtime/Executor.h"
#include "passes/Passes.h"
#include "passes/Recompute.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/ScopeExit.h"

#include <cstdio>

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g GiB", bytes / kGiB);
  return buf;
}

struct RecomputePass : impl::RecomputeBase<RecomputePass> {
  using Base::Base;

  /// Device bytes of the step with `rebuilt` recomputed: codegen's arena,
  /// the constant blob, and what the backend allocates besides (scratch,
  /// GEMM workspace, collective staging), as `loom train` reports it.
  FailureOr<uint64_t> footprint(func::FuncOp step, const llvm::DenseSet<Value> &rebuilt) {
    IRMapping map;
    func::FuncOp probe = step.clone(map);
    probe.setSymName((step.getSymName() + ".recompute_probe").str());
    getOperation().getBody()->push_back(probe);
    llvm::scope_exit erase([&] { probe.erase(); });
    FailureOr<RecomputeAnalysis> a = RecomputeAnalysis::analyze(probe);
    if (failed(a))
      return failure();
    llvm::DenseSet<Value> mapped;
    for (Value v : rebuilt) mapped.insert(map.lookup(v));
    a->apply(mapped);
    rt::Program program;
    std::string err;
    if (!lowerToProgram(probe, program, err))
      return step.emitError("loom-recompute: measuring the buffer plan: ") << err, failure();
    return std::max<uint64_t>(program.arenaBytes, 1) + program.constants.size() +
           rt::backendWorkspaceBytes(program, backend) +
           rt::backendCommunicationBytes(program, backend);
  }

  /// The shortest prefix of the greedy moves whose step fits the budget.
  FailureOr<llvm::DenseSet<Value>> chooseForBudget(func::FuncOp step, const RecomputeAnalysis &a) {
    if (!(memoryBudgetGiB > 0))
      return step.emitError("loom-recompute: the budget policy needs memory-budget > 0 (GiB)"),
             failure();
    if (backend != "cpu" && backend != "cuda")
      return step.emitError("loom-recompute: unknown backend '") << backend << "' (cpu, cuda)",
             failure();
    double budget = memoryBudgetGiB * kGiB;
    std::vector<llvm::SmallVector<Value>> moves = a.budgetMoves(every);
    auto prefix = [&](size_t k) {
      llvm::DenseSet<Value> r;
      for (size_t i = 0; i < k; ++i) r.insert(moves[i].begin(), moves[i].end());
      return r;
    };
    FailureOr<uint64_t> none = footprint(step, {});
    if (failed(none))
      return failure();
    if (double(*none) <= budget) {
      step.emitRemark("loom-recompute: a memory budget of ")
          << gib(budget) << " holds the step without recompute (" << gib(double(*none)) << ")";
      return llvm::DenseSet<Value>();
    }
    FailureOr<uint64_t> least = footprint(step, prefix(moves.size()));
    if (failed(least))
      return failure();
    if (double(*least) > budget)
      return step.emitError("loom-recompute: a memory budget of ")
                 << gib(budget) << " is below the smallest footprint of this step, "
                 << gib(double(*least)) << " (every " << (every > 1 ? "checkpointed " : "")
                 << "layer recomputed from its input; " << gib(double(*none))
                 << " without recompute)",
             failure();
    // Invariant: prefix(lo) does not fit, prefix(hi) does.
    size_t lo = 0, hi = moves.size();
    uint64_t fits = *least;
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      FailureOr<uint64_t> m = footprint(step, prefix(mid));
      if (failed(m))
        return failure();
      if (double(*m) <= budget)
        hi = mid, fits = *m;
      else
        lo = mid;
    }
    step.emitRemark("loom-recompute: a memory budget of ")
        << gib(budget) << " holds the step at " << gib(double(fits)) << " after " << hi << " of "
        << moves.size() << " recompute moves (" << gib(double(*none)) << " without recompute, "
        << gib(double(*least)) << " with every layer recomputed)";
    return prefix(hi);
  }

  void runOnOperation() override {
    if (policy == RecomputePolicy::none)
      return;
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError("loom-recompute: no @train_step (run loom-build-train-step first)");
      return signalPassFailure();
    }
    if (every < 1) {
      step.emitError("loom-recompute: every must be at least 1, not ") << int64_t(every);
      return signalPassFailure();
    }
    FailureOr<RecomputeAnalysis> a = RecomputeAnalysis::analyze(step);
    if (failed(a))
      return signalPassFailure();
    if (a->numLayers() == 0) {
      step.emitError("loom-recompute: no transformer layers: no parameter name carries a layer "
                     "index (model.layers.N..., transformer.h.N...)");
      return signalPassFailure();
    }
    llvm::DenseSet<Value> rebuilt;
    switch (policy) {
    case RecomputePolicy::none:
      return;
    case RecomputePolicy::full: {
      llvm::SetVector<Value> s = a->fullSet(every);
      rebuilt.insert(s.begin(), s.end());
      break;
    }
    case RecomputePolicy::selective: {
      llvm::SetVector<Value> s = a->selectiveSet(every);
      rebuilt.insert(s.begin(), s.end());
      break;
    }
    case RecomputePolicy::budget: {
      FailureOr<llvm::DenseSet<Value>> chosen = chooseForBudget(step, *a);
      if (failed(chosen))
        return signalPassFailure();
      rebuilt = std::move(*chosen);
      break;
    }
    }
    a->apply(rebuilt);
  }
};

} // namespace
} // namespace loom
