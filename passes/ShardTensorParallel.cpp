//===- ShardTensorParallel.cpp - Megatron column/row parallel @forward ----===//
//
// Part of loom, under the Apache License v2.0.
//
// Runs on the fused @forward, before BuildTrainStep, so that autodiff
// differentiates the partitioned forward (the collectives have gradient
// rules). A group starts at an activation x whose users include matmuls by
// a parameter (q/k/v, or gate/up, or c_fc): those weights are split along
// their output features (column parallel) and the split is followed
// through reshapes into heads, transposes, rotary, attention (query and
// key/value heads both split, so grouped-query attention keeps its ratio),
// activations, elementwise products and bias adds, until a matmul by a
// parameter contracts over the split dim: that weight is split along its
// input features (row parallel) and its partial product is all_reduced.
// x enters the group through copy_to_parallel, whose gradient sums the
// ranks' shares. Every sharded value must be consumed by one of these
// rules; when anything else reads one (a fused qkv split, logits, a weight
// used elsewhere), the whole group stays replicated, which is correct,
// only not parallel. Parameter constants take their local shape and carry
// `loom.sharding`; the driver feeds each rank its slice.
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_SHARDTENSORPARALLEL
#include "passes/Passes.h.inc"

namespace {

bool isParam(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && c.getParamAttr() && tensorType(v).getRank() <= 2;
}

/// Looks through the rounding casts bf16 autocast puts on a weight
/// (each read only once); `views` collects them so they take local types.
Value throughCasts(Value v, SmallVectorImpl<Value> *views = nullptr) {
  while (auto c = v.getDefiningOp<CastOp>()) {
    if (!v.hasOneUse())
      break;
    if (views)
      views->push_back(v);
    v = c.getInput();
  }
  return v;
}

/// The sharded dims a group assigns: values and parameter constants.
struct Group {
  llvm::MapVector<Value, int64_t> dims;        // value -> sharded dim
  llvm::MapVector<Operation *, int64_t> params; // constant -> sharded dim
  llvm::MapVector<Operation *, int64_t> blocks; // constant -> fused blocks
  llvm::MapVector<Value, int64_t> views;        // casts of split weights -> dim
  SmallVector<MatmulOp> rowParallel;
  SmallVector<MatmulOp> columnParallel;
  SmallVector<std::pair<Value, int64_t>> fusedSplits; // split input, parts
  SmallVector<AttentionOp> kvReplicated; // attention whose k/v stay whole
};

/// Attention with fewer key/value heads than tp ranks: k and v are
/// computed whole on every rank (their projections are the `seeds`, read
/// by `params`), and each rank picks the kv head its query heads use.
struct ReplicatedKv {
  SmallVector<MatmulOp> seeds;
  SmallVector<Operation *> params;
};

/// Walks from a key/value operand back to its projection: transposes,
/// reshapes, casts, rotary (the rotated input) and a bias add, each value
/// read only on this path.
bool kvChain(Value v, ReplicatedKv &kv) {
  while (true) {
    if (!v.hasOneUse())
      return false;
    Operation *def = v.getDefiningOp();
    if (isa_and_nonnull<TransposeOp, ReshapeOp, CastOp>(def)) {
      v = def->getOperand(0);
    } else if (auto r = dyn_cast_or_null<RotaryOp>(def)) {
      v = r.getInput();
    } else if (auto add = dyn_cast_or_null<AddOp>(def)) {
      bool rhsIsBias = isParam(throughCasts(add.getRhs()));
      Value bias = throughCasts(rhsIsBias ? add.getRhs() : add.getLhs());
      if (!isParam(bias))
        return false;
      kv.params.push_back(bias.getDefiningOp());
      v = rhsIsBias ? add.getLhs() : add.getRhs();
    } else if (auto mm = dyn_cast_or_null<MatmulOp>(def)) {
      Value w = throughCasts(mm.getRhs());
      if (!isParam(w))
        return false;
      kv.seeds.push_back(mm);
      kv.params.push_back(w.getDefiningOp());
      return true;
    } else {
      return false;
    }
  }
}

class Propagator {
public:
  Propagator(int64_t T, const llvm::DenseMap<Operation *, ReplicatedKv> &kv) : T(T), kv(kv) {
    for (auto &[attention, info] : kv)
      for (MatmulOp mm : info.seeds) kvSeeds.insert(mm);
  }

  /// Tries the group of matmuls reading `x`; false when it cannot be split.
  bool build(Value x, Group &g) {
    for (Operation *user : x.getUsers()) {
      auto mm = dyn_cast<MatmulOp>(user);
      if (mm && kvSeeds.count(mm))
        continue; // whole on every rank (replicated key/value heads)
      SmallVector<Value> views;
      Value w = mm ? throughCasts(mm.getRhs(), &views) : Value();
      if (!mm || mm.getLhs() != x || mm.getTransposeLhs() || !isParam(w) ||
          tensorType(w).getRank() != 2)
        continue;
      int64_t wdim = mm.getTransposeRhs() ? 0 : 1;
      auto rt = tensorType(mm.getResult());
      if (!markParam(g, w, wdim) || !mark(g, mm.getResult(), rt.getRank() - 1))
        return false;
      for (Value view : views) g.views[view] = wdim;
      g.columnParallel.push_back(mm);
    }
    if (g.columnParallel.empty())
      return false;
    // Follow every sharded value to its users.
    for (size_t k = 0; k < g.dims.size(); ++k) {
      auto [v, d] = *(g.dims.begin() + k);
      for (OpOperand &use : v.getUses())
        if (!visit(g, use, d))
          return false;
    }
    // Ops with several operands must see all of them sharded alike.
    for (Operation *op : waiting)
      for (Value operand : op->getOperands())
        if (!isa_and_nonnull<ConstantOp>(operand.getDefiningOp()) && !g.dims.count(operand))
          return false;
    // Replicated key/value projections must read this group's input, so
    // that their share of its gradient is summed with the rest.
    for (AttentionOp a : g.kvReplicated)
      for (MatmulOp mm : kv.lookup(a).seeds)
        if (mm.getLhs() != x || mm.getTransposeLhs())
          return false;
    // A fused projection (x W + b cut into q|k|v) splits each part on its
    // own: the weight and bias feeding the cut are sharded in blocks. The
    // path from the matmul to the cut must be used by nothing else, so no
    // other reader sees the blocked column order.
    for (auto [v, parts] : g.fusedSplits) {
      Value cur = v;
      while (true) {
        if (!cur.hasOneUse())
          return false;
        Operation *def = cur.getDefiningOp();
        if (auto r = dyn_cast_or_null<ReshapeOp>(def)) {
          cur = r.getInput();
        } else if (auto c = dyn_cast_or_null<CastOp>(def)) {
          cur = c.getInput();
        } else if (auto add = dyn_cast_or_null<AddOp>(def)) {
          bool rhsIsBias = isParam(throughCasts(add.getRhs()));
          Value bias = throughCasts(rhsIsBias ? add.getRhs() : add.getLhs());
          Value other = rhsIsBias ? add.getLhs() : add.getRhs();
          if (!isParam(bias) || !g.params.count(bias.getDefiningOp()))
            return false;
          g.blocks[bias.getDefiningOp()] = parts;
          cur = other;
        } else if (auto mm = dyn_cast_or_null<MatmulOp>(def);
                   mm && llvm::is_contained(g.columnParallel, mm)) {
          g.blocks[throughCasts(mm.getRhs()).getDefiningOp()] = parts;
          break;
        } else {
          return false;
        }
      }
    }
    return true;
  }

private:
  bool mark(Group &g, Value v, int64_t d) {
    auto t = tensorType(v);
    if (d < 0 || d >= t.getRank() || t.getDimSize(d) % T)
      return false;
    auto [it, inserted] = g.dims.insert({v, d});
    return inserted || it->second == d;
  }

  bool markParam(Group &g, Value w, int64_t d) {
    Operation *c = w.getDefiningOp();
    auto t = tensorType(w);
    if (t.getDimSize(d) % T)
      return false;
    auto [it, inserted] = g.params.insert({c, d});
    return inserted || it->second == d;
  }

  /// Where dim `d` of a reshape's input lands in its output, when the
  /// split of d into T contiguous blocks is a split of one output dim.
  static int64_t reshapeDim(ArrayRef<int64_t> in, ArrayRef<int64_t> out, int64_t d, int64_t T) {
    int64_t before = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) before *= in[i];
    for (size_t i = d + 1; i < in.size(); ++i) inner *= in[i];
    int64_t prefix = 1;
    for (size_t e = 0; e < out.size(); ++e) {
      if (prefix == before) {
        int64_t innerOut = 1;
        for (size_t i = e + 1; i < out.size(); ++i) innerOut *= out[i];
        if (out[e] % T == 0 && in[d] * inner == out[e] * innerOut && out[e] != 1)
          return int64_t(e);
      }
      prefix *= out[e];
    }
    return -1;
  }

  bool visit(Group &g, OpOperand &use, int64_t d) {
    Operation *op = use.getOwner();
    Value v = use.get();
    if (auto r = dyn_cast<ReshapeOp>(op))
      return mark(g, r.getResult(),
                  reshapeDim(tensorType(v).getShape(), tensorType(r.getResult()).getShape(), d, T));
    if (auto t = dyn_cast<TransposeOp>(op)) {
      auto perm = t.getPermutation();
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] == d)
          return mark(g, t.getResult(), int64_t(i));
      return false;
    }
    if (auto r = dyn_cast<RotaryOp>(op)) {
      // The tables broadcast over heads: dim d of cos/sin must be 1.
      if (use.getOperandNumber() != 0)
        return false;
      int64_t rank = tensorType(v).getRank();
      for (Value table : {r.getCos(), r.getSin()}) {
        auto tt = tensorType(table);
        int64_t td = d - (rank - tt.getRank());
        if (td >= 0 && tt.getDimSize(td) != 1)
          return false;
      }
      return mark(g, r.getResult(), d);
    }
    if (auto a = dyn_cast<AttentionOp>(op)) {
      if (d != 1) // heads
        return false;
      // The output and the logsumexp are per query head: each rank holds
      // its heads' rows of both ([B, Hq/T, T, D] and [B, Hq/T, T]).
      auto markResults = [&] { return mark(g, a.getOutput(), 1) && mark(g, a.getLse(), 1); };
      if (kv.count(op)) {
        // Only the query is split; k and v are picked per rank in apply().
        if (use.getOperandNumber() != 0)
          return false;
        if (!llvm::is_contained(g.kvReplicated, a))
          g.kvReplicated.push_back(a);
        return markResults();
      }
      waiting.insert(op);
      return markResults();
    }
    if (isa<SiluOp, GeluOp, TanhOp, SigmoidOp, NegOp, ExpOp, CastOp, ReluOp, ErfOp, SoftplusOp>(
            op))
      return mark(g, op->getResult(0), d);
    if (isa<SwiGluOp>(op)) { // gate and up split alike (both column-parallel)
      waiting.insert(op);
      return mark(g, op->getResult(0), d);
    }
    if (isa<MulOp, AddOp, SubOp>(op)) {
      Value other = op->getOperand(1 - use.getOperandNumber());
      SmallVector<Value> views;
      Value bias = throughCasts(other, &views);
      auto vt = tensorType(v), ot = tensorType(other);
      if (isParam(bias) && ot.getRank() == 1 && d == vt.getRank() - 1 &&
          ot.getDimSize(0) == vt.getDimSize(d)) {
        // A bias on the split features is split with them.
        if (!markParam(g, bias, 0))
          return false;
        for (Value view : views) g.views[view] = 0;
      } else if (vt != ot) {
        return false; // broadcasting against a replicated value
      } else {
        waiting.insert(op);
      }
      return mark(g, op->getResult(0), d);
    }
    if (auto sp = dyn_cast<SplitOp>(op)) {
      // Equal parts, each divisible by T: every part keeps the split.
      auto sizes = sp.getSizes();
      if (int64_t(sp.getAxis()) != d || sizes.empty() ||
          llvm::any_of(sizes, [&](int64_t n) { return n != sizes[0] || n % T; }))
        return false;
      g.fusedSplits.push_back({v, int64_t(sizes.size())});
      for (Value r : sp.getResults())
        if (!mark(g, r, d))
          return false;
      return true;
    }
    if (auto mm = dyn_cast<MatmulOp>(op)) {
      auto vt = tensorType(v);
      SmallVector<Value> views;
      Value w = throughCasts(mm.getRhs(), &views);
      if (use.getOperandNumber() != 0 || mm.getTransposeLhs() || d != vt.getRank() - 1 ||
          !isParam(w) || tensorType(w).getRank() != 2)
        return false;
      int64_t wdim = mm.getTransposeRhs() ? 1 : 0;
      if (!markParam(g, w, wdim))
        return false;
      for (Value view : views) g.views[view] = wdim;
      g.rowParallel.push_back(mm);
      return true;
    }
    return false;
  }

  int64_t T;
  const llvm::DenseMap<Operation *, ReplicatedKv> &kv;
  llvm::DenseSet<Operation *> kvSeeds;
  llvm::SetVector<Operation *> waiting;
};

struct ShardTensorParallelPass : impl::ShardTensorParallelBase<ShardTensorParallelPass> {
  using Base::Base;

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
    if (!fwd) {
      module.emitError("expected @forward");
      return signalPassFailure();
    }
    MeshAttr old = module->getAttrOfType<MeshAttr>(kMeshAttrName);
    module->setAttr(kMeshAttrName,
                    MeshAttr::get(ctx, old ? old.getPp() : 1, old ? old.getDpReplicate() : 1,
                                  old ? old.getDpShard() : 1, old ? old.getCp() : 1, tp));
    ArrayAttr tpAxis = meshAxes(ctx, {MeshAxis::tp});

    // Candidate group inputs, in program order.
    SmallVector<Value> inputs;
    llvm::DenseSet<Value> seen;
    fwd.walk([&](MatmulOp mm) {
      if (isParam(throughCasts(mm.getRhs())) && seen.insert(mm.getLhs()).second)
        inputs.push_back(mm.getLhs());
    });
    // Grouped-query attention with fewer kv heads than ranks (but a
    // divisor of them): kv heads are replicated, query heads split.
    fwd.walk([&](AttentionOp a) {
      int64_t hq = tensorType(a.getQuery()).getDimSize(1);
      int64_t hkv = tensorType(a.getKey()).getDimSize(1);
      if (hkv % tp == 0 || tp % hkv || hq % tp)
        return;
      ReplicatedKv info;
      if (kvChain(a.getKey(), info) && kvChain(a.getValue(), info))
        kvReplicated[a] = std::move(info);
    });
    llvm::DenseSet<Operation *> claimed; // parameters already split
    int64_t groups = 0;
    for (Value x : inputs) {
      Group g;
      Propagator prop(tp, kvReplicated);
      if (!prop.build(x, g))
        continue;
      // A split weight must be read only inside its group, once.
      bool ok = true;
      for (auto [c, d] : g.params)
        ok &= !claimed.count(c) && c->hasOneUse();
      for (AttentionOp a : g.kvReplicated)
        for (Operation *c : kvReplicated[a].params)
          ok &= !claimed.count(c) && c->hasOneUse();
      if (!ok)
        continue;
      for (auto [c, d] : g.params) claimed.insert(c);
      for (AttentionOp a : g.kvReplicated)
        for (Operation *c : kvReplicated[a].params) claimed.insert(c);
      apply(x, g, tpAxis);
      ++groups;
    }
    fwd->setAttr("loom.tp_groups", IntegerAttr::get(IntegerType::get(ctx, 64), groups));
  }

  llvm::DenseMap<Operation *, ReplicatedKv> kvReplicated;

  /// [B, Hkv, S, D] whole on every rank -> this rank's [B, Hkv*r/T, S, D]:
  /// repeat each kv head r = T / Hkv times, then a mean reduce-scatter of
  /// identical values hands rank t head t (the kv head of its queries).
  Value pickKvHeads(OpBuilder &b, Location loc, Value kv, ArrayAttr tpAxis) {
    auto t = tensorType(kv);
    int64_t B = t.getDimSize(0), H = t.getDimSize(1), S = t.getDimSize(2), D = t.getDimSize(3);
    int64_t r = tp / H;
    Type e = t.getElementType();
    Value x = b.create<ReshapeOp>(loc, RankedTensorType::get({B, H, 1, S, D}, e), kv);
    x = b.create<ExpandOp>(loc, RankedTensorType::get({B, H, r, S, D}, e), x);
    x = b.create<ReshapeOp>(loc, RankedTensorType::get({B, H * r, S, D}, e), x);
    return b.create<ReduceScatterOp>(loc, RankedTensorType::get({B, H * r / tp, S, D}, e), x,
                                     tpAxis, /*dim=*/1, ReduceKind::mean);
  }

  void apply(Value x, Group &g, ArrayAttr tpAxis) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    // Enter: the column-parallel matmuls read x through copy_to_parallel.
    if (Operation *def = x.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(x).getOwner());
    auto enter = b.create<CopyToParallelOp>(x.getLoc(), x.getType(), x, tpAxis);
    for (MatmulOp mm : g.columnParallel) mm.getLhsMutable().assign(enter);
    // Replicated key/value heads: their projections read x inside the
    // region too, their weights enter it (each rank's weight gradient is
    // its query heads' share), and each rank picks its kv heads.
    for (AttentionOp a : g.kvReplicated) {
      ReplicatedKv &info = kvReplicated[a];
      for (MatmulOp mm : info.seeds) mm.getLhsMutable().assign(enter);
      for (Operation *c : info.params) {
        Value w = c->getResult(0);
        OpBuilder pb(c->getContext());
        pb.setInsertionPointAfter(c);
        auto wrapped = pb.create<CopyToParallelOp>(c->getLoc(), w.getType(), w, tpAxis);
        w.replaceAllUsesExcept(wrapped.getResult(), wrapped);
      }
      OpBuilder kb(a);
      a.getKeyMutable().assign(pickKvHeads(kb, a.getLoc(), a.getKey(), tpAxis));
      a.getValueMutable().assign(pickKvHeads(kb, a.getLoc(), a.getValue(), tpAxis));
    }
    // Local types.
    for (auto [v, d] : g.dims) v.setType(shardType(tensorType(v), d, tp));
    for (auto [v, d] : g.views) v.setType(shardType(tensorType(v), d, tp));
    for (auto [c, d] : g.params) {
      auto constant = cast<ConstantOp>(c);
      Value w = constant.getResult();
      int64_t blocks = g.blocks.lookup(c) ? g.blocks.lookup(c) : 1;
      DenseElementsAttr local = firstShardOf(constant, d, tp, blocks);
      constant.setValueAttr(local);
      w.setType(local.getType());
      PlacementAttr p =
          PlacementAttr::get(ctx, MeshAxis::tp, PlacementKind::shard, d, ReduceKind::sum, blocks);
      c->setAttr(kShardingAttrName, ShardingAttr::get(ctx, {p}));
    }
    // Fused projections are cut into local parts.
    for (auto [v, parts] : g.fusedSplits)
      for (Operation *user : v.getUsers())
        if (auto sp = dyn_cast<SplitOp>(user)) {
          SmallVector<int64_t> sizes(sp.getSizes());
          for (int64_t &n : sizes) n /= tp;
          sp.setSizes(sizes);
        }
    // Exit: row-parallel products are partial sums.
    for (MatmulOp mm : g.rowParallel) {
      b.setInsertionPointAfter(mm);
      auto sum = b.create<AllReduceOp>(mm.getLoc(), mm.getType(), mm.getResult(), tpAxis,
                                       ReduceKind::sum);
      mm.getResult().replaceAllUsesExcept(sum.getResult(), sum);
    }
  }
};

} // namespace
} // namespace loom
