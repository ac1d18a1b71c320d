//===- SplitPipelineStages.cpp - Stage boundaries at layer boundaries -----===//
//
// Part of loom, under the Apache License v2.0.
//
// The first half of pipeline parallelism: decide which stage computes each
// op of @forward and mark the values that cross from one stage to the next.
// The model stays one function (autodiff and the SPMD passes still see the
// whole step); loom-split-pipeline cuts it at the marks later.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/PatternUtils.h"
#include "planner/ShardingRules.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_SPLITPIPELINESTAGES
#include "passes/Passes.h.inc"

namespace {

constexpr int kNoLayer = -2; // constants that are no parameter: any stage

struct SplitPipelineStagesPass : impl::SplitPipelineStagesBase<SplitPipelineStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd) {
      module.emitError("expected @forward (run loom-split-pipeline-stages before "
                       "loom-build-train-step)");
      return signalPassFailure();
    }
    if (stages < 1) {
      module.emitError("stages must be at least 1, not ") << int64_t(stages);
      return signalPassFailure();
    }
    Block &body = fwd.getBody().front();
    // Parameters' layers from their names: numbered ones are transformer
    // layers; unnumbered ones are the embedding when an embedding reads
    // them as its table, else the head (final norm, LM head).
    llvm::DenseMap<Operation *, int> paramLayer;
    int numLayers = 0;
    SmallVector<ConstantOp> unnumbered;
    fwd.walk([&](ConstantOp c) {
      ParamAttr p = c.getParamAttr();
      if (!p)
        return;
      if (std::optional<int> l = planner::layerIndexOf(p.getName().str())) {
        paramLayer[c] = *l;
        numLayers = std::max(numLayers, *l + 1);
      } else {
        unnumbered.push_back(c);
      }
    });
    if (numLayers == 0) {
      fwd.emitError("no parameter names a numbered layer (layers.K / h.K): nothing to split "
                    "into pipeline stages");
      return signalPassFailure();
    }
    for (ConstantOp c : unnumbered) {
      bool table = llvm::any_of(c->getUses(), [](OpOperand &u) {
        return isa<EmbeddingOp>(u.getOwner()) && u.getOperandNumber() == 0;
      });
      paramLayer[c] = table ? -1 : numLayers;
    }
    int64_t N = stages;
    // Sub-blocks: a layer's norms each begin one (attention, MLP; more for
    // models with post-norms). A layer's k-th norm of the weights of layer
    // l starts unit l K + k, K the most norms any layer has; parameters
    // count from their layer's first unit.
    llvm::DenseMap<Operation *, int> normIndex;
    std::map<int, int> normsOfLayer;
    for (Operation &op : body)
      if (isa<RmsNormOp, LayerNormOp>(op))
        if (auto w = op.getOperand(1).getDefiningOp<ConstantOp>())
          if (auto it = paramLayer.find(w); it != paramLayer.end() && it->second >= 0 &&
                                            it->second < numLayers)
            normIndex[&op] = normsOfLayer[it->second]++;
    int K = 1;
    for (auto [l, n] : normsOfLayer) K = std::max(K, n);
    int64_t units = int64_t(numLayers) * K;
    // Whole layers when there are enough, else sub-blocks.
    int64_t per = N <= numLayers ? K : 1;
    int64_t available = units / per;
    if (N > available) {
      fwd.emitError("") << numLayers << " layers (" << units << " sub-blocks) cannot fill " << N
                        << " pipeline stages";
      return signalPassFailure();
    }
    // First unit of each stage: given (layers), or dealt out evenly.
    SmallVector<int64_t> first = {0};
    if (!cuts.empty()) {
      if (int64_t(cuts.size()) != N - 1) {
        fwd.emitError("") << N << " stages need " << N - 1 << " cuts, not " << cuts.size();
        return signalPassFailure();
      }
      if (per != K) {
        fwd.emitError("") << N << " stages split " << numLayers
                          << " layers inside layers: cuts name whole layers (give at most "
                          << numLayers << " stages)";
        return signalPassFailure();
      }
      for (int64_t c : cuts) {
        if (c * K <= first.back() || c >= numLayers) {
          fwd.emitError("cut at layer ")
              << c << " does not begin a new, non-empty stage (layers 0.." << numLayers - 1
              << ", cuts strictly increasing)";
          return signalPassFailure();
        }
        first.push_back(c * K);
      }
    } else {
      int64_t base = available / N, extra = available % N;
      for (int64_t k = 1; k < N; ++k) first.push_back(first.back() + (base + (k - 1 < extra)) * per);
    }
    auto stageOfUnit = [&](int unit) -> int64_t {
      if (unit < 0)
        return 0;
      int64_t s = 0;
      while (s + 1 < N && unit >= first[size_t(s + 1)]) ++s;
      return s;
    };

    // Every op's unit: the highest of the parameters and values it reads
    // (a residual add belongs to the block whose output it adds, a norm
    // begins its block). Constants that are no parameter (rotary tables,
    // masks) belong nowhere: every stage that reads one has its own copy.
    llvm::DenseMap<Value, int> unitOf;
    for (BlockArgument a : body.getArguments()) unitOf[a] = -1; // the tokens
    llvm::DenseMap<Operation *, int64_t> stageOf;
    for (Operation &op : body) {
      if (auto c = dyn_cast<ConstantOp>(op)) {
        auto it = paramLayer.find(c);
        unitOf[c.getResult()] = it == paramLayer.end() ? kNoLayer
                                : it->second < 0        ? -1
                                                        : it->second * K;
        continue;
      }
      if (isa<func::ReturnOp>(op))
        continue;
      int unit = kNoLayer;
      for (Value v : op.getOperands()) unit = std::max(unit, unitOf.lookup(v));
      if (auto it = normIndex.find(&op); it != normIndex.end())
        unit = std::max(unit, paramLayer.lookup(op.getOperand(1).getDefiningOp()) * K + it->second);
      for (Value r : op.getResults()) unitOf[r] = unit;
      if (unit != kNoLayer)
        stageOf[&op] = stageOfUnit(unit);
    }

    // Each value read by a later stage than its own goes through one
    // boundary per stage it crosses, placed right after its definition.
    OpBuilder b(&getContext());
    int64_t tag = 0;
    SmallVector<Operation *> ops;
    for (Operation &op : body) ops.push_back(&op);
    for (Operation *op : ops) {
      auto own = stageOf.find(op);
      if (own == stageOf.end())
        continue;
      for (Value v : op->getResults()) {
        // The readers in later stages, by stage.
        std::map<int64_t, SmallVector<OpOperand *>> later;
        for (OpOperand &use : v.getUses()) {
          Operation *user = use.getOwner();
          int64_t s = isa<func::ReturnOp>(user) ? N - 1 : stageOf.lookup(user);
          if (s > own->second)
            later[s].push_back(&use);
        }
        if (later.empty())
          continue;
        b.setInsertionPointAfter(op);
        Value hop = v;
        for (int64_t s = own->second + 1; s <= later.rbegin()->first; ++s) {
          auto boundary = b.create<StageBoundaryOp>(op->getLoc(), v.getType(), hop,
                                                    b.getI64IntegerAttr(s - 1),
                                                    b.getI64IntegerAttr(s),
                                                    b.getI64IntegerAttr(tag++));
          hop = boundary.getResult();
          b.setInsertionPointAfter(boundary);
          for (OpOperand *use : later[s]) use->set(hop);
        }
      }
    }
    fwd->setAttr("loom.pipeline_stages", b.getI64IntegerAttr(N));
    fwd->setAttr("loom.pipeline_first_units", b.getDenseI64ArrayAttr(first));
    fwd->setAttr("loom.pipeline_units_per_layer", b.getI64IntegerAttr(K));
  }
};

} // namespace
} // namespace loom
