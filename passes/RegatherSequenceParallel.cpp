//===- RegatherSequenceParallel.cpp - Keep the shard, gather again --------===//
//
// Part of loom, under the Apache License v2.0.
//
// Sequence parallelism gathers each tensor-parallel region's input from
// the ranks' shards; autodiff then reads the gathered whole again in the
// backward (the column-parallel weights' gradients are x^T dy), which
// would keep tp times the shard alive from the forward to the backward,
// the memory sequence parallelism exists to save. Megatron gathers again
// in the backward; so does this pass, on the finished step: the backward
// readers of an all_gather over tp read a second all_gather of the same
// shard, issued right before the first of them.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/SequenceSharding.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_REGATHERSEQUENCEPARALLEL
#include "passes/Passes.h.inc"

namespace {

struct RegatherSequenceParallelPass
    : impl::RegatherSequenceParallelBase<RegatherSequenceParallelPass> {
  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      getOperation().emitError("expected @train_step (run after loom-build-train-step)");
      return signalPassFailure();
    }
    Block &body = step.getBody().front();
    // The backward begins after the loss (BuildTrainStep's result 0).
    Operation *loss = body.getTerminator()->getOperand(0).getDefiningOp();
    llvm::DenseMap<Operation *, unsigned> order;
    unsigned k = 0;
    for (Operation &op : body) order[&op] = k++;
    unsigned lossAt = loss ? order.lookup(loss) : 0;
    SmallVector<AllGatherOp> gathers;
    step.walk([&](AllGatherOp g) {
      auto axes = g.getAxes();
      if (axes.size() == 1 && cast<MeshAxisAttr>(axes[0]).getValue() == MeshAxis::tp)
        gathers.push_back(g);
    });
    for (AllGatherOp g : gathers) {
      SmallVector<OpOperand *> late;
      Operation *first = nullptr;
      for (OpOperand &use : g.getResult().getUses()) {
        Operation *owner = use.getOwner();
        if (order.lookup(owner) <= lossAt)
          continue;
        late.push_back(&use);
        if (!first || order.lookup(owner) < order.lookup(first))
          first = owner;
      }
      if (late.empty() || late.size() == size_t(std::distance(g.getResult().use_begin(),
                                                               g.getResult().use_end())))
        continue; // read in one pass only: nothing is kept across
      OpBuilder b(first);
      auto again = b.create<AllGatherOp>(g.getLoc(), g.getType(), g.getInput(), g.getAxes(),
                                         g.getDimAttr());
      for (OpOperand *use : late) use->set(again.getResult());
    }
    dropCopiesToParallel(step);
  }
};

} // namespace
} // namespace loom
