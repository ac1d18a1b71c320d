//===- FoldAttentionTransposes.cpp - Attention on [B, T, H, D] operands ---===//
//
// Part of loom, under the Apache License v2.0.
//
// An exported attention block splits its projections' heads with a
// reshape and a transpose, [B, T, H * D] -> [B, T, H, D] -> [B, H, T, D],
// and merges them back the same way after the attention; the backward
// mirrors both. Each of those transposes copies a whole activation (eight
// per layer in a training step: q, k, v and o forward, dy, dq, dk and dv
// backward). The attention kernels can read and write [B, T, H, D] rows in
// place (cuDNN through strides, the CPU through AttentionLayout.h), so this
// pass gives attention and attention_grad `layout = tokens_major` operands
// and lets the transposes cancel:
//
//   attention(T q, T k, T v)  ->  T attention_tm(q, k, v)
//
// with T the [0, 2, 1, 3] swap. Between the transposes and the attention
// there may be casts (autocast's rounding) and rotary embeddings, which
// commute with T: a cast is element-wise, and rotary(T x, cos, sin) =
// T rotary(x, T cos, T sin) with the tables swapped too (a reshape when,
// as always in practice, one of the swapped table dims is 1). So the pass
// rebuilds each operand's chain without its transpose (tokensMajor below),
// rewrites the forward attention and the attention_grads that read its
// lse, puts a T after each result and sinks those through casts and
// rotary_grad until they meet the head-merging transposes, where T T = 1.
//
// Nothing changes a value: every element is computed by the same
// arithmetic from the same inputs, so the bits are those of the
// heads-major program. An attention is left alone unless all of q, k, v
// come from a transpose through casts and rotary ops that nothing else
// reads (else the rebuilt chain would be computed twice), and unless only
// attention_grads read its lse (a pipeline stage that returns it keeps the
// heads-major form its other stage reads).
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FOLDATTENTIONTRANSPOSES
#include "passes/Passes.h.inc"

namespace {

/// The [0, 2, 1, 3] swap between heads-major and tokens-major rank-4 tensors.
bool isHeadSwap(TransposeOp t) {
  ArrayRef<int64_t> p = t.getPermutation();
  return p.size() == 4 && p[0] == 0 && p[1] == 2 && p[2] == 1 && p[3] == 3;
}

RankedTensorType swapped(Type t) {
  auto r = cast<RankedTensorType>(t);
  SmallVector<int64_t, 4> s(r.getShape());
  std::swap(s[1], s[2]);
  return r.clone(s);
}

class Folder {
public:
  explicit Folder(MLIRContext *ctx) : b(ctx) {}

  /// Rewrites `a` and its gradients; false (nothing changed that matters:
  /// unused twins are left for the canonicalizer) when `a` does not qualify.
  bool fold(AttentionOp a) {
    if (a.getLayout() != AttentionLayout::heads_major)
      return false;
    SmallVector<AttentionGradOp> grads;
    for (Operation *user : a.getLse().getUsers()) {
      auto g = dyn_cast<AttentionGradOp>(user);
      if (!g || g.getLse() != a.getLse())
        return false;
      grads.push_back(g);
    }
    SmallPtrSet<Operation *, 16> chain;
    Value q = tokensMajor(a.getQuery(), &chain), k = tokensMajor(a.getKey(), &chain),
          v = tokensMajor(a.getValue(), &chain);
    if (!q || !k || !v || !exclusive(chain, a, grads))
      return false;

    b.setInsertionPoint(a);
    auto folded = b.create<AttentionOp>(a.getLoc(), q, k, v, a.getScaleAttr(), a.getCausalAttr(),
                                        a.getWindowAttr(), a.getSoftcapAttr(), tokensMajorAttr());
    twin[a.getOutput()] = folded.getOutput();
    for (AttentionGradOp g : grads)
      foldGrad(g);
    a.getLse().replaceAllUsesWith(folded.getLse());
    replaceWithSwap(a.getOutput(), folded.getOutput());
    a.erase();
    return true;
  }

  /// Sinks the transposes put after the rewritten results until they
  /// cancel against the transposes that merge heads.
  void sinkSwaps() {
    while (!swaps.empty()) {
      TransposeOp t = swaps.pop_back_val();
      for (Operation *user : llvm::make_early_inc_range(t.getResult().getUsers()))
        sinkInto(t, user);
      if (t.getResult().use_empty())
        t.erase();
    }
  }

private:
  /// The tokens-major value equal to T `v`, or null: `v` must be a swap's
  /// result, or a cast or a rotary of such a value. New ops sit right after
  /// the op they mirror. The ops passed on the way (not the swap) go into
  /// `chain` when it is given.
  Value tokensMajor(Value v, SmallPtrSet<Operation *, 16> *chain = nullptr) {
    if (auto it = twin.find(v); it != twin.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    Value r;
    if (auto t = dyn_cast_or_null<TransposeOp>(def); t && isHeadSwap(t)) {
      r = t.getInput();
    } else if (auto c = dyn_cast_or_null<CastOp>(def)) {
      if (Value x = tokensMajor(c.getInput(), chain)) {
        b.setInsertionPointAfter(c);
        r = b.create<CastOp>(c.getLoc(), swapped(c.getType()), x);
      }
    } else if (auto rot = dyn_cast_or_null<RotaryOp>(def)) {
      if (Value x = tokensMajor(rot.getInput(), chain)) {
        b.setInsertionPointAfter(rot);
        r = b.create<RotaryOp>(rot.getLoc(), x, swappedTable(rot.getCos(), rot.getInput()),
                               swappedTable(rot.getSin(), rot.getInput()));
      }
    }
    if (!r)
      return nullptr;
    if (chain && !isa<TransposeOp>(def))
      chain->insert(def);
    twin[v] = r;
    return r;
  }

  /// A rotary table that broadcasts to heads-major `x`, made to broadcast
  /// to x's tokens-major twin: dims 1 and 2 of the table (padded to rank 4)
  /// swap, a reshape when one of them is 1.
  Value swappedTable(Value table, Value x) {
    if (auto it = tables.find(table); it != tables.end())
      return it->second;
    auto t = cast<RankedTensorType>(table.getType());
    SmallVector<int64_t, 4> dims(4 - t.getRank(), 1);
    llvm::append_range(dims, t.getShape());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(table);
    Location loc = x.getLoc();
    Value padded = t.getRank() == 4 ? table
                                    : b.create<ReshapeOp>(loc, t.clone(dims), table).getResult();
    Value r;
    if (dims[1] == 1 || dims[2] == 1) {
      std::swap(dims[1], dims[2]);
      r = b.create<ReshapeOp>(loc, t.clone(dims), padded);
    } else {
      r = swap(loc, padded);
    }
    return tables[table] = r;
  }

  /// Every op of the rebuilt chains is read only by other chain ops, `a` and
  /// its gradients: once they are rewritten the heads-major chain is dead.
  static bool exclusive(const SmallPtrSet<Operation *, 16> &chain, AttentionOp a,
                        ArrayRef<AttentionGradOp> grads) {
    for (Operation *op : chain)
      for (Operation *user : op->getUsers())
        if (user != a && !chain.contains(user) &&
            !llvm::is_contained(grads, dyn_cast<AttentionGradOp>(user)))
          return false;
    return true;
  }

  /// `v`'s tokens-major twin, or a swap of it when no chain leads to one.
  Value tokensMajorOrSwap(Value v, Operation *before) {
    if (Value r = tokensMajor(v))
      return r;
    b.setInsertionPoint(before);
    return swap(v.getLoc(), v);
  }

  void foldGrad(AttentionGradOp g) {
    Value q = tokensMajorOrSwap(g.getQuery(), g), k = tokensMajorOrSwap(g.getKey(), g),
          v = tokensMajorOrSwap(g.getValue(), g), o = tokensMajorOrSwap(g.getOutput(), g),
          dy = tokensMajorOrSwap(g.getOutputGrad(), g);
    b.setInsertionPoint(g);
    auto folded = b.create<AttentionGradOp>(
        g.getLoc(), q, k, v, o, g.getLse(), dy, g.getScaleAttr(), g.getCausalAttr(),
        g.getWindowAttr(), g.getSoftcapAttr(), tokensMajorAttr());
    for (auto [old, now] : llvm::zip(g.getResults(), folded.getResults()))
      replaceWithSwap(old, now);
    g.erase();
  }

  /// Readers of heads-major `old` read T `now` instead, to be sunk.
  void replaceWithSwap(Value old, Value now) {
    b.setInsertionPointAfterValue(now);
    TransposeOp t = swap(now.getLoc(), now);
    old.replaceAllUsesWith(t.getResult());
    swaps.push_back(t);
  }

  /// One step of sinking swap `t` into `user`: T T x = x; cast(T x) =
  /// T cast(x); rotary_grad(T x, c, s) = T rotary_grad(x, T c, T s).
  void sinkInto(TransposeOp t, Operation *user) {
    Value x = t.getInput();
    Operation *moved = nullptr;
    if (auto u = dyn_cast<TransposeOp>(user); u && isHeadSwap(u)) {
      u.getResult().replaceAllUsesWith(x);
      u.erase();
      return;
    }
    b.setInsertionPoint(user);
    if (auto c = dyn_cast<CastOp>(user))
      moved = b.create<CastOp>(c.getLoc(), swapped(c.getType()), x);
    else if (auto r = dyn_cast<RotaryGradOp>(user); r && r.getOutputGrad() == t.getResult())
      moved = b.create<RotaryGradOp>(r.getLoc(), x, swappedTable(r.getCos(), t.getResult()),
                                     swappedTable(r.getSin(), t.getResult()));
    if (!moved)
      return;
    b.setInsertionPointAfter(moved);
    TransposeOp again = swap(user->getLoc(), moved->getResult(0));
    user->getResult(0).replaceAllUsesWith(again.getResult());
    user->erase();
    swaps.push_back(again);
  }

  /// The [0, 2, 1, 3] swap of `v`, at the builder's insertion point.
  TransposeOp swap(Location loc, Value v) {
    return b.create<TransposeOp>(loc, v, b.getDenseI64ArrayAttr({0, 2, 1, 3}));
  }

  AttentionLayoutAttr tokensMajorAttr() {
    return AttentionLayoutAttr::get(b.getContext(), AttentionLayout::tokens_major);
  }

  OpBuilder b;
  DenseMap<Value, Value> twin;   // heads-major value -> its tokens-major twin
  DenseMap<Value, Value> tables; // rotary table -> its swapped form
  SmallVector<TransposeOp> swaps;
};

struct FoldAttentionTransposesPass
    : impl::FoldAttentionTransposesBase<FoldAttentionTransposesPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    getOperation().walk([&](AttentionOp a) { attentions.push_back(a); });
    Folder folder(&getContext());
    for (AttentionOp a : attentions)
      folder.fold(a);
    folder.sinkSwaps();
  }
};

} // namespace
} // namespace loom
