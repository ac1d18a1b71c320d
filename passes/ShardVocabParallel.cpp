//===- ShardVocabParallel.cpp - Vocabulary-parallel embedding and head ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Loss parallelism (issue 18). The LM head x W (W [D, V], or [V, D]
// transposed) is column parallel over the vocabulary: rank t holds
// columns [t V/T, (t+1) V/T) and computes its logits from x, which enters
// through copy_to_parallel (each rank's backward yields only its columns'
// share of dx). The logits stay sharded: the loss (ParallelLoss.cpp) reduces
// row statistics over tp instead of gathering [B, T, V]. Embedding tables
// of the token ids are split along their rows alike: each rank looks up the
// ids in its range (zeros elsewhere, vocab_shard_embedding) and an
// all_reduce (sum) forms the embedding (under sequence parallelism a
// reduce_scatter, loom-shard-sequence-parallel). Each rank learns its range
// from a constant table of offsets through shard_slice.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/ParallelismRefusal.h"
#include "passes/PatternUtils.h"
#include "passes/SequenceSharding.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_SHARDVOCABPARALLEL
#include "passes/Passes.h.inc"

namespace {

bool isParam(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && c.getParamAttr() && tensorType(v).getRank() == 2;
}

/// Through the casts autocast puts on a weight (each read once); `casts`
/// collects them so they take the local type.
Value throughCasts(Value v, SmallVectorImpl<Value> &casts) {
  while (auto c = v.getDefiningOp<CastOp>()) {
    if (!v.hasOneUse())
      break;
    casts.push_back(v);
    v = c.getInput();
  }
  return v;
}

struct ShardVocabParallelPass : impl::ShardVocabParallelBase<ShardVocabParallelPass> {
  using Base::Base;
  ShardVocabParallelPass(const ShardVocabParallelOptions &o, ParallelismRefusal *r)
      : Base(o), refusal(r) {}
  ParallelismRefusal *refusal = nullptr; // where a refusal is recorded (may be null)

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (tp < 1) {
      module.emitError("tp must be at least 1");
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd || fwd.getNumResults() != 1 || fwd.getNumArguments() != 1) {
      module.emitError("expected @forward(tokens) -> logits");
      return signalPassFailure();
    }
    module->setAttr(kMeshAttrName,
                    meshWithAxis(ctx, module->getAttrOfType<MeshAttr>(kMeshAttrName),
                                 MeshAxis::tp, tp));
    ArrayAttr tpAxis = meshAxes(ctx, {MeshAxis::tp});
    auto ret = cast<func::ReturnOp>(fwd.getBody().front().getTerminator());
    // From here on, a failure is the model refusing the vocabulary split.
    RefusalRecorder recorder(ctx, refusal, RefusedParallelism::Loss);
    auto refuse = [&] {
      recorder.refused();
      signalPassFailure();
    };

    // The head: the logits are a matmul by a parameter, read through casts.
    SmallVector<Value> logitsPath; // matmul result .. returned value
    Value v = ret.getOperand(0);
    while (auto c = v.getDefiningOp<CastOp>()) {
      logitsPath.push_back(v);
      v = c.getInput();
    }
    auto head = v.getDefiningOp<MatmulOp>();
    SmallVector<Value> headCasts;
    Value w = head ? throughCasts(head.getRhs(), headCasts) : Value();
    if (!head || head.getTransposeLhs() || !isParam(w) || !head.getResult().hasOneUse() ||
        llvm::any_of(logitsPath, [](Value x) { return !x.hasOneUse(); })) {
      fwd.emitError("loss parallelism: the logits are not a matmul by a parameter weight "
                    "(plan loss_parallel=off keeps the head whole)");
      return refuse();
    }
    logitsPath.push_back(head.getResult());
    int64_t headDim = head.getTransposeRhs() ? 0 : 1; // the vocabulary in W
    int64_t vocab = tensorType(w).getDimSize(headDim);
    if (vocab % tp) {
      fwd.emitError() << "loss parallelism: the vocabulary " << vocab << " does not divide by tp="
                      << int64_t(tp) << " (plan loss_parallel=off keeps the head whole)";
      return refuse();
    }

    // Embedding tables of the token ids: rows are the vocabulary.
    SmallVector<EmbeddingOp> embeddings;
    for (Operation *user : fwd.getArgument(0).getUsers())
      if (auto e = dyn_cast<EmbeddingOp>(user); e && isParam(e.getTable()))
        embeddings.push_back(e);
    llvm::MapVector<Operation *, int64_t> split; // constant -> split dim
    split[w.getDefiningOp()] = headDim;
    for (EmbeddingOp e : embeddings) {
      Operation *table = e.getTable().getDefiningOp();
      int64_t rows = tensorType(e.getTable()).getDimSize(0);
      auto [it, inserted] = split.insert({table, 0});
      if ((!inserted && it->second != 0) || rows % tp) {
        e.emitError() << "loss parallelism: the embedding table " << e.getTable().getType()
                      << " cannot be split over tp=" << int64_t(tp) << " along its " << rows
                      << " rows like the head";
        return refuse();
      }
    }
    // A split weight is read only by these ops (or the head's casts).
    for (auto [c, d] : split)
      for (Operation *user : c->getUsers())
        if (!isa<EmbeddingOp>(user) && !(headCasts.empty() ? user == head.getOperation()
                                                            : user == headCasts.back().getDefiningOp())) {
          user->emitError("loss parallelism: a vocabulary-split weight is read here as well");
          return refuse();
        }

    OpBuilder b(ctx);
    b.setInsertionPointToStart(&fwd.getBody().front());
    Value first = rankOffset(b, fwd.getLoc(), vocab / tp, tpAxis);
    // Embeddings: this rank's rows, summed over tp.
    for (EmbeddingOp e : embeddings) {
      b.setInsertionPoint(e);
      auto local = b.create<VocabShardEmbeddingOp>(e.getLoc(), e.getTable(), e.getIndices(), first,
                                                   tensorType(e.getTable()).getDimSize(0));
      auto sum = b.create<AllReduceOp>(e.getLoc(), e.getType(), local.getResult(), tpAxis,
                                       ReduceKind::sum);
      e.getResult().replaceAllUsesWith(sum.getResult());
      e.erase();
    }
    // Head: column parallel over the vocabulary.
    b.setInsertionPoint(head);
    auto enter = b.create<CopyToParallelOp>(head.getLoc(), head.getLhs().getType(), head.getLhs(),
                                            tpAxis);
    head.getLhsMutable().assign(enter);
    for (Value c : headCasts) c.setType(shardType(tensorType(c), headDim, tp));
    for (Value l : logitsPath) l.setType(shardType(tensorType(l), tensorType(l).getRank() - 1, tp));
    for (auto [c, d] : split) {
      auto constant = cast<ConstantOp>(c);
      DenseElementsAttr local = firstShardOf(constant, d, tp);
      constant.setValueAttr(local);
      constant.getResult().setType(cast<RankedTensorType>(local.getType()));
      c->setAttr(kShardingAttrName,
                 ShardingAttr::get(ctx, {PlacementAttr::get(ctx, MeshAxis::tp, PlacementKind::shard,
                                                            d, ReduceKind::sum, 1)}));
    }
    fwd.setType(FunctionType::get(ctx, fwd.getArgumentTypes(), {ret.getOperand(0).getType()}));
    int64_t vocabDim = tensorType(ret.getOperand(0)).getRank() - 1;
    addSharding(fwd, 0, /*argument=*/false,
                PlacementAttr::get(ctx, MeshAxis::tp, PlacementKind::shard, vocabDim,
                                   ReduceKind::sum, 1));
  }

  /// This rank's first vocabulary id, k * rows for rank k of the group: a
  /// constant table of every rank's offset, sliced per rank.
  Value rankOffset(OpBuilder &b, Location loc, int64_t rows, ArrayAttr axes) {
    SmallVector<int64_t> offsets;
    for (int64_t k = 0; k < tp; ++k) offsets.push_back(k * rows);
    auto table = RankedTensorType::get({tp}, b.getI64Type());
    Value all = b.create<ConstantOp>(loc, DenseElementsAttr::get(table, ArrayRef<int64_t>(offsets)),
                                     StringAttr(), ParamAttr());
    return b.create<ShardSliceOp>(loc, RankedTensorType::get({1}, b.getI64Type()), all, axes,
                                  b.getI64IntegerAttr(0));
  }
};

} // namespace

std::unique_ptr<Pass> createShardVocabParallel(const ShardVocabParallelOptions &o,
                                               ParallelismRefusal *refusal) {
  return std::make_unique<ShardVocabParallelPass>(o, refusal);
}

} // namespace loom
