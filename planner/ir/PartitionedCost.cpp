//===- PartitionedCost.cpp - Costs read off a plan's partitioned IR -------===//
//
// Part of loom, under the Apache License v2.0.
//
// Collectives: every one in the per-rank @train_step, by kind, axes and
// size, timed with the ring formulas of Collectives.cpp on the link its
// group's ranks use.
//
// Context-parallel attention work, per cp rank c: the IR is the same on
// every rank, but which sequence chunks each attention op reads is not.
// The expansion of context_attention starts from the rank's own query, key
// and value rows, chunks c and 2C - 1 - c of the cp layout (the operands of
// its causal self block), and this walk follows chunk lists through what
// it is made of: splits and slices of the sequence dim, ring shifts
// (collective_permute: rank c holds what rank c - shift had), the
// all-gather of every rank's block and the embedding that picks blocks by
// per-rank ids (a constant table read through shard_slice), and `where`
// on per-rank bits. For each attention and attention_grad op it then
// counts the (query, key) pairs it computes (all of them, or the causal
// mask's triangle) and those whose key position is not after the query's:
// the work a rank does, and the part of it a causal model needs.
//===----------------------------------------------------------------------===//
#include "planner/ir/PartitionedCost.h"
#include "ir/Sharding.h"
#include "planner/Collectives.h"
#include "planner/ir/RankStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/DenseMap.h"

#include <iterator>
#include <optional>
#include <map>
#include <tuple>

using namespace mlir;

namespace loom::planner {

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

double bytesOf(Value v) {
  auto t = tensorOf(v);
  unsigned bits = t.getElementType().getIntOrFloatBitWidth();
  return double(t.getNumElements()) * double(bits) / 8.0;
}

/// Group size and the distance between consecutive members for a
/// collective over `axes` (the mesh is row-major, tp innermost).
std::pair<int, int> groupShape(MeshAttr mesh, ArrayAttr axes) {
  const MeshAxis order[] = {MeshAxis::pp, MeshAxis::dp_replicate, MeshAxis::dp_shard,
                            MeshAxis::cp, MeshAxis::tp};
  int size = 1, stride = 0;
  int64_t inner = 1;
  for (int k = int(std::size(order)) - 1; k >= 0; --k) {
    bool in = llvm::any_of(axes.getAsRange<MeshAxisAttr>(),
                           [&](MeshAxisAttr a) { return a.getValue() == order[k]; });
    if (in) {
      size *= int(mesh.size(order[k]));
      if (!stride)
        stride = int(inner);
    }
    inner *= mesh.size(order[k]);
  }
  return {size, std::max(stride, 1)};
}

std::string axesName(ArrayAttr axes) {
  std::string s;
  for (auto a : axes.getAsRange<MeshAxisAttr>())
    s += (s.empty() ? "" : ",") + stringifyMeshAxis(a.getValue()).str();
  return s;
}

/// (x, y) in [0, L)^2 with y <= x + d.
double pairsBelow(int64_t L, int64_t d) {
  if (d >= L - 1)
    return double(L) * double(L);
  if (d < -(L - 1))
    return 0;
  if (d >= 0)
    return double(L) * double(L) - double(L - 1 - d) * double(L - d) / 2;
  return double(L + d) * double(L + d + 1) / 2;
}

/// What the walk knows of a value on one cp rank: the sequence chunks
/// along its dim 2 (query, key rows), or the chunk lists of the blocks
/// along dim 0 of a gathered [blocks, E], or the elements of a small
/// integer (or bool) table.
struct Known {
  std::vector<int64_t> chunks;
  std::vector<std::vector<int64_t>> blocks;
  std::vector<int64_t> ints;
  enum { None, Chunks, Blocks, Ints } kind = None;
};

class ChunkWalk {
public:
  ChunkWalk(func::FuncOp step, int64_t C) : step(step), C(C), known(size_t(C)) {}

  void run(std::vector<CpRankAttention> &out) {
    out.assign(size_t(C), {});
    for (Operation &op : step.getBody().front()) {
      if (auto a = dyn_cast<AttentionOp>(op)) {
        if (a.getCausal())
          startRows({a.getQuery(), a.getKey(), a.getValue()});
        count(a.getQuery(), a.getKey(), a.getCausal(), /*backward=*/false, out);
        continue;
      }
      if (auto g = dyn_cast<AttentionGradOp>(op)) {
        if (g.getCausal())
          startRows({g.getQuery(), g.getKey(), g.getValue()});
        count(g.getQuery(), g.getKey(), g.getCausal(), /*backward=*/true, out);
        continue;
      }
      for (int64_t c = 0; c < C; ++c) step1(op, c);
    }
  }

private:
  /// What rank c knows of `v`: a copy, since recording a result may move
  /// the map's entries.
  std::optional<Known> get(int64_t c, Value v) {
    auto it = known[size_t(c)].find(v);
    if (it == known[size_t(c)].end())
      return std::nullopt;
    return it->second;
  }

  /// A causal block reads the rank's own rows: chunks c, 2C - 1 - c (also
  /// the bf16 storage a widening cast made the operand from).
  void startRows(std::initializer_list<Value> values) {
    for (Value v : values)
      for (int64_t c = 0; c < C; ++c) {
        Known k;
        k.kind = Known::Chunks;
        k.chunks = {c, 2 * C - 1 - c};
        if (!get(c, v))
          known[size_t(c)][v] = k;
        if (auto cast = v.getDefiningOp<CastOp>(); cast && !get(c, cast.getInput()))
          known[size_t(c)][cast.getInput()] = k;
      }
  }

  void count(Value q, Value k, bool causal, bool backward, std::vector<CpRankAttention> &out) {
    auto qt = tensorOf(q), kt = tensorOf(k);
    double heads = double(qt.getDimSize(0)) * double(qt.getDimSize(1));
    for (int64_t c = 0; c < C; ++c) {
      std::optional<Known> qk = get(c, q), kk = get(c, k);
      if (!qk || !kk || qk->kind != Known::Chunks || kk->kind != Known::Chunks ||
          qk->chunks.empty() || kk->chunks.empty())
        continue;
      int64_t L = qt.getDimSize(2) / int64_t(qk->chunks.size());
      int64_t offset = std::max<int64_t>(kt.getDimSize(2) - qt.getDimSize(2), 0);
      double computed = 0, visible = 0;
      for (size_t i = 0; i < qk->chunks.size(); ++i)
        for (size_t j = 0; j < kk->chunks.size(); ++j) {
          int64_t local = int64_t(i) * L + offset - int64_t(j) * L; // the kernel's mask
          int64_t global = (qk->chunks[i] - kk->chunks[j]) * L;    // the positions'
          computed += causal ? pairsBelow(L, local) : double(L) * double(L);
          visible += pairsBelow(L, causal ? std::min(local, global) : global);
        }
      CpRankAttention &r = out[size_t(c)];
      (backward ? r.backward : r.forward) += computed * heads;
      (backward ? r.backwardVisible : r.forwardVisible) += visible * heads;
    }
  }

  /// The knowledge of rank c after `op`.
  void step1(Operation &op, int64_t c) {
    auto &mine = known[size_t(c)];
    auto set = [&](Value v, Known k) { mine[v] = std::move(k); };
    if (auto k = dyn_cast<ConstantOp>(op)) {
      auto t = tensorOf(k.getResult());
      auto dense = dyn_cast<DenseElementsAttr>(k.getValue());
      if (!dense || !t.getElementType().isInteger() || t.getNumElements() > 4096)
        return;
      Known v;
      v.kind = Known::Ints;
      if (t.getElementType().isInteger(1))
        for (bool b : dense.getValues<bool>()) v.ints.push_back(b);
      else
        for (const APInt &x : dense.getValues<APInt>()) v.ints.push_back(x.getSExtValue());
      set(k.getResult(), v);
      return;
    }
    if (isa<ReshapeOp, CastOp>(op)) {
      // A block flattened to a row of the gathered [blocks, E] and back
      // keeps its chunks; other layouts are not followed.
      std::optional<Known> in = get(c, op.getOperand(0));
      auto from = tensorOf(op.getOperand(0)), to = tensorOf(op.getResult(0));
      bool sameRows = to.getRank() == 4 && from.getRank() == 4 &&
                      to.getDimSize(2) == from.getDimSize(2);
      bool row = (to.getRank() == 2 && to.getDimSize(0) == 1) ||
                 (from.getRank() == 2 && from.getDimSize(0) == 1 && to.getRank() == 4);
      if (in && (in->kind != Known::Chunks || sameRows || row))
        set(op.getResult(0), *in);
      return;
    }
    if (auto s = dyn_cast<ShardSliceOp>(op)) {
      std::optional<Known> in = get(c, s.getInput());
      auto axes = s.getAxes();
      if (!in || in->kind != Known::Ints || axes.size() != 1 ||
          cast<MeshAxisAttr>(axes[0]).getValue() != MeshAxis::cp)
        return;
      set(s.getResult(), rankSlice(*in, tensorOf(s.getInput()).getShape(), s.getDim(), c, C));
      return;
    }
    if (auto s = dyn_cast<SplitOp>(op)) {
      std::optional<Known> in = get(c, s.getInput());
      if (!in)
        return;
      ArrayRef<int64_t> shape = tensorOf(s.getInput()).getShape();
      int64_t axis = s.getAxis(), at = 0;
      for (Value r : s.getResults()) {
        int64_t n = tensorOf(r).getDimSize(axis);
        if (in->kind == Known::Ints) {
          set(r, sliceInts(*in, shape, axis, at, n));
        } else if (in->kind == Known::Chunks && axis == 2 && holdsChunks(shape, *in)) {
          int64_t L = shape[2] / int64_t(in->chunks.size());
          Known k;
          k.kind = Known::Chunks;
          k.chunks.assign(in->chunks.begin() + at / L, in->chunks.begin() + (at + n) / L);
          set(r, k);
        } else if (in->kind == Known::Blocks && axis == 0 && n == 1) {
          Known k;
          k.kind = Known::Chunks;
          k.chunks = in->blocks[size_t(at)];
          set(r, k);
        }
        at += n;
      }
      return;
    }
    if (auto s = dyn_cast<SliceOp>(op)) {
      std::optional<Known> in = get(c, s.getInput());
      if (!in || in->kind != Known::Chunks ||
          !holdsChunks(tensorOf(s.getInput()).getShape(), *in) || s.getSteps()[2] != 1)
        return;
      int64_t L = tensorOf(s.getInput()).getDimSize(2) / int64_t(in->chunks.size());
      Known k;
      k.kind = Known::Chunks;
      k.chunks.assign(in->chunks.begin() + s.getStarts()[2] / L,
                      in->chunks.begin() + (s.getStarts()[2] + s.getSizes()[2]) / L);
      set(s.getResult(), k);
      return;
    }
    if (auto p = dyn_cast<CollectivePermuteOp>(op)) {
      // Rank c holds what rank c - shift had (group order = cp order).
      int64_t from = ((c - p.getShift()) % C + C) % C;
      if (std::optional<Known> in = get(from, p.getInput()))
        set(p.getResult(), *in);
      return;
    }
    if (auto g = dyn_cast<AllGatherOp>(op)) {
      if (g.getDim() != 0)
        return;
      Known k;
      k.kind = Known::Blocks;
      for (int64_t r = 0; r < C; ++r) {
        std::optional<Known> in = get(r, g.getInput());
        if (!in || in->kind != Known::Chunks)
          return;
        k.blocks.push_back(in->chunks);
      }
      set(g.getResult(), k);
      return;
    }
    if (auto e = dyn_cast<EmbeddingOp>(op)) {
      std::optional<Known> table = get(c, e.getTable()), ids = get(c, e.getIndices());
      if (!table || !ids || table->kind != Known::Blocks || ids->kind != Known::Ints)
        return;
      Known k;
      k.kind = Known::Blocks;
      for (int64_t id : ids->ints) k.blocks.push_back(table->blocks[size_t(id)]);
      set(e.getResult(), k);
      return;
    }
    if (auto w = dyn_cast<WhereOp>(op)) {
      std::optional<Known> cond = get(c, w.getCondition());
      if (!cond || cond->kind != Known::Ints || cond->ints.size() != 1)
        return;
      if (std::optional<Known> in = get(c, cond->ints[0] ? w.getLhs() : w.getRhs()))
        set(w.getResult(), *in);
    }
  }

  /// Whether a value of `shape` holds `k`'s chunks along dim 2 (a reshape
  /// may have carried them into another layout, which is not followed).
  static bool holdsChunks(ArrayRef<int64_t> shape, const Known &k) {
    return shape.size() == 4 && !k.chunks.empty() && shape[2] % int64_t(k.chunks.size()) == 0 &&
           shape[2] >= int64_t(k.chunks.size());
  }

  /// Elements [at, at + n) along `dim` of an integer table of `shape`.
  static Known sliceInts(const Known &in, ArrayRef<int64_t> shape, int64_t dim, int64_t at,
                         int64_t n) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
    for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
    Known k;
    k.kind = Known::Ints;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = at; i < at + n; ++i)
        for (int64_t j = 0; j < inner; ++j)
          k.ints.push_back(in.ints[size_t((o * shape[dim] + i) * inner + j)]);
    return k;
  }

  /// Rank c's part of a shard_slice over cp along `dim`.
  static Known rankSlice(const Known &in, ArrayRef<int64_t> shape, int64_t dim, int64_t c,
                         int64_t C) {
    int64_t n = shape[dim] / C;
    return sliceInts(in, shape, dim, c * n, n);
  }

  func::FuncOp step;
  int64_t C;
  std::vector<llvm::DenseMap<Value, Known>> known;
};

} // namespace

void partitionedCostOf(ModuleOp module, const HardwareProfile &hw, int gpusPerNode,
                       PartitionedCost &out) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  MeshAttr mesh = lookupMesh(step);
  out = PartitionedCost();
  std::map<std::tuple<std::string, std::string, double>, size_t> index;
  auto add = [&](const char *op, ArrayAttr axes, double bytes, CommKind kind, bool ring) {
    auto [size, stride] = groupShape(mesh, axes);
    const Link &link = groupLink(hw, size, stride, gpusPerNode);
    auto key = std::make_tuple(std::string(op), axesName(axes), bytes);
    auto [it, fresh] = index.try_emplace(key, out.collectives.size());
    if (fresh) {
      IrCollective c;
      c.op = op;
      c.axes = axesName(axes);
      c.ranks = size;
      c.link = link.name;
      c.bytes = bytes;
      c.seconds = ring ? sendRecvTime(bytes, link) : collectiveTime(kind, size, bytes, link);
      out.collectives.push_back(c);
    }
    IrCollective &c = out.collectives[it->second];
    ++c.count;
    out.commSeconds += c.seconds;
  };
  step.walk([&](Operation *op) {
    if (auto r = dyn_cast<AllReduceOp>(op))
      add("all_reduce", r.getAxes(), bytesOf(r.getInput()), CommKind::AllReduce, false);
    else if (auto g = dyn_cast<AllGatherOp>(op))
      add("all_gather", g.getAxes(), bytesOf(g.getResult()), CommKind::AllGather, false);
    else if (auto s = dyn_cast<ReduceScatterOp>(op))
      add("reduce_scatter", s.getAxes(), bytesOf(s.getInput()), CommKind::ReduceScatter, false);
    else if (auto p = dyn_cast<CollectivePermuteOp>(op))
      add("collective_permute", p.getAxes(), bytesOf(p.getInput()), CommKind::SendRecv, true);
  });
  if (mesh && mesh.getCp() > 1)
    ChunkWalk(step, mesh.getCp()).run(out.cpRanks);
}

bool partitionedCost(const std::string &path, int64_t microbatch, int64_t seq, const Plan &plan,
                     const HardwareProfile &hw, int gpusPerNode, PartitionedCost &out,
                     std::string &err) {
  train::TrainProgram step;
  return compileRankStep(path, microbatch, seq, plan, step, err, [&](ModuleOp module) {
    partitionedCostOf(module, hw, gpusPerNode, out);
  });
}

} // namespace loom::planner
