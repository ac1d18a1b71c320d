//===- ExpandContextAttention.cpp - Ring and all-gather attention, explicit ===//
//
// Part of loom, under the Apache License v2.0.
//
// After autodiff, context_attention and context_attention_grad become
// collectives and ordinary attention ops. Rank c of C holds query, key and
// value chunks a = c and b = 2C - 1 - c (L rows each). Its own keys give
// causal attention over the 2L local rows (positions increase along them,
// so the local causal mask is the global one). At step s = 1 .. C - 1 it
// holds the keys of rank r = (c - s) mod C (chunks r and 2C - 1 - r,
// halves f and s):
//   r < c (s <= c): chunk a sees f, chunk b sees f, nobody sees s;
//   r > c (s > c):  chunk a sees nothing, chunk b sees f and s;
// all unmasked. Both cases are two L x L products: (b, f) always, and
// (a, f) or (b, s), picked by `where` with this rank's bit of a constant
// table (shard_slice), so one program serves every rank and each does 2L^2
// of work per step: the same on every rank.
// Blocks arrive by C - 1 ring shifts (collective_permute, ring) or one
// all_gather and a per-rank pick of the blocks in ring order (an embedding
// of the gathered blocks by rank-dependent ids; allgather). The partial
// outputs merge by their logsumexp: with M the largest, lse = M + log sum
// exp(lse_j - M) and o = sum exp(lse_j - M) / sum(...) o_j; a pick that
// does not apply to a chunk contributes lse -inf, weight 0.
// The backward is attention_grad of each block with the merged output and
// logsumexp (the block's share of the global probabilities and delta), so
// nothing differentiates through the merge. Key and value gradients go
// home by a reduce_scatter (the embedding's scatter-add, then the
// all_gather's adjoint) or around the ring with an accumulator that each
// rank adds its share to.
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"
#include "passes/SequenceSharding.h"

#include "mlir/IR/BuiltinOps.h"

#include <limits>

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_EXPANDCONTEXTATTENTION
#include "passes/Passes.h.inc"

namespace {

class Expander {
public:
  Expander(OpBuilder &b, Location loc, ArrayAttr axes, CpRotate rotate, double scale)
      : b(b), loc(loc), axes(axes), rotate(rotate), scale(scale) {
    MeshAttr mesh = lookupMesh(b.getInsertionBlock()->getParentOp());
    C = mesh.groupSize(axes);
  }

  /// x [..., 2L along dim 2, ...] as its two chunks.
  std::pair<Value, Value> halves(Value x) {
    int64_t L = tensorType(x).getDimSize(2) / 2;
    auto s = b.create<SplitOp>(loc, x, 2, SmallVector<int64_t>{L, L});
    return {s.getResult(0), s.getResult(1)};
  }

  /// The same as slices: the backward cuts the query again rather than
  /// share the forward's halves (CSE would merge two splits and keep them
  /// alive from the forward to the backward).
  std::pair<Value, Value> sliceHalves(Value x) {
    auto t = tensorType(x);
    int64_t L = t.getDimSize(2) / 2;
    SmallVector<int64_t> starts(t.getRank(), 0), sizes(t.getShape()), steps(t.getRank(), 1);
    sizes[2] = L;
    Value first = b.create<SliceOp>(loc, x, starts, sizes, steps);
    starts[2] = L;
    return {first, b.create<SliceOp>(loc, x, starts, sizes, steps)};
  }

  /// `x`, or the bf16 value autocast widened into it (cast bf16 -> f32):
  /// halves and picks then move bf16, and every attention operand is
  /// widened from them again, a cast codegen folds into the kernel, so no
  /// f32 copy of the query or output is kept for the backward.
  static Value storageOf(Value x) {
    auto c = x.getDefiningOp<CastOp>();
    if (c && tensorType(c.getInput()).getElementType().isBF16() &&
        tensorType(x).getElementType().isF32())
      return c.getInput();
    return x;
  }

  /// A block received from another rank (collectives move f32) back in
  /// the storage `like` has: bf16 when autocast rounded it (exact: the
  /// values are bf16's), so the attention ops read bf16 as the local
  /// block's do.
  Value inStorageOf(Value block, Value like) {
    auto storage = tensorType(storageOf(like));
    if (storage == tensorType(like))
      return block;
    return b.create<CastOp>(loc, storage, block);
  }

  SmallVector<Value> blocksInStorage(Value x, Value *gatheredIds = nullptr) {
    SmallVector<Value> out = blocks(x, gatheredIds);
    for (Value &v : out) v = inStorageOf(v, x);
    return out;
  }

  Value widened(Value x) {
    auto t = tensorType(x);
    if (!t.getElementType().isBF16())
      return x;
    return b.create<CastOp>(loc, RankedTensorType::get(t.getShape(), b.getF32Type()), x);
  }

  // Context attention is plain causal (ShardContextParallel refuses a
  // sliding window or a softcap): the blocks' attention has neither.
  IntegerAttr noWindow() { return b.getI64IntegerAttr(0); }
  FloatAttr noSoftcap() { return b.getF64FloatAttr(0.0); }

  Value join(Value first, Value second) {
    return b.create<ConcatOp>(loc, ValueRange{first, second}, 2);
  }

  Value scalar(double v, Type t) {
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get({}, t), b.getFloatAttr(t, v)),
        StringAttr(), ParamAttr());
  }

  Value pick(Value cond, Value yes, Value no) { return b.create<WhereOp>(loc, cond, yes, no); }

  /// This rank's row of a per-rank table [C, C - 1], split per step.
  SmallVector<Value> perStep(Type elem, const std::function<Attribute(int64_t c, int64_t s)> &at,
                             bool scalars) {
    SmallVector<Attribute> values;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 1; s < C; ++s) values.push_back(at(c, s));
    auto tableType = RankedTensorType::get({C, C - 1}, elem);
    Value table = b.create<ConstantOp>(loc, DenseElementsAttr::get(tableType, values),
                                       StringAttr(), ParamAttr());
    Value row = b.create<ShardSliceOp>(loc, RankedTensorType::get({1, C - 1}, elem), table, axes,
                                       b.getI64IntegerAttr(0));
    if (!scalars)
      return {b.create<ReshapeOp>(loc, RankedTensorType::get({C - 1}, elem), row)};
    SmallVector<Value> out;
    if (C == 2) {
      out.push_back(b.create<ReshapeOp>(loc, RankedTensorType::get({}, elem), row));
      return out;
    }
    auto parts = b.create<SplitOp>(loc, row, 1, SmallVector<int64_t>(C - 1, 1));
    for (Value p : parts.getResults())
      out.push_back(b.create<ReshapeOp>(loc, RankedTensorType::get({}, elem), p));
    return out;
  }

  /// cond[s - 1]: at step s this rank's block comes from a lower rank.
  SmallVector<Value> lowerSource() {
    return perStep(b.getI1Type(), [&](int64_t c, int64_t s) { return b.getBoolAttr(s <= c); },
                   /*scalars=*/true);
  }

  /// The keys (or values) of every other rank, in ring order: block s
  /// comes from rank c - s.
  SmallVector<Value> blocks(Value x, Value *gatheredIds = nullptr) {
    SmallVector<Value> out;
    auto t = tensorType(x);
    if (rotate == CpRotate::ring) {
      Value cur = x;
      for (int64_t s = 1; s < C; ++s)
        out.push_back(cur = b.create<CollectivePermuteOp>(loc, t, cur, axes, b.getI64IntegerAttr(1)));
      return out;
    }
    int64_t E = t.getNumElements();
    Type f = t.getElementType();
    Value one = b.create<ReshapeOp>(loc, RankedTensorType::get({1, E}, f), x);
    Value all = b.create<AllGatherOp>(loc, RankedTensorType::get({C, E}, f), one, axes,
                                      b.getI64IntegerAttr(0));
    Value ids = ringIds();
    if (gatheredIds)
      *gatheredIds = ids;
    Value picked = b.create<EmbeddingOp>(loc, all, ids);
    auto rows = b.create<SplitOp>(loc, picked, 0, SmallVector<int64_t>(C - 1, 1));
    for (Value r : rows.getResults()) out.push_back(b.create<ReshapeOp>(loc, t, r));
    return out;
  }

  Value ringIds() {
    return perStep(b.getI64Type(),
                   [&](int64_t c, int64_t s) { return b.getI64IntegerAttr(((c - s) % C + C) % C); },
                   /*scalars=*/false)[0];
  }

  /// Merges partial attention results (o [B, H, L, D], lse [B, H, L]).
  std::pair<Value, Value> merge(ArrayRef<std::pair<Value, Value>> parts) {
    Value m = parts[0].second;
    for (auto [o, l] : parts.drop_front()) m = b.create<MaxOp>(loc, m, l);
    SmallVector<Value> w;
    Value z;
    for (auto [o, l] : parts) {
      w.push_back(b.create<ExpOp>(loc, b.create<SubOp>(loc, l, m)));
      z = z ? b.create<AddOp>(loc, z, w.back()).getResult() : w.back();
    }
    Value lse = b.create<AddOp>(loc, m, b.create<LogOp>(loc, z));
    Value out;
    for (auto [k, part] : llvm::enumerate(parts)) {
      auto lt = tensorType(part.second);
      SmallVector<int64_t> col(lt.getShape());
      col.push_back(1);
      Value weight = b.create<ReshapeOp>(loc, RankedTensorType::get(col, lt.getElementType()),
                                         b.create<DivOp>(loc, w[k], z));
      Value term = b.create<MulOp>(loc, part.first, weight);
      out = out ? b.create<AddOp>(loc, out, term).getResult() : term;
    }
    return {out, lse};
  }

  void forward(ContextAttentionOp a) {
    Value q = a.getQuery(), k = a.getKey(), v = a.getValue();
    auto self = b.create<AttentionOp>(loc, q, k, v, b.getF64FloatAttr(scale), b.getBoolAttr(true),
                                      noWindow(), noSoftcap());
    auto [qa, qb] = halves(storageOf(q));
    auto [oa, ob] = halves(self.getOutput());
    auto [la, lb] = halves(self.getLse());
    SmallVector<std::pair<Value, Value>> partsA = {{oa, la}}, partsB = {{ob, lb}};
    Type lf = tensorType(la).getElementType();
    Value ninf = scalar(-std::numeric_limits<double>::infinity(), lf);
    SmallVector<Value> lower = lowerSource();
    SmallVector<Value> keys = blocksInStorage(k), values = blocksInStorage(v);
    for (int64_t s = 1; s < C; ++s) {
      Value c = lower[s - 1];
      auto [kf, ks] = halves(keys[s - 1]);
      auto [vf, vs] = halves(values[s - 1]);
      auto both = b.create<AttentionOp>(loc, widened(qb), widened(kf), widened(vf),
                                        b.getF64FloatAttr(scale), b.getBoolAttr(false), noWindow(),
                                        noSoftcap());
      // Named first: argument evaluation order is unspecified, the IR's is not.
      Value pq = widened(pick(c, qa, qb)), pk = widened(pick(c, kf, ks));
      Value pv = widened(pick(c, vf, vs));
      auto picked = b.create<AttentionOp>(loc, pq, pk, pv, b.getF64FloatAttr(scale),
                                          b.getBoolAttr(false), noWindow(), noSoftcap());
      Value forA = pick(c, picked.getLse(), ninf), forB = pick(c, ninf, picked.getLse());
      partsB.push_back({both.getOutput(), both.getLse()});
      partsA.push_back({picked.getOutput(), forA});
      partsB.push_back({picked.getOutput(), forB});
    }
    auto [outA, lseA] = merge(partsA);
    auto [outB, lseB] = merge(partsB);
    a.getOutput().replaceAllUsesWith(join(outA, outB));
    a.getLse().replaceAllUsesWith(join(lseA, lseB));
  }

  void backward(ContextAttentionGradOp g) {
    Value q = g.getQuery(), k = g.getKey(), v = g.getValue(), o = g.getOutput(), lse = g.getLse(),
          dy = g.getOutputGrad();
    auto self = b.create<AttentionGradOp>(loc, q, k, v, o, lse, dy, b.getF64FloatAttr(scale),
                                          b.getBoolAttr(true), noWindow(), noSoftcap());
    auto [qa, qb] = sliceHalves(storageOf(q));
    auto [oa, ob] = sliceHalves(storageOf(o));
    auto [la, lb] = sliceHalves(lse);
    auto [da, db] = sliceHalves(storageOf(dy));
    Value zero = scalar(0.0, tensorType(q).getElementType());
    SmallVector<Value> lower = lowerSource();
    Value ids;
    SmallVector<Value> keys = blocksInStorage(k, &ids), values = blocksInStorage(v);
    Value dqa, dqb;
    SmallVector<Value> dKeys, dValues;
    auto accumulate = [&](Value &acc, Value x) {
      acc = acc ? b.create<AddOp>(loc, acc, x).getResult() : x;
    };
    for (int64_t s = 1; s < C; ++s) {
      Value c = lower[s - 1];
      auto [kf, ks] = halves(keys[s - 1]);
      auto [vf, vs] = halves(values[s - 1]);
      auto both = b.create<AttentionGradOp>(loc, widened(qb), widened(kf), widened(vf), widened(ob),
                                            lb, widened(db), b.getF64FloatAttr(scale),
                                            b.getBoolAttr(false), noWindow(), noSoftcap());
      Value pq = widened(pick(c, qa, qb)), pk = widened(pick(c, kf, ks));
      Value pv = widened(pick(c, vf, vs));
      Value po = widened(pick(c, oa, ob)), pl = pick(c, la, lb), pd = widened(pick(c, da, db));
      auto picked = b.create<AttentionGradOp>(loc, pq, pk, pv, po, pl, pd, b.getF64FloatAttr(scale),
                                              b.getBoolAttr(false), noWindow(), noSoftcap());
      accumulate(dqa, pick(c, picked.getQueryGrad(), zero));
      accumulate(dqb, both.getQueryGrad());
      accumulate(dqb, pick(c, zero, picked.getQueryGrad()));
      Value kToF = pick(c, picked.getKeyGrad(), zero), kToS = pick(c, zero, picked.getKeyGrad());
      Value vToF = pick(c, picked.getValueGrad(), zero), vToS = pick(c, zero, picked.getValueGrad());
      dKeys.push_back(join(b.create<AddOp>(loc, both.getKeyGrad(), kToF), kToS));
      dValues.push_back(join(b.create<AddOp>(loc, both.getValueGrad(), vToF), vToS));
    }
    Value dq = b.create<AddOp>(loc, self.getQueryGrad(), join(dqa, dqb));
    Value dk = b.create<AddOp>(loc, self.getKeyGrad(), sendHome(dKeys, ids));
    Value dv = b.create<AddOp>(loc, self.getValueGrad(), sendHome(dValues, ids));
    g.getQueryGrad().replaceAllUsesWith(dq);
    g.getKeyGrad().replaceAllUsesWith(dk);
    g.getValueGrad().replaceAllUsesWith(dv);
  }

  /// The gradients of the other ranks' blocks (ring order) back to their
  /// owners, summed over every rank that read them.
  Value sendHome(ArrayRef<Value> grads, Value ids) {
    auto t = tensorType(grads[0]);
    if (rotate == CpRotate::ring) {
      // The accumulator travels with the block: at step s it holds the
      // shares of ranks c - s + 1 .. c - 1 for block c - s; one more shift
      // after the last step brings every block's sum to its owner.
      Value acc = grads[0];
      for (Value g : grads.drop_front()) {
        Value moved = b.create<CollectivePermuteOp>(loc, t, acc, axes, b.getI64IntegerAttr(1));
        acc = b.create<AddOp>(loc, moved, g);
      }
      return b.create<CollectivePermuteOp>(loc, t, acc, axes, b.getI64IntegerAttr(1));
    }
    int64_t E = t.getNumElements();
    Type f = t.getElementType();
    SmallVector<Value> rows;
    for (Value g : grads) rows.push_back(b.create<ReshapeOp>(loc, RankedTensorType::get({1, E}, f), g));
    Value stacked = rows.size() == 1 ? rows[0] : b.create<ConcatOp>(loc, rows, 0).getResult();
    Value perRank = b.create<EmbeddingGradOp>(loc, stacked, ids, C);
    Value mine = b.create<ReduceScatterOp>(loc, RankedTensorType::get({1, E}, f), perRank, axes,
                                           /*dim=*/0, ReduceKind::sum);
    return b.create<ReshapeOp>(loc, t, mine);
  }

private:
  OpBuilder &b;
  Location loc;
  ArrayAttr axes;
  CpRotate rotate;
  double scale;
  int64_t C = 1;
};

struct ExpandContextAttentionPass
    : impl::ExpandContextAttentionBase<ExpandContextAttentionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<ContextAttentionOp, ContextAttentionGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      if (!lookupMesh(op)) {
        op->emitError("needs a loom.mesh on its module");
        return signalPassFailure();
      }
      if (auto a = dyn_cast<ContextAttentionOp>(op)) {
        Expander e(b, a.getLoc(), a.getAxes(), a.getRotate(), a.getScale().convertToDouble());
        e.forward(a);
      } else {
        auto g = cast<ContextAttentionGradOp>(op);
        Expander e(b, g.getLoc(), g.getAxes(), g.getRotate(), g.getScale().convertToDouble());
        e.backward(g);
      }
      op->erase();
    }
    if (auto step = module.lookupSymbol<func::FuncOp>("train_step"))
      dropCopiesToParallel(step);
  }
};

} // namespace
} // namespace loom
