//===- SequenceSharding.cpp - Following the sequence dim through @forward -===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/SequenceSharding.h"
#include "passes/PatternUtils.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace loom {

namespace {

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

/// Element-wise ops whose operands broadcast (NumPy) to the result.
bool isBroadcasting(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, WhereOp>(op);
}

/// Ops that keep their single tensor operand's layout.
bool isSameLayout(Operation *op) {
  return isa<NegOp, SqrtOp, RsqrtOp, ReciprocalOp, ExpOp, LogOp, TanhOp, SigmoidOp, SiluOp,
             CosOp, SinOp, GeluOp, ReluOp, ErfOp, SoftplusOp, CastOp, CopyToParallelOp,
             AllReduceOp, CollectivePermuteOp>(op);
}

class Follower {
public:
  Follower(int64_t seqLen, const std::function<bool(OpOperand &)> &stop, bool allowAttention,
           StringRef why, SequenceRegion &out)
      : T(seqLen), stop(stop), allowAttention(allowAttention), why(why), out(out) {}

  LogicalResult run(ArrayRef<std::pair<Value, int64_t>> seeds) {
    for (auto [v, d] : seeds)
      if (failed(mark(v, d, v.getDefiningOp())))
        return failure();
    while (!work.empty()) {
      Value v = work.pop_back_val();
      int64_t d = out.dims.lookup(v);
      for (OpOperand &use : v.getUses()) {
        if (stop(use))
          continue;
        visited.insert(use.getOwner());
        if (failed(resultDims(use, d)))
          return failure();
      }
    }
    for (Operation *op : visited)
      if (failed(classifyOperands(op)))
        return failure();
    return success();
  }

private:
  InFlightDiagnostic error(Operation *op, int64_t d, Value v) {
    return op->emitError() << why << ": cannot split the sequence (dim " << d << " of "
                           << v.getType() << ") through " << op->getName();
  }

  LogicalResult mark(Value v, int64_t d, Operation *at) {
    auto t = tensorType(v);
    if (d < 0 || d >= t.getRank() || t.getDimSize(d) % T) {
      if (at)
        return at->emitError() << why << ": dim " << d << " of " << v.getType()
                               << " does not hold the sequence of " << T;
      return emitError(v.getLoc()) << why << ": dim " << d << " of " << v.getType()
                                   << " does not hold the sequence of " << T;
    }
    auto [it, inserted] = out.dims.insert({v, d});
    if (inserted)
      work.push_back(v);
    else if (it->second != d && at)
      return at->emitError() << why << ": the sequence reaches " << v.getType()
                             << " in dims " << it->second << " and " << d;
    return success();
  }

  /// Where dim d (sequence innermost) of a reshape's input lands in its
  /// output: the dim with the same stride inside that still holds whole
  /// sequences; -1 when the reshape moves positions into other dims.
  int64_t reshapeDim(ArrayRef<int64_t> in, ArrayRef<int64_t> outShape, int64_t d) const {
    int64_t inner = product(in.drop_front(d + 1));
    for (size_t e = 0; e < outShape.size(); ++e)
      if (product(outShape.drop_front(e + 1)) == inner && outShape[e] % T == 0)
        return int64_t(e);
    return -1;
  }

  LogicalResult resultDims(OpOperand &use, int64_t d) {
    Operation *op = use.getOwner();
    Value v = use.get();
    unsigned k = use.getOperandNumber();
    int64_t rank = tensorType(v).getRank();
    if (isa<func::ReturnOp>(op)) {
      out.reachesReturn = true;
      return success();
    }
    if (isBroadcasting(op)) {
      Value r = op->getResult(0);
      int64_t rd = d + tensorType(r).getRank() - rank;
      if (tensorType(r).getDimSize(rd) != tensorType(v).getDimSize(d))
        return error(op, d, v);
      return mark(r, rd, op);
    }
    if (isSameLayout(op) || isa<SwiGluOp>(op))
      return mark(op->getResult(0), d, op);
    if (isa<RmsNormOp, LayerNormOp, RotaryOp>(op)) {
      if (k != 0 || d == rank - 1)
        return error(op, d, v);
      return mark(op->getResult(0), d, op);
    }
    if (auto mm = dyn_cast<MatmulOp>(op)) {
      if (k != 0 || mm.getTransposeLhs() || d >= rank - 1)
        return error(op, d, v);
      return mark(mm.getResult(), d + tensorType(mm.getResult()).getRank() - rank, op);
    }
    if (auto r = dyn_cast<ReshapeOp>(op)) {
      int64_t e = reshapeDim(tensorType(v).getShape(), tensorType(r.getResult()).getShape(), d);
      if (e < 0)
        return error(op, d, v);
      return mark(r.getResult(), e, op);
    }
    if (auto t = dyn_cast<TransposeOp>(op)) {
      ArrayRef<int64_t> perm = t.getPermutation();
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] == d)
          return mark(t.getResult(), int64_t(i), op);
      return error(op, d, v);
    }
    if (isa<EmbeddingOp, VocabShardEmbeddingOp>(op)) {
      if (k != 1)
        return error(op, d, v);
      return mark(op->getResult(0), d, op);
    }
    if (isa<AttentionOp, ContextAttentionOp>(op)) {
      if (!allowAttention) {
        op->emitError() << why << ": attention is reached outside a tensor-parallel region "
                        << "(its projections were not split over tp)";
        return failure();
      }
      if (d != 2 || k > 2)
        return error(op, d, v);
      if (auto a = dyn_cast<AttentionOp>(op); a && !llvm::is_contained(out.attentions, a))
        out.attentions.push_back(a);
      if (failed(mark(op->getResult(0), 2, op)))
        return failure();
      return mark(op->getResult(1), 2, op); // the logsumexp [B, H, T]
    }
    if (auto s = dyn_cast<SplitOp>(op)) {
      if (int64_t(s.getAxis()) == d)
        return error(op, d, v);
      for (Value r : s.getResults())
        if (failed(mark(r, d, op)))
          return failure();
      return success();
    }
    if (auto c = dyn_cast<ConcatOp>(op)) {
      if (int64_t(c.getAxis()) == d)
        return error(op, d, v);
      return mark(c.getResult(), d, op);
    }
    if (auto s = dyn_cast<SliceOp>(op)) {
      if (s.getStarts()[d] != 0 || s.getSteps()[d] != 1 ||
          s.getSizes()[d] != tensorType(v).getDimSize(d))
        return error(op, d, v);
      return mark(s.getResult(), d, op);
    }
    if (auto e = dyn_cast<ExpandOp>(op)) {
      int64_t rd = d + tensorType(e.getResult()).getRank() - rank;
      if (tensorType(e.getResult()).getDimSize(rd) != tensorType(v).getDimSize(d))
        return error(op, d, v);
      return mark(e.getResult(), rd, op);
    }
    if (auto r = dyn_cast<ReduceOp>(op)) {
      ArrayRef<int64_t> axes = r.getAxes();
      if (llvm::is_contained(axes, d))
        return error(op, d, v);
      int64_t before = r.getKeepdim() ? 0 : llvm::count_if(axes, [&](int64_t a) { return a < d; });
      return mark(r.getResult(), d - before, op);
    }
    if (auto s = dyn_cast<ShardSliceOp>(op)) {
      if (int64_t(s.getDim()) == d)
        return error(op, d, v);
      return mark(s.getResult(), d, op);
    }
    if (auto g = dyn_cast<AllGatherOp>(op)) {
      if (int64_t(g.getDim()) == d)
        return error(op, d, v);
      return mark(g.getResult(), d, op);
    }
    if (auto rs = dyn_cast<ReduceScatterOp>(op)) {
      if (int64_t(rs.getDim()) == d)
        return error(op, d, v);
      return mark(rs.getResult(), d, op);
    }
    return error(op, d, v);
  }

  /// After the region is known: each operand of a visited op is in the
  /// region at the expected dim, or foreign (a broadcast weight, possibly
  /// read per row and so given a partial gradient; or a table with the
  /// whole sequence to slice).
  LogicalResult classifyOperands(Operation *op) {
    if (isa<func::ReturnOp>(op))
      return success();
    auto regionDim = [&](Value v) -> int64_t {
      auto it = out.dims.find(v);
      return it == out.dims.end() ? -1 : it->second;
    };
    // The result dim every operand aligns to (broadcasting ops).
    if (isBroadcasting(op)) {
      Value r = op->getResult(0);
      int64_t R = tensorType(r).getRank(), rd = regionDim(r);
      for (OpOperand &o : op->getOpOperands()) {
        auto t = tensorType(o.get());
        int64_t od = rd - (R - t.getRank());
        if (regionDim(o.get()) >= 0) {
          if (regionDim(o.get()) != od)
            return error(op, regionDim(o.get()), o.get());
          continue;
        }
        if (od < 0 || t.getDimSize(od) == 1) {
          foreign(o);
        } else if (t.getDimSize(od) == T) {
          out.slices.push_back({&o, od});
        } else {
          return op->emitError() << why << ": operand " << o.getOperandNumber() << " "
                                 << o.get().getType() << " meets the sequence in dim " << od
                                 << " but is neither whole nor broadcast there";
        }
      }
      return success();
    }
    if (auto r = dyn_cast<RotaryOp>(op)) {
      int64_t R = tensorType(r.getInput()).getRank(), rd = regionDim(r.getInput());
      for (OpOperand *o : {&r.getCosMutable(), &r.getSinMutable()}) {
        auto t = tensorType(o->get());
        int64_t od = rd - (R - t.getRank());
        if (regionDim(o->get()) >= 0)
          return error(op, regionDim(o->get()), o->get());
        if (od >= 0 && t.getDimSize(od) == T)
          out.slices.push_back({o, od});
        else if (od >= 0 && t.getDimSize(od) != 1)
          return op->emitError() << why << ": the rotary table " << t
                                 << " is neither whole nor broadcast along the sequence";
      }
      return success();
    }
    // Every other rule: the tensor operands that carry the sequence must
    // be region values, the rest are weights broadcast over the rows.
    for (OpOperand &o : op->getOpOperands()) {
      bool carries = isa<SwiGluOp, ConcatOp>(op) ||
                     (isa<AttentionOp, ContextAttentionOp>(op) && o.getOperandNumber() < 3) ||
                     (isa<EmbeddingOp, VocabShardEmbeddingOp>(op) && o.getOperandNumber() == 1) ||
                     ((isa<RmsNormOp, LayerNormOp, MatmulOp>(op) || isSameLayout(op) ||
                       op->getNumOperands() == 1) &&
                      o.getOperandNumber() == 0);
      if (carries && regionDim(o.get()) < 0)
        return op->emitError() << why << ": operand " << o.getOperandNumber() << " "
                               << o.get().getType() << " does not hold the sequence like the rest";
      if (!carries) {
        if (regionDim(o.get()) >= 0)
          return error(op, regionDim(o.get()), o.get());
        foreign(o);
      }
    }
    return success();
  }

  void foreign(OpOperand &o) {
    if (isa<FloatType>(tensorType(o.get()).getElementType()))
      out.partialUses.push_back(&o); // filtered to active values by the caller
  }

  int64_t T;
  const std::function<bool(OpOperand &)> &stop;
  bool allowAttention;
  StringRef why;
  SequenceRegion &out;
  SmallVector<Value> work;
  llvm::SetVector<Operation *> visited;
};

} // namespace

LogicalResult followSequence(func::FuncOp f, int64_t seqLen,
                             ArrayRef<std::pair<Value, int64_t>> seeds,
                             const std::function<bool(OpOperand &)> &stop, bool allowAttention,
                             StringRef why, SequenceRegion &out) {
  Follower follower(seqLen, stop, allowAttention, why, out);
  if (failed(follower.run(seeds)))
    return failure();
  // Only operands that depend on a parameter get a gradient to sum.
  llvm::DenseSet<Value> active = activeValues(f);
  llvm::erase_if(out.partialUses, [&](OpOperand *o) { return !active.contains(o->get()); });
  return success();
}

llvm::DenseSet<Value> activeValues(func::FuncOp f) {
  llvm::DenseSet<Value> active;
  f.walk([&](Operation *op) {
    auto c = dyn_cast<ConstantOp>(op);
    bool isActive = (c && c.getParamAttr()) ||
                    llvm::any_of(op->getOperands(), [&](Value v) { return active.contains(v); });
    if (isActive)
      for (Value r : op->getResults()) active.insert(r);
  });
  return active;
}

void applySequenceRegion(func::FuncOp f, SequenceRegion &region, int64_t n, ArrayAttr axes,
                         const std::function<Value(OpBuilder &, Value, int64_t)> &slice) {
  OpBuilder b(f.getContext());
  auto after = [&](Value v) {
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
  };
  // Tables with the whole sequence: one slice per table and dim.
  llvm::DenseMap<std::pair<Value, int64_t>, Value> sliced;
  for (auto [use, d] : region.slices) {
    Value &s = sliced[{use->get(), d}];
    if (!s) {
      after(use->get());
      s = slice(b, use->get(), d);
    }
    use->set(s);
  }
  // Parameters read per row: one copy_to_parallel each.
  llvm::DenseMap<Value, Value> entered;
  for (OpOperand *use : region.partialUses) {
    Value &e = entered[use->get()];
    if (!e) {
      after(use->get());
      e = b.create<CopyToParallelOp>(use->get().getLoc(), use->get().getType(), use->get(), axes);
    }
    use->set(e);
  }
  // Local types. A slice states its window, so its size follows.
  for (auto [v, d] : region.dims) {
    auto t = tensorType(v);
    SmallVector<int64_t> shape(t.getShape());
    shape[d] /= n;
    v.setType(RankedTensorType::get(shape, t.getElementType()));
    if (auto s = v.getDefiningOp<SliceOp>()) {
      SmallVector<int64_t> sizes(s.getSizes());
      sizes[d] = shape[d];
      s.setSizes(sizes);
    }
  }
  Block &body = f.getBody().front();
  SmallVector<Type> args, results;
  for (BlockArgument a : body.getArguments()) args.push_back(a.getType());
  for (Value v : body.getTerminator()->getOperands()) results.push_back(v.getType());
  f.setFunctionType(FunctionType::get(f.getContext(), args, results));
}

Value splitSequenceDim(OpBuilder &b, Value x, int64_t d, int64_t seqLen) {
  auto t = tensorType(x);
  int64_t outer = t.getDimSize(d) / seqLen;
  if (outer == 1)
    return x;
  SmallVector<int64_t> shape(t.getShape().take_front(d));
  shape.append({outer, seqLen});
  shape.append(t.getShape().begin() + d + 1, t.getShape().end());
  return b.create<ReshapeOp>(x.getLoc(), RankedTensorType::get(shape, t.getElementType()), x);
}

Value mergeSequenceDim(OpBuilder &b, Value x, int64_t d, int64_t outer) {
  if (outer == 1)
    return x;
  auto t = tensorType(x);
  SmallVector<int64_t> shape(t.getShape().take_front(d));
  shape.push_back(t.getDimSize(d) * t.getDimSize(d + 1));
  shape.append(t.getShape().begin() + d + 2, t.getShape().end());
  return b.create<ReshapeOp>(x.getLoc(), RankedTensorType::get(shape, t.getElementType()), x);
}

void dropCopiesToParallel(func::FuncOp f) {
  f.walk([](CopyToParallelOp c) {
    c.getResult().replaceAllUsesWith(c.getInput());
    c.erase();
  });
}

void addSharding(func::FuncOp f, unsigned r, bool argument, PlacementAttr p) {
  MLIRContext *ctx = f.getContext();
  ShardingAttr old = argument ? f.getArgAttrOfType<ShardingAttr>(r, kShardingAttrName)
                              : f.getResultAttrOfType<ShardingAttr>(r, kShardingAttrName);
  SmallVector<PlacementAttr> ps;
  if (old)
    ps.append(old.getPlacements().begin(), old.getPlacements().end());
  ps.push_back(p);
  if (argument)
    f.setArgAttr(r, kShardingAttrName, ShardingAttr::get(ctx, ps));
  else
    f.setResultAttr(r, kShardingAttrName, ShardingAttr::get(ctx, ps));
}

} // namespace loom
