//===- RecomputeAnalysis.cpp - What a recompute policy keeps --------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/Recompute.h"
#include "ir/Sharding.h"
#include "planner/ShardingRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <climits>
#include <map>

using namespace mlir;

namespace loom {

const char *recomputePolicyName(RecomputePolicy p) {
  switch (p) {
  case RecomputePolicy::none: return "none";
  case RecomputePolicy::full: return "full";
  case RecomputePolicy::selective: return "selective";
  case RecomputePolicy::budget: return "budget";
  }
  return "?";
}

std::optional<RecomputePolicy> parseRecomputePolicy(llvm::StringRef s) {
  for (RecomputePolicy p : {RecomputePolicy::none, RecomputePolicy::full, RecomputePolicy::selective,
                            RecomputePolicy::budget})
    if (s == recomputePolicyName(p))
      return p;
  return std::nullopt;
}

namespace {

// The budget policy ranks recomputation by its time on the planner's H100
// profile (planner/profiles/h100.json): dense bf16 peak at the large-GEMM
// efficiency the project measured, fp32 without tensor cores, attention at
// half the GEMM rate, achieved HBM bandwidth, and a launch per kernel. Only
// the order of the candidates depends on these numbers; whether a choice
// fits is measured on the compiler's buffer plan.
constexpr double kBf16Flops = 989e12 * 0.828;
constexpr double kF32Flops = 67e12;
constexpr double kAttentionEfficiency = 0.5;
constexpr double kHbmBytesPerSecond = 3.35e12 * 0.8;
constexpr double kLaunchSeconds = 4e-6;

uint64_t tensorBytes(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t)
    return 0;
  unsigned bits = t.getElementType().getIntOrFloatBitWidth();
  return uint64_t(t.getNumElements()) * std::max(1u, bits / 8);
}

bool isBf16(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType().isBF16())
    return true;
  auto c = v.getDefiningOp<CastOp>();
  return c && cast<RankedTensorType>(c.getInput().getType()).getElementType().isBF16();
}

bool isWideningCast(Operation *op) {
  auto c = dyn_cast_or_null<CastOp>(op);
  return c && cast<RankedTensorType>(c.getInput().getType()).getElementType().isBF16() &&
         cast<RankedTensorType>(c.getResult().getType()).getElementType().isF32();
}

bool isNarrowingCast(Operation *op) {
  auto c = dyn_cast_or_null<CastOp>(op);
  return c && cast<RankedTensorType>(c.getInput().getType()).getElementType().isF32() &&
         cast<RankedTensorType>(c.getResult().getType()).getElementType().isBF16();
}

/// GEMMs and attention: what recomputing costs FLOPs, not only bandwidth.
bool isExpensive(Operation *op) { return isa<MatmulOp, AttentionOp>(op); }

double opFlops(Operation *op) {
  if (auto m = dyn_cast<MatmulOp>(op)) {
    auto lhs = cast<RankedTensorType>(m.getLhs().getType());
    auto res = cast<RankedTensorType>(m.getResult().getType());
    double k = double(m.getTransposeLhs() ? lhs.getShape()[lhs.getRank() - 2] : lhs.getShape().back());
    return 2.0 * double(res.getNumElements()) * k;
  }
  if (auto a = dyn_cast<AttentionOp>(op)) {
    SmallVector<int64_t, 4> q = attentionHeadsMajorDims(
        cast<RankedTensorType>(a.getQuery().getType()).getShape(), a.getLayout());
    double s = double(attentionHeadsMajorDims(
        cast<RankedTensorType>(a.getKey().getType()).getShape(), a.getLayout())[2]);
    double f = 4.0 * double(q[0]) * double(q[1]) * double(q[2]) * s * double(q[3]);
    return a.getCausal() ? f / 2 : f;
  }
  return 0;
}

/// "q_proj" of "model.layers.0.self_attn.q_proj.weight".
std::string moduleOf(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> parts;
  name.split(parts, '.');
  if (parts.size() >= 2)
    return parts[parts.size() - 2].str();
  return name.str();
}

/// Ops that only move or convert a parameter (FSDP's gather, autocast's
/// rounding, a layout change): their result is the parameter in another
/// form, so it belongs to the parameter's layer.
bool carriesParameter(Operation *op) {
  return isa<CastOp, AllGatherOp, TransposeOp, ReshapeOp, CopyToParallelOp>(op) &&
         op->getNumOperands() == 1;
}

} // namespace

FailureOr<RecomputeAnalysis> RecomputeAnalysis::analyze(func::FuncOp step) {
  RecomputeAnalysis a;
  a.fn = step;
  if (!step.getBody().hasOneBlock())
    return step.emitError("loom-recompute: @") << step.getName() << " must have one block",
           failure();
  Block &body = step.getBody().front();
  for (Operation &op : body.without_terminator()) {
    a.position[&op] = int(a.ops.size());
    a.ops.push_back(&op);
  }
  for (size_t i = 0; i < a.ops.size(); ++i) {
    // The vocabulary-parallel loss (loss_parallel) is one shard's part of
    // cross-entropy and its gradient.
    if (a.lossAt < 0 && isa<CrossEntropyOp, VocabShardCrossEntropyOp>(a.ops[i]))
      a.lossAt = int(i);
    if (a.lossAt >= 0 && isa<CrossEntropyGradOp, VocabShardCrossEntropyGradOp>(a.ops[i])) {
      a.backwardAt = int(i);
      break;
    }
  }
  if (a.lossAt < 0)
    return step.emitError("loom-recompute: @")
               << step.getName()
               << " has no loss (loom.cross_entropy or loom.vocab_shard_cross_entropy)",
           failure();
  if (a.backwardAt < 0)
    return step.emitError("loom-recompute: @")
               << step.getName() << " has no backward (loom.cross_entropy_grad after the loss)",
           failure();

  // Parameters: BuildTrainStep's arguments 0..P-1 (then both moments, step,
  // tokens, targets), named with loom.name.
  unsigned n = step.getNumArguments();
  unsigned P = n >= 6 && (n - 3) % 3 == 0 ? (n - 3) / 3 : 0;
  llvm::DenseMap<Value, Value> derivedFrom; // parameter-derived value -> parameter
  int maxLayer = -1;
  llvm::SmallVector<Value> unnumbered;
  for (unsigned i = 0; i < P; ++i) {
    Value arg = body.getArgument(i);
    auto name = step.getArgAttrOfType<StringAttr>(i, "loom.name");
    if (!name)
      continue;
    a.paramModule[arg] = moduleOf(name.getValue());
    derivedFrom[arg] = arg;
    if (std::optional<int> l = planner::layerIndexOf(name.str())) {
      a.paramLayer[arg] = *l;
      maxLayer = std::max(maxLayer, *l);
    } else {
      unnumbered.push_back(arg);
    }
  }
  a.layers = maxLayer + 1;
  // Parameter-derived forward values, and the first forward op that
  // computes with a numbered (layer) parameter.
  int firstLayerUse = a.lossAt + 1;
  llvm::DenseMap<Value, int> firstUse; // parameter -> first computing forward op
  for (int i = 0; i <= a.lossAt; ++i) {
    Operation *op = a.ops[size_t(i)];
    if (carriesParameter(op) && derivedFrom.count(op->getOperand(0))) {
      derivedFrom[op->getResult(0)] = derivedFrom.lookup(op->getOperand(0));
      continue;
    }
    for (Value v : op->getOperands()) {
      Value p = derivedFrom.lookup(v);
      if (!p)
        continue;
      firstUse.try_emplace(p, i);
      if (a.paramLayer.count(p))
        firstLayerUse = std::min(firstLayerUse, i);
    }
  }
  // An unnumbered parameter used before the first layer computes is an
  // embedding (token or position table); any other (final norm, LM head)
  // belongs to the head.
  for (Value p : unnumbered) {
    auto it = firstUse.find(p);
    a.paramLayer[p] = it != firstUse.end() && it->second < firstLayerUse ? kEmbeddingGroup : a.layers;
  }
  for (auto &[v, p] : derivedFrom)
    if (v != p && a.paramModule.count(p))
      a.paramModule[v] = a.paramModule.lookup(p);

  // Forward ops: the highest layer among their operands; a parameter in
  // another form stays in its parameter's layer.
  for (int i = 0; i <= a.lossAt; ++i) {
    Operation *op = a.ops[size_t(i)];
    int layer = kEmbeddingGroup;
    if (op->getNumResults() && derivedFrom.count(op->getResult(0))) {
      layer = a.paramLayer.lookup(derivedFrom.lookup(op->getResult(0)));
    } else {
      for (Value v : op->getOperands()) layer = std::max(layer, a.layerOf(v));
    }
    a.opLayer[op] = layer;
  }
  return a;
}

int RecomputeAnalysis::layerOf(Value v) const {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto it = paramLayer.find(arg);
    return it == paramLayer.end() ? kEmbeddingGroup : it->second;
  }
  auto it = opLayer.find(v.getDefiningOp());
  return it == opLayer.end() ? kEmbeddingGroup : it->second;
}

bool RecomputeAnalysis::isForwardValue(Value v) const {
  Operation *def = v.getDefiningOp();
  if (!def || isa<ConstantOp>(def))
    return false;
  auto it = position.find(def);
  return it != position.end() && it->second <= lossAt;
}

bool RecomputeAnalysis::isBackwardOp(Operation *op) const {
  auto it = position.find(op);
  return it != position.end() && it->second >= backwardAt;
}

bool RecomputeAnalysis::isBoundary(Value v) const {
  int layer = layerOf(v);
  for (Operation *user : v.getUsers()) {
    if (isa<func::ReturnOp>(user))
      return true;
    auto it = position.find(user);
    if (it != position.end() && it->second <= lossAt && opLayer.lookup(user) != layer)
      return true;
  }
  return false;
}

bool RecomputeAnalysis::isWeightForm(Value v) const {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<CastOp, ReshapeOp>(def))
      return false;
    v = def->getOperand(0);
  }
  return paramModule.count(v) > 0;
}

bool RecomputeAnalysis::isCandidate(Value v, int64_t every) const {
  if (!isForwardValue(v) || !checkpointed(layerOf(v), every) || isBoundary(v))
    return false;
  // A weight's bf16 rounding is the copy AdamW stores for the next step
  // (codegen's foldWeightRounding): live the whole step whatever the
  // policy, so the backward reads it rather than casting the f32 weight
  // again. A clone was a cast kernel over the weight and a second bf16
  // weight in memory: 3 to 8 of them a layer under selective and full
  // recompute, which foldWeightRounding (one rounding a parameter) left
  // in the step.
  if (isWeightForm(v))
    return false;
  // An FSDP gather of a parameter is re-gathered by the backward anyway
  // (apply() reuses that gather); never gathered again for a clone.
  auto g = v.getDefiningOp<AllGatherOp>();
  return !(g && isa<BlockArgument>(g.getInput()));
}

llvm::SetVector<Value> RecomputeAnalysis::fullSet(int64_t every) const {
  llvm::SetVector<Value> r;
  for (int i = 0; i <= lossAt; ++i)
    for (Value v : ops[size_t(i)]->getResults())
      if (isCandidate(v, every))
        r.insert(v);
  return r;
}

llvm::SmallVector<Value> RecomputeAnalysis::savePoints(Operation *op) const {
  llvm::SmallVector<Value> saved;
  if (auto a = dyn_cast<AttentionOp>(op))
    saved.push_back(a.getLse());
  // The result as the next op reads it: through a bias added in the same
  // GEMM (addmm) and autocast's rounding to bf16, each the only reader.
  Value v = op->getResult(0);
  saved.push_back(v);
  while (v.hasOneUse()) {
    Operation *user = *v.getUsers().begin();
    auto it = position.find(user);
    if (it == position.end() || it->second > lossAt)
      break;
    bool bias = false;
    if (auto add = dyn_cast<AddOp>(user)) {
      Value other = add.getLhs() == v ? add.getRhs() : add.getLhs();
      auto t = cast<RankedTensorType>(other.getType());
      bias = t.getRank() == 1 && paramModule.count(other);
    }
    if (!bias && !isNarrowingCast(user))
      break;
    v = user->getResult(0);
    saved.push_back(v);
  }
  return saved;
}

llvm::SetVector<Value> RecomputeAnalysis::selectiveSet(int64_t every) const {
  llvm::SetVector<Value> r = fullSet(every);
  // torchtitan's op-level policy: within each layer, save the 1st, 3rd,
  // ... matmul's output (never the 2nd, 4th, ...), every attention's output
  // and logsumexp, and reduce-scatter results (sequence parallelism).
  llvm::DenseMap<int, int> matmulsSeen;
  for (int i = 0; i <= lossAt; ++i) {
    Operation *op = ops[size_t(i)];
    int layer = opLayer.lookup(op);
    if (!checkpointed(layer, every) || op->getNumResults() == 0 ||
        paramModule.count(op->getResult(0)))
      continue;
    bool save = isa<AttentionOp, ReduceScatterOp>(op);
    if (isa<MatmulOp>(op))
      save = ++matmulsSeen[layer] % 2 == 1;
    if (save)
      for (Value v : savePoints(op)) r.remove(v);
  }
  return r;
}

Value RecomputeAnalysis::storageRoot(Value v) const {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ReshapeOp>(def) && !isWideningCast(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

uint64_t RecomputeAnalysis::storageBytes(Value v) const { return tensorBytes(storageRoot(v)); }

double RecomputeAnalysis::seconds(Operation *op) const {
  // Codegen makes reshapes views and folds autocast's casts into the
  // kernels that read or write them (codegen/FoldCasts.cpp), widenings
  // always: rebuilding one costs no kernel. A parameter's rounding to bf16
  // stays a cast kernel.
  if (isa<ReshapeOp>(op) || isWideningCast(op) ||
      (isa<CastOp>(op) && !paramModule.count(op->getOperand(0))))
    return 0;
  double bytes = 0;
  for (Value v : op->getOperands()) bytes += double(tensorBytes(v));
  for (Value v : op->getResults()) bytes += double(tensorBytes(v));
  double flops = opFlops(op), rate = kF32Flops;
  if (isa<MatmulOp>(op) && isBf16(op->getOperand(0)) && isBf16(op->getOperand(1)))
    rate = kBf16Flops;
  if (auto a = dyn_cast<AttentionOp>(op))
    rate = (isBf16(a.getQuery()) ? kBf16Flops : kF32Flops) * kAttentionEfficiency;
  return std::max(flops / rate, bytes / kHbmBytesPerSecond) + kLaunchSeconds;
}

RecomputeAnalysis::Outcome RecomputeAnalysis::simulate(const llvm::DenseSet<Value> &rebuilt) const {
  llvm::SetVector<Value> kept;
  llvm::DenseSet<Value> needed;
  llvm::SetVector<Operation *> recomputed;
  std::function<void(Value)> visit = [&](Value v) {
    if (!isForwardValue(v))
      return;
    if (!rebuilt.contains(v)) {
      kept.insert(v);
      return;
    }
    if (!needed.insert(v).second)
      return;
    Operation *def = v.getDefiningOp();
    if (!recomputed.insert(def))
      return;
    for (Value x : def->getOperands()) {
      // The clone of an op on an FSDP-gathered parameter reads the
      // backward's own gather (apply()).
      if (auto g = x.getDefiningOp<AllGatherOp>(); g && isa<BlockArgument>(g.getInput()))
        continue;
      visit(x);
    }
  };
  for (size_t i = size_t(backwardAt); i < ops.size(); ++i)
    for (Value v : ops[i]->getOperands()) visit(v);
  Outcome out;
  out.kept.assign(kept.begin(), kept.end());
  out.recomputed.assign(recomputed.begin(), recomputed.end());
  auto before = [&](Operation *x, Operation *y) { return position.lookup(x) < position.lookup(y); };
  llvm::stable_sort(out.kept, [&](Value x, Value y) {
    Operation *a = x.getDefiningOp(), *b = y.getDefiningOp();
    if (a != b)
      return before(a, b);
    return cast<OpResult>(x).getResultNumber() < cast<OpResult>(y).getResultNumber();
  });
  llvm::stable_sort(out.recomputed, before);
  for (Operation *op : out.recomputed) {
    out.recomputeSeconds += seconds(op);
    out.recomputeFlops += opFlops(op);
  }
  return out;
}

std::vector<llvm::SmallVector<Value>> RecomputeAnalysis::budgetMoves(int64_t every) const {
  // Per layer: its candidates, and the values of the layer the backward
  // reads (where a simulation of the layer starts).
  struct Layer {
    llvm::SetVector<Value> candidates;
    llvm::SmallVector<Value> read;
    llvm::DenseSet<Value> rebuilt;
    double bytes = 0, seconds = 0; // kept bytes of the layer, recompute time
    llvm::SmallVector<Value> bestMove;
    double bestScore = -1, bestCost = 0;
  };
  std::map<int, Layer> byLayer;
  llvm::SetVector<Value> all = fullSet(every);
  for (Value v : all) byLayer[layerOf(v)].candidates.insert(v);
  llvm::DenseSet<Value> readOnce;
  for (size_t i = size_t(backwardAt); i < ops.size(); ++i)
    for (Value v : ops[i]->getOperands())
      if (isForwardValue(v) && byLayer.count(layerOf(v)) && readOnce.insert(v).second)
        byLayer[layerOf(v)].read.push_back(v);

  // Kept bytes of the layer's own values and the recompute time when the
  // set `rebuilt` is rebuilt (chains stay in the layer: what another layer
  // reads is a boundary, never rebuilt).
  auto evaluate = [&](int layer, const Layer &l, const llvm::DenseSet<Value> &rebuilt, double &bytes,
                      double &secs) {
    llvm::DenseSet<Value> needed, roots;
    llvm::DenseSet<Operation *> recomputed;
    bytes = secs = 0;
    std::function<void(Value)> visit = [&](Value v) {
      if (!isForwardValue(v))
        return;
      if (!rebuilt.contains(v)) {
        Value r = storageRoot(v);
        if (layerOf(v) == layer && roots.insert(r).second)
          bytes += double(tensorBytes(r));
        return;
      }
      if (!needed.insert(v).second)
        return;
      Operation *def = v.getDefiningOp();
      if (!recomputed.insert(def).second)
        return;
      secs += seconds(def);
      for (Value x : def->getOperands()) visit(x);
    };
    for (Value v : l.read) visit(v);
  };
  // A move: `c` with the ops behind it that are not rebuilt yet, cheap ops
  // up to `hops` steps back, and through up to `gemms` GEMMs/attention
  // (each with its own cheap ops). Short moves matter as much as long ones:
  // rebuilding a rounding to bf16 keeps its f32 input, so the cheap
  // closure of a value can cost more memory than it frees.
  auto move = [&](const Layer &l, Value c, int hops, int gemms) {
    llvm::SetVector<Value> m;
    llvm::SmallVector<std::pair<Value, int>> level = {{c, 0}};
    for (int depth = 0; depth <= gemms && !level.empty(); ++depth) {
      llvm::SmallVector<std::pair<Value, int>> work(level), next;
      level.clear();
      while (!work.empty()) {
        auto [v, hop] = work.pop_back_val();
        if (!m.insert(v))
          continue;
        for (Value x : v.getDefiningOp()->getOperands()) {
          if (!l.candidates.contains(x) || l.rebuilt.contains(x) || m.contains(x))
            continue;
          if (isExpensive(x.getDefiningOp()))
            next.push_back({x, 0});
          else if (hop < hops)
            work.push_back({x, hop + 1});
        }
      }
      level = next;
    }
    return llvm::SmallVector<Value>(m.begin(), m.end());
  };
  auto rescore = [&](int layer, Layer &l) {
    evaluate(layer, l, l.rebuilt, l.bytes, l.seconds);
    l.bestScore = -1;
    l.bestMove.clear();
    for (Value c : l.candidates) {
      if (l.rebuilt.contains(c))
        continue;
      static constexpr std::pair<int, int> kShapes[] = {{0, 0}, {1, 0}, {2, 0}, {4, 0},
                                                        {INT_MAX, 0}, {INT_MAX, 1}, {INT_MAX, 2}};
      for (auto [hops, gemms] : kShapes) {
        llvm::SmallVector<Value> m = move(l, c, hops, gemms);
        llvm::DenseSet<Value> trial = l.rebuilt;
        trial.insert(m.begin(), m.end());
        double bytes, seconds;
        evaluate(layer, l, trial, bytes, seconds);
        double saved = l.bytes - bytes, cost = std::max(seconds - l.seconds, 1e-12);
        if (saved <= 0)
          continue;
        // Equal ratios (GEMMs of one contraction size all save about 2/K
        // bytes per FLOP): the smaller move first, so the budget can stop
        // at a finer step.
        double score = saved / cost;
        if (score > l.bestScore * (1 + 1e-9) ||
            (score >= l.bestScore * (1 - 1e-9) && cost < l.bestCost)) {
          l.bestScore = score;
          l.bestCost = cost;
          l.bestMove = m;
        }
      }
    }
  };
  for (auto &[layer, l] : byLayer) rescore(layer, l);
  std::vector<llvm::SmallVector<Value>> moves;
  llvm::DenseSet<Value> taken;
  while (true) {
    Layer *best = nullptr;
    int bestLayer = 0;
    for (auto &[layer, l] : byLayer)
      if (l.bestScore > 0 && (!best || l.bestScore > best->bestScore)) {
        best = &l;
        bestLayer = layer;
      }
    if (!best)
      break;
    best->rebuilt.insert(best->bestMove.begin(), best->bestMove.end());
    taken.insert(best->bestMove.begin(), best->bestMove.end());
    moves.push_back(best->bestMove);
    rescore(bestLayer, *best);
  }
  llvm::SmallVector<Value> rest;
  for (Value v : all)
    if (!taken.contains(v))
      rest.push_back(v);
  if (!rest.empty())
    moves.push_back(rest);
  return moves;
}

void RecomputeAnalysis::apply(const llvm::DenseSet<Value> &rebuilt) {
  std::vector<Operation *> backward(ops.begin() + backwardAt, ops.end());
  // The backward's own gathers of FSDP-sharded parameters, by parameter
  // (anywhere after the loss: prefetching moves them ahead of their readers).
  llvm::DenseMap<Value, llvm::SmallVector<AllGatherOp>> backwardGathers;
  for (size_t i = size_t(lossAt) + 1; i < ops.size(); ++i)
    if (auto g = dyn_cast<AllGatherOp>(ops[i]); g && isa<BlockArgument>(g.getInput()))
      backwardGathers[g.getInput()].push_back(g);
  auto sameGather = [](AllGatherOp a, AllGatherOp b) {
    return a.getType() == b.getType() && a.getDim() == b.getDim() && a.getAxes() == b.getAxes();
  };
  llvm::DenseMap<Value, Value> memo;
  MLIRContext *ctx = fn.getContext();
  std::function<Value(Value, Operation *)> materialize = [&](Value v, Operation *at) -> Value {
    if (Value m = memo.lookup(v))
      return m;
    Operation *def = v.getDefiningOp();
    IRMapping map;
    for (Value x : def->getOperands()) {
      if (rebuilt.contains(x)) {
        map.map(x, materialize(x, at));
        continue;
      }
      auto g = x.getDefiningOp<AllGatherOp>();
      if (!g || !isa<BlockArgument>(g.getInput()) || !isForwardValue(x))
        continue;
      for (AllGatherOp again : backwardGathers.lookup(g.getInput())) {
        if (!sameGather(g, again))
          continue;
        if (at->isBeforeInBlock(again))
          again->moveBefore(at);
        map.map(x, again.getResult());
        break;
      }
    }
    OpBuilder b(at);
    Operation *clone = b.clone(*def, map);
    clone->setAttr(kRecomputedAttrName, UnitAttr::get(ctx));
    for (auto [r, c] : llvm::zip(def->getResults(), clone->getResults())) memo[r] = c;
    return memo.lookup(v);
  };
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands())
      if (rebuilt.contains(use.get()))
        use.set(materialize(use.get(), op));
  // Forward ops only the backward read, which now reads their clones, are
  // dead: erased here, last first so that chains go, since nothing after
  // this pass removes them and codegen would run them (autocast's widening
  // of attention's output, one kernel a layer under selective and full).
  llvm::DenseSet<Operation *> erased;
  for (int i = lossAt; i >= 0; --i) {
    Operation *op = ops[size_t(i)];
    if (isOpTriviallyDead(op)) {
      erased.insert(op);
      op->erase();
    }
  }
  // What stays live into the backward: results read by anything that is
  // not a forward op (backward ops, clones; the checks between the loss
  // and the backward read values that die there).
  for (int i = 0; i <= lossAt; ++i) {
    Operation *op = ops[size_t(i)];
    if (erased.contains(op) || isa<ConstantOp>(op))
      continue;
    bool saved = llvm::any_of(op->getUsers(), [&](Operation *user) {
      auto it = position.find(user);
      return it == position.end() ? !isa<func::ReturnOp>(user) : it->second >= backwardAt;
    });
    if (saved)
      op->setAttr(kSavedAttrName, UnitAttr::get(ctx));
  }
}

std::string RecomputeAnalysis::describeValue(Value v) const {
  if (paramModule.count(v))
    return "weight " + paramModule.lookup(v);
  Value x = v;
  while (Operation *def = x.getDefiningOp()) {
    if (auto a = dyn_cast<AttentionOp>(def); a && x == a.getLse())
      return "attention lse";
    if (!isa<CastOp, ReshapeOp>(def))
      return describe(def);
    x = def->getOperand(0);
  }
  return "argument";
}

std::string RecomputeAnalysis::describe(Operation *op) const {
  std::string s = op->getName().stripDialect().str();
  for (Value v : op->getOperands()) {
    auto it = paramModule.find(v);
    if (it != paramModule.end() && !paramModule.count(op->getResult(0)))
      return s + " " + it->second;
  }
  return s;
}

} // namespace loom
