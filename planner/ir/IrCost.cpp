//===- IrCost.cpp - Walking the training-step IR for the planner ----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/ir/IrCost.h"
#include "planner/ir/RankStep.h"
#include "compiler/CompileTrainStep.h"
#include "codegen/LowerToProgram.h"
#include "frontends/onnx/OnnxImporter.h"
#include "ir/LoomOps.h"
#include "loom/runtime/Executor.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"
#include "passes/Recompute.h"
#include "planner/BufferPlanMemory.h"
#include "planner/ShardingRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <climits>
#include <functional>

using namespace mlir;

namespace loom::planner {

namespace {

double elementsOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t ? double(t.getNumElements()) : 0;
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

/// Ops that are views on a GPU (or fold into their consumer's layout).
bool isView(Operation *op) { return isa<ReshapeOp, TransposeOp, ExpandOp, SplitOp>(op); }

/// The tensor a value views (through reshape, transpose, expand, split).
Value rootOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isView(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// Second-to-last component of a parameter name: "q_proj" of
/// "model.layers.0.self_attn.q_proj.weight".
std::string moduleOf(const std::string &name) {
  auto last = name.rfind('.');
  if (last == std::string::npos)
    return name;
  auto prev = name.rfind('.', last - 1);
  return name.substr(prev == std::string::npos ? 0 : prev + 1, last - (prev == std::string::npos ? 0 : prev + 1));
}

/// Where the batch dim `d` of `in` lands after a row-major reshape to
/// `out`: the output dim holding the start of its range. The batch is the
/// outermost factor wherever dims merge ([B, T] -> [B*T]) or split back
/// ([B*T] -> [B, T]), so that dim carries it. -1 when no dim starts there.
int reshapeDim(ArrayRef<int64_t> in, int d, ArrayRef<int64_t> out) {
  int64_t before = 1;
  for (int i = 0; i < d; ++i) before *= in[i];
  int64_t prefix = 1;
  for (int j = 0; j < int(out.size()); ++j) {
    int64_t next = prefix * out[j];
    if (prefix <= before && before < next)
      return before % prefix == 0 ? j : -1;
    prefix = next;
  }
  return -1;
}

/// Bytes per element a kept tensor takes: 0 for a float activation (the
/// plan's width); integers their own; attention's logsumexp stays f32
/// whatever the activations' width (AutocastBf16 never rounds it).
int savedWidth(Value r) {
  Type et = cast<RankedTensorType>(r.getType()).getElementType();
  unsigned bytes = std::max(1u, et.getIntOrFloatBitWidth() / 8);
  if (auto a = r.getDefiningOp<AttentionOp>(); a && r == a.getLse())
    return int(std::max(4u, bytes));
  return isa<FloatType>(et) ? 0 : int(bytes);
}

/// "[4x2048x2048]", dim `batch` (if any) scaled to the requested batch.
std::string shapeString(Value v, int batch, double scale) {
  std::string s = "[";
  ArrayRef<int64_t> shape = shapeOf(v);
  for (int i = 0; i < int(shape.size()); ++i)
    s += (i ? "x" : "") + std::to_string(i == batch ? int64_t(double(shape[i]) * scale) : shape[i]);
  return s + "]";
}

class Walker {
public:
  Walker(func::FuncOp f, bool trainStep, double batchScale, ModelCost &out)
      : f(f), trainStep(trainStep), scale(batchScale), out(out) {}

  bool run(std::string &err);

private:
  bool collectParams(std::string &err);
  bool assignPhases(std::string &err);
  void assignParamLayersAndRules();
  void assignLayers();
  void trackBatchDims();
  void mapGradients();
  void buildOps();
  void buildSaved();
  bool decideRecompute(llvm::SetVector<Value> &keptSelective, llvm::SetVector<Value> &keptFull);
  void buildTpCollectives();
  void summarize();
  void synthesizeBackward();

  Phase phaseOf(Operation *op) const { return phases.lookup(op); }
  bool isForwardValue(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && !isa<ConstantOp>(def) && phases.lookup(def) == Phase::Forward;
  }
  double scaleOf(Value v) const { return batchDim.count(v) ? scale : 1.0; }
  int paramLayer(int p) const { return out.params[p].layer; }
  int layerOfValue(Value v) const {
    auto it = paramOf.find(v);
    if (it != paramOf.end())
      return paramLayer(it->second);
    auto jt = valueLayer.find(v);
    return jt == valueLayer.end() ? INT_MIN : jt->second;
  }
  bool inTransformerLayer(int layer) const { return layer >= 0 && layer < out.numLayers; }

  func::FuncOp f;
  bool trainStep;
  double scale;
  ModelCost &out;

  std::vector<Operation *> ops; // every op but constants and the return, in order
  llvm::DenseMap<Value, int> paramOf;
  llvm::DenseMap<Operation *, Phase> phases;
  llvm::DenseMap<Operation *, int> opLayer;
  llvm::DenseMap<Value, int> valueLayer;
  llvm::DenseMap<Value, int> batchDim;
  llvm::DenseMap<Value, std::pair<int, bool>> gradParam; // gradient value -> (param, transposed)
  llvm::DenseMap<Operation *, size_t> costIndex;
  llvm::SetVector<Value> tokenArgs;
  Operation *loss = nullptr;
};

bool Walker::collectParams(std::string &err) {
  Block &body = f.getBody().front();
  auto addParam = [&](Value v, const std::string &name) {
    ParamInfo p;
    p.name = name;
    auto t = cast<RankedTensorType>(v.getType());
    p.shape.assign(t.getShape().begin(), t.getShape().end());
    p.elements = double(t.getNumElements());
    paramOf[v] = int(out.params.size());
    out.params.push_back(std::move(p));
  };
  if (trainStep) {
    unsigned n = f.getNumArguments();
    if (n < 6 || (n - 3) % 3) {
      err = "@train_step has an unexpected signature";
      return false;
    }
    unsigned P = (n - 3) / 3;
    for (unsigned i = 0; i < P; ++i) {
      auto name = f.getArgAttrOfType<StringAttr>(i, "loom.name");
      addParam(body.getArgument(i), name ? name.str() : "param" + std::to_string(i));
    }
    tokenArgs.insert(body.getArgument(3 * P + 1));
    tokenArgs.insert(body.getArgument(3 * P + 2));
  } else {
    bool anyParamAttr = false;
    f.walk([&](ConstantOp c) { anyParamAttr |= bool(c.getParamAttr()); });
    f.walk([&](ConstantOp c) {
      auto t = cast<RankedTensorType>(c.getType());
      if (!isa<FloatType>(t.getElementType()))
        return;
      if (ParamAttr p = c.getParamAttr())
        addParam(c.getResult(), p.getName().str());
      else if (!anyParamAttr && c.getName() && t.getRank() >= 1 &&
               !llvm::all_of(c->getUses(), [](OpOperand &u) { return isa<RotaryOp>(u.getOwner()); }))
        addParam(c.getResult(), c.getName()->str());
    });
    for (BlockArgument a : body.getArguments()) tokenArgs.insert(a);
  }
  if (out.params.empty()) {
    err = "the model has no parameters";
    return false;
  }
  for (Operation &op : body) {
    if (isa<ConstantOp, func::ReturnOp>(op))
      continue;
    ops.push_back(&op);
  }
  return true;
}

bool Walker::assignPhases(std::string &err) {
  if (!trainStep) {
    for (Operation *op : ops) phases[op] = Phase::Forward;
    return true;
  }
  size_t lossAt = ops.size();
  for (size_t i = 0; i < ops.size(); ++i)
    if (isa<CrossEntropyOp, CrossEntropyWithGradOp>(ops[i])) {
      lossAt = i;
      break;
    }
  if (lossAt == ops.size()) {
    err = "@train_step has no loss (loom.cross_entropy)";
    return false;
  }
  loss = ops[lossAt];
  llvm::DenseMap<Operation *, size_t> position;
  for (size_t i = 0; i < ops.size(); ++i) position[ops[i]] = i;
  // Backward: everything after the loss that the AdamW gradients depend on.
  llvm::DenseSet<Operation *> backward;
  SmallVector<Operation *> work;
  f.walk([&](AdamWOp a) {
    if (Operation *d = a.getGrad().getDefiningOp()) work.push_back(d);
  });
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    auto it = position.find(op);
    if (it == position.end() || it->second <= lossAt || !backward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *d = v.getDefiningOp()) work.push_back(d);
  }
  for (size_t i = 0; i < ops.size(); ++i)
    phases[ops[i]] = i <= lossAt ? Phase::Forward
                     : backward.contains(ops[i]) ? Phase::Backward
                                                 : Phase::Optimizer;
  return true;
}

void Walker::assignParamLayersAndRules() {
  // Uses in the forward pass: embedding tables, GEMM weights.
  struct Use { bool embedding = false; SmallVector<MatmulOp> matmuls; };
  std::vector<Use> uses(out.params.size());
  for (auto [v, p] : paramOf)
    for (OpOperand &u : v.getUses()) {
      if (phases.lookup(u.getOwner()) != Phase::Forward)
        continue;
      if (auto e = dyn_cast<EmbeddingOp>(u.getOwner()); e && e.getTable() == v)
        uses[p].embedding = true;
      if (auto m = dyn_cast<MatmulOp>(u.getOwner()))
        uses[p].matmuls.push_back(m);
    }
  int maxLayer = -1;
  for (ParamInfo &p : out.params)
    if (auto l = layerIndexOf(p.name)) maxLayer = std::max(maxLayer, *l);
  out.numLayers = maxLayer + 1;
  for (size_t i = 0; i < out.params.size(); ++i) {
    ParamInfo &p = out.params[i];
    auto l = layerIndexOf(p.name);
    p.layer = l ? *l : uses[i].embedding ? kEmbedLayer : out.numLayers;
    p.tiedToHead = uses[i].embedding && !uses[i].matmuls.empty();
  }
  // Rules: by name, else from the dataflow around the GEMM.
  auto reaches = [](Value v, auto pred) {
    SmallVector<Value> work = {v};
    llvm::DenseSet<Value> seen;
    while (!work.empty()) {
      Value x = work.pop_back_val();
      if (!seen.insert(x).second || seen.size() > 64)
        continue;
      for (Operation *user : x.getUsers()) {
        if (pred(user))
          return true;
        if (isView(user) || isa<AddOp>(user))
          for (Value r : user->getResults()) work.push_back(r);
      }
    }
    return false;
  };
  auto isNonlinear = [](Operation *op) {
    return isa<AttentionOp, SiluOp, SwiGluOp, GeluOp, RotaryOp>(op);
  };
  for (size_t pass = 0; pass < 2; ++pass) // weights first, then biases that follow them
    for (auto [v, i] : paramOf) {
      ParamInfo &p = out.params[i];
      bool bias = p.shape.size() == 1;
      if (bias != (pass == 1))
        continue;
      if (auto rule = tpRuleForName(p.name)) {
        p.rule = *rule;
      } else if (!bias && !uses[i].matmuls.empty()) {
        MatmulOp m = uses[i].matmuls.front();
        Operation *lhsDef = rootOf(m.getLhs()).getDefiningOp();
        if (reaches(m.getResult(), isNonlinear))
          p.rule = TpRule::Column;
        else if (lhsDef && isa<AttentionOp, MulOp, SiluOp, SwiGluOp, GeluOp>(lhsDef))
          p.rule = TpRule::Row;
        p.ruleFromDataflow = true;
      } else if (bias) {
        // A bias added to a column-parallel GEMM's output is split with it.
        for (Operation *user : v.getUsers())
          if (isa<AddOp>(user))
            for (Value operand : user->getOperands()) {
              auto m = rootOf(operand).getDefiningOp<MatmulOp>();
              if (!m || !paramOf.count(m.getRhs()))
                continue;
              p.rule = out.params[paramOf[m.getRhs()]].rule == TpRule::Column ? TpRule::Column
                                                                             : TpRule::Replicated;
            }
        p.ruleFromDataflow = true;
      }
      // The axis tensor parallelism splits, in the IR's layout.
      if (p.rule == TpRule::Replicated)
        continue;
      if (bias) {
        p.shardAxis = 0;
      } else if (uses[i].embedding) {
        p.shardAxis = 0; // rows are the vocabulary
      } else if (!uses[i].matmuls.empty()) {
        MatmulOp m = uses[i].matmuls.front();
        bool asRhs = m.getRhs() == v;
        // Output features: N of x * W. As rhs [K, N] (or [N, K] transposed).
        int outputAxis = asRhs ? (m.getTransposeRhs() ? 0 : 1) : (m.getTransposeLhs() ? 1 : 0);
        p.shardAxis = p.rule == TpRule::Row ? 1 - outputAxis : outputAxis;
      }
    }
}

void Walker::assignLayers() {
  const int head = out.numLayers;
  // Where each parameter is a GEMM operand: a tied embedding table is the
  // LM head's weight, so its dX GEMM belongs to the head.
  llvm::DenseMap<Value, int> gemmLayer;
  for (Operation *op : ops) {
    Phase ph = phaseOf(op);
    int layer = INT_MIN;
    if (ph == Phase::Forward) {
      for (Value v : op->getOperands()) layer = std::max(layer, layerOfValue(v));
      if (layer == INT_MIN)
        layer = kEmbedLayer;
      if (isa<MatmulOp>(op))
        for (Value v : op->getOperands())
          if (paramOf.count(v))
            gemmLayer[v] = std::max(gemmLayer.lookup(v), layer);
    } else if (ph == Phase::Backward) {
      if (isa<EmbeddingGradOp>(op)) {
        layer = kEmbedLayer;
      } else {
        // A gradient op belongs with the forward values and parameters it
        // reads; pure gradient arithmetic with the lowest layer it touches
        // (gradients flow from the head down).
        for (Value v : op->getOperands()) {
          if (paramOf.count(v))
            layer = std::max(layer, gemmLayer.count(v) ? gemmLayer[v] : layerOfValue(v));
          else if (isForwardValue(v))
            layer = std::max(layer, layerOfValue(v));
        }
        if (layer == INT_MIN) {
          int low = INT_MAX;
          for (Value v : op->getOperands()) {
            int l = layerOfValue(v);
            if (l != INT_MIN) low = std::min(low, l);
          }
          layer = low == INT_MAX ? head : low;
        }
      }
    } else {
      layer = kEmbedLayer;
      for (Value v : op->getOperands())
        if (paramOf.count(v)) layer = paramLayer(paramOf[v]);
    }
    opLayer[op] = layer;
    for (Value r : op->getResults()) valueLayer[r] = layer;
  }
}

void Walker::trackBatchDims() {
  for (Value t : tokenArgs) batchDim[t] = 0;
  auto aligned = [&](Value from, int d, Value to) {
    int j = d + int(rankOf(to) - rankOf(from));
    if (j >= 0 && j < rankOf(to) && shapeOf(to)[j] == shapeOf(from)[d])
      batchDim[to] = j;
  };
  for (Operation *op : ops) {
    if (isa<EmbeddingGradOp, AdamWOp, CrossEntropyOp, CrossEntropyWithGradOp>(op))
      continue;
    if (auto m = dyn_cast<MatmulOp>(op)) {
      int R = int(rankOf(m.getResult()));
      auto side = [&](Value v, bool isLhs, bool transposed) {
        auto it = batchDim.find(v);
        if (it == batchDim.end())
          return;
        int d = it->second, r = int(rankOf(v));
        int outer = isLhs ? (transposed ? r - 1 : r - 2) : (transposed ? r - 2 : r - 1);
        if (d < r - 2)
          batchDim[m.getResult()] = d + (R - r);
        else if (d == outer)
          batchDim[m.getResult()] = isLhs ? R - 2 : R - 1;
      };
      side(m.getLhs(), true, m.getTransposeLhs());
      side(m.getRhs(), false, m.getTransposeRhs());
      continue;
    }
    if (auto e = dyn_cast<EmbeddingOp>(op)) {
      if (batchDim.count(e.getIndices()))
        batchDim[e.getResult()] = batchDim[e.getIndices()];
      continue;
    }
    // First operand that carries the batch.
    Value src;
    for (Value v : op->getOperands())
      if (batchDim.count(v) && isa<RankedTensorType>(v.getType())) {
        src = v;
        break;
      }
    if (!src)
      continue;
    int d = batchDim[src];
    if (auto r = dyn_cast<ReshapeOp>(op)) {
      int j = reshapeDim(shapeOf(src), d, shapeOf(r.getResult()));
      if (j >= 0)
        batchDim[r.getResult()] = j;
    } else if (auto t = dyn_cast<TransposeOp>(op)) {
      ArrayRef<int64_t> perm = t.getPermutation();
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] == d) batchDim[t.getResult()] = int(i);
    } else if (auto a = dyn_cast<AttentionOp>(op); a && src == a.getQuery() && d < 3) {
      // o [B, Hq, T, Dv] and lse [B, Hq, T] share q's leading dims; lse,
      // one dim short, is aligned on the left, not the right. Tokens-major
      // q and o are [B, T, Hq, D]: lse swaps dims 1 and 2 back.
      batchDim[a.getOutput()] = d;
      bool swapped = a.getLayout() == AttentionLayout::tokens_major && d > 0;
      batchDim[a.getLse()] = swapped ? 3 - d : d;
    } else if (auto r = dyn_cast<ReduceOp>(op)) {
      ArrayRef<int64_t> axes = r.getAxes();
      if (llvm::is_contained(axes, d))
        continue;
      int shift = r.getKeepdim() ? 0 : int(llvm::count_if(axes, [&](int64_t a) { return a < d; }));
      batchDim[r.getResult()] = d - shift;
    } else {
      for (Value res : op->getResults())
        if (isa<RankedTensorType>(res.getType())) aligned(src, d, res);
    }
  }
}

void Walker::mapGradients() {
  // Follow each AdamW gradient back through transposes, shape-preserving
  // reshapes and sums (a tied weight's two gradients) to the ops making it.
  f.walk([&](AdamWOp a) {
    auto it = paramOf.find(a.getParam());
    if (it == paramOf.end())
      return;
    SmallVector<std::pair<Value, bool>> work = {{a.getGrad(), false}};
    while (!work.empty()) {
      auto [v, swapped] = work.pop_back_val();
      if (gradParam.count(v))
        continue;
      gradParam[v] = {it->second, swapped};
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      if (auto t = dyn_cast<TransposeOp>(def); t && t.getPermutation().size() == 2)
        work.push_back({t.getInput(), !swapped});
      else if (auto r = dyn_cast<ReshapeOp>(def); r && shapeOf(r.getInput()) == shapeOf(r.getResult()))
        work.push_back({r.getInput(), swapped});
      else if (auto add = dyn_cast<AddOp>(def))
        for (Value x : add->getOperands()) work.push_back({x, swapped});
    }
  });
}

void Walker::buildOps() {
  llvm::DenseMap<Value, int> optimizerParam;
  for (auto [v, pg] : gradParam) optimizerParam[v] = pg.first;
  for (Operation *op : ops) {
    CostOp c;
    c.name = op->getName().getStringRef().str();
    c.phase = phaseOf(op);
    c.layer = opLayer.lookup(op);
    for (Value v : op->getOperands()) c.elements += elementsOf(v) * scaleOf(v);
    for (Value r : op->getResults()) c.outElements += elementsOf(r) * scaleOf(r);
    c.elements += c.outElements;
    bool anyBatch = llvm::any_of(op->getOperands(), [&](Value v) { return batchDim.count(v) > 0; });
    double s = anyBatch ? scale : 1.0;
    // Reshapes, expands and splits are views (or fold into their readers);
    // a transpose that no GEMM absorbed is a copy kernel in loom's runtime.
    if (isView(op) && !isa<TransposeOp>(op)) {
      c.kind = OpKind::View;
    } else if (c.phase == Phase::Optimizer) {
      c.kind = OpKind::Optimizer;
      for (Value v : op->getOperands()) {
        if (paramOf.count(v)) { c.param = paramOf[v]; break; }
        if (optimizerParam.count(v)) { c.param = optimizerParam[v]; break; }
      }
      if (c.param >= 0)
        for (Value r : op->getResults())
          if (elementsOf(r) > 1) optimizerParam[r] = c.param;
    } else if (auto m = dyn_cast<MatmulOp>(op)) {
      c.kind = OpKind::Matmul;
      ArrayRef<int64_t> ls = shapeOf(m.getLhs()), rs = shapeOf(m.getRhs()), res = shapeOf(m.getResult());
      int64_t rl = int64_t(ls.size()), rr = int64_t(rs.size());
      double M = double(res[res.size() - 2]), N = double(res.back());
      double K = double(m.getTransposeLhs() ? ls[rl - 2] : ls[rl - 1]);
      double batch = 1;
      for (size_t i = 0; i + 2 < res.size(); ++i) batch *= double(res[i]);
      c.m = batch * M;
      c.n = N;
      c.k = K;
      c.flops = 2 * batch * M * N * K * s;
      // Where the batch (tokens) lives: M (or a batch dim), N or K.
      auto lhsIt = batchDim.find(m.getLhs()), rhsIt = batchDim.find(m.getRhs());
      if (lhsIt != batchDim.end()) {
        int d = lhsIt->second, kDim = m.getTransposeLhs() ? int(rl - 2) : int(rl - 1);
        c.tokenDim = d == kDim ? 2 : 0;
      } else if (rhsIt != batchDim.end()) {
        int d = rhsIt->second, kDim = m.getTransposeRhs() ? int(rr - 1) : int(rr - 2);
        c.tokenDim = d < rr - 2 ? 0 : d == kDim ? 2 : 1;
      }
      if (c.tokenDim == 0) c.m *= scale;
      if (c.tokenDim == 1) c.n *= scale;
      if (c.tokenDim == 2) c.k *= scale;
      // Which dim tensor parallelism splits: follow the weight's split axis.
      auto axisDim = [&](int axis, bool isRhs, bool transposed) {
        if (isRhs)
          return transposed ? (axis == 0 ? 1 : 2) : (axis == 0 ? 2 : 1);
        return transposed ? (axis == 0 ? 2 : 0) : (axis == 0 ? 0 : 2);
      };
      if (paramOf.count(m.getRhs()) && out.params[paramOf[m.getRhs()]].shardAxis >= 0)
        c.tpDim = axisDim(out.params[paramOf[m.getRhs()]].shardAxis, true, m.getTransposeRhs());
      else if (paramOf.count(m.getLhs()) && out.params[paramOf[m.getLhs()]].shardAxis >= 0)
        c.tpDim = axisDim(out.params[paramOf[m.getLhs()]].shardAxis, false, m.getTransposeLhs());
      else if (auto g = gradParam.find(m.getResult()); g != gradParam.end() && res.size() == 2) {
        int axis = out.params[g->second.first].shardAxis;
        if (axis >= 0)
          c.tpDim = (axis == 0) != g->second.second ? 0 : 1;
      }
      c.fp8 = inTransformerLayer(c.layer);
    } else if (isa<AttentionOp, AttentionGradOp>(op)) {
      c.kind = OpKind::Attention;
      Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
      AttentionLayout layout = isa<AttentionOp>(op) ? cast<AttentionOp>(op).getLayout()
                                                    : cast<AttentionGradOp>(op).getLayout();
      SmallVector<int64_t, 4> qs = attentionHeadsMajorDims(shapeOf(q), layout),
                              ks = attentionHeadsMajorDims(shapeOf(k), layout);
      double B = double(qs[0]), H = double(qs[1]), T = double(qs[2]), D = double(qs[3]);
      double S = double(ks[2]);
      // Forward: q k^T and p v. Backward (p rebuilt from the saved lse, no
      // pass for the row statistics): q k^T, dv, dp, dq, dk.
      double gemms = isa<AttentionOp>(op) ? 2 : 5;
      c.flops = gemms * 2 * B * H * T * S * D * scaleOf(q);
      c.seqQ = T;
      c.seqK = S;
      c.headDim = D;
      c.causal = isa<AttentionOp>(op) ? cast<AttentionOp>(op).getCausal()
                                      : cast<AttentionGradOp>(op).getCausal();
      c.kvElements = (elementsOf(k) * scaleOf(k) + elementsOf(v) * scaleOf(v));
    } else if (auto e = dyn_cast<EmbeddingOp>(op)) {
      c.kind = OpKind::MemoryBound; // a gather: reads the picked rows only
      c.elements = 2 * c.outElements + elementsOf(e.getIndices()) * scaleOf(e.getIndices());
      c.flops = 0;
    } else {
      c.kind = OpKind::MemoryBound;
      c.flops = isa<TransposeOp>(op) ? 0 : c.outElements; // a transpose only copies
    }
    costIndex[op] = out.ops.size();
    out.ops.push_back(std::move(c));
  }
}

void Walker::buildSaved() {
  // The saved set: forward tensors (views resolved) that backward ops read.
  // Without a backward (forward-only costing) every forward tensor counts,
  // an upper bound.
  llvm::SetVector<Value> saved;
  llvm::DenseMap<Value, int> userLayer;
  llvm::DenseSet<Value> nonGemmUse;
  auto isActivation = [&](Value r) {
    return isForwardValue(r) || (tokenArgs.contains(r) && !paramOf.count(r));
  };
  if (trainStep) {
    for (Operation *op : ops) {
      if (phaseOf(op) != Phase::Backward || isView(op))
        continue;
      for (Value v : op->getOperands()) {
        Value r = rootOf(v);
        if (!isActivation(r))
          continue;
        saved.insert(r);
        if (!userLayer.count(r)) userLayer[r] = opLayer.lookup(op);
        if (!isa<MatmulOp>(op)) nonGemmUse.insert(r);
      }
    }
  } else {
    for (Operation *op : ops)
      if (!isView(op))
        for (Value r : op->getResults()) {
          saved.insert(r);
          nonGemmUse.insert(r);
        }
  }
  auto layerOfRoot = [&](Value r) {
    if (Operation *def = r.getDefiningOp()) return opLayer.lookup(def);
    return userLayer.lookup(r);
  };
  // Group inputs: tensors a group's forward ops read that another group
  // made (a layer's input, the head's input). Full checkpointing keeps only
  // these of a transformer layer.
  llvm::SetVector<Value> layerInputs;
  for (Operation *op : ops) {
    int l = opLayer.lookup(op);
    if (phaseOf(op) != Phase::Forward || isView(op))
      continue;
    for (Value v : op->getOperands()) {
      Value r = rootOf(v);
      if (isForwardValue(r) && layerOfRoot(r) != l)
        layerInputs.insert(r);
    }
  }
  // What each checkpoint policy keeps and re-runs: the compiler's recompute
  // pass decides (on this step, every layer checkpointed); kept tensors are
  // counted by the tensor they view. A forward-only costing has no
  // backward to rewrite: selective keeps GEMM and attention outputs and
  // recomputes the cheap ops between them, full keeps the layer inputs.
  llvm::SetVector<Value> keptSelective, keptFull;
  if (!decideRecompute(keptSelective, keptFull)) {
    llvm::DenseSet<Operation *> visited;
    std::function<void(Value, int)> recompute = [&](Value r, int layer) {
      Operation *def = r.getDefiningOp();
      if (!def || isa<ConstantOp>(def) || paramOf.count(r))
        return;
      if (layerOfRoot(r) != layer || isa<MatmulOp, AttentionOp>(def)) {
        keptSelective.insert(r);
        return;
      }
      if (!visited.insert(def).second)
        return;
      out.ops[costIndex[def]].recomputeSelective = true;
      for (Value v : def->getOperands()) recompute(rootOf(v), layer);
    };
    for (Value r : saved) {
      int l = layerOfRoot(r);
      if (!inTransformerLayer(l)) {
        keptSelective.insert(r);
        keptFull.insert(r);
        continue;
      }
      Operation *def = r.getDefiningOp();
      if (def && isa<MatmulOp, AttentionOp>(def))
        keptSelective.insert(r);
      else
        recompute(r, l);
    }
    for (Value r : layerInputs) keptSelective.insert(r), keptFull.insert(r);
    for (Operation *op : ops)
      if (phaseOf(op) == Phase::Forward && inTransformerLayer(opLayer.lookup(op)))
        out.ops[costIndex[op]].recomputeFull = true;
  }
  llvm::SetVector<Value> all = saved;
  for (Value r : keptSelective) all.insert(r);
  for (Value r : keptFull) all.insert(r);
  for (Value r : all) {
    SavedTensor s;
    s.layer = layerOfRoot(r);
    s.elements = elementsOf(r) * scaleOf(r);
    s.bytesPerElement = savedWidth(r);
    s.none = saved.contains(r);
    bool argument = !r.getDefiningOp(); // tokens: kept whatever the policy
    s.full = argument ? s.none : keptFull.contains(r);
    s.selective = argument ? s.none : keptSelective.contains(r);
    s.gemmOnly = !nonGemmUse.contains(r);
    Operation *def = r.getDefiningOp();
    s.producer = def ? def->getName().getStringRef().str() : "argument";
    out.saved.push_back(s);
  }
  // The stage boundary: what layer 0 reads from the embedding.
  for (Value r : layerInputs)
    if (layerOfRoot(r) == kEmbedLayer)
      out.boundaryElements += elementsOf(r) * scaleOf(r);
}

bool Walker::decideRecompute(llvm::SetVector<Value> &keptSelective, llvm::SetVector<Value> &keptFull) {
  if (!trainStep)
    return false;
  FailureOr<RecomputeAnalysis> ra = RecomputeAnalysis::analyze(f);
  if (failed(ra) || ra->numLayers() == 0)
    return false;
  for (RecomputePolicy policy :
       {RecomputePolicy::none, RecomputePolicy::selective, RecomputePolicy::full}) {
    RecomputeReport rep;
    rep.policy = recomputePolicyName(policy);
    llvm::SetVector<Value> set = policy == RecomputePolicy::full      ? ra->fullSet(1)
                                 : policy == RecomputePolicy::selective ? ra->selectiveSet(1)
                                                                        : llvm::SetVector<Value>();
    RecomputeAnalysis::Outcome o = ra->simulate(llvm::DenseSet<Value>(set.begin(), set.end()));
    llvm::DenseSet<Value> reported;
    for (Value k : o.kept) {
      Value r = rootOf(k);
      if (policy == RecomputePolicy::selective) keptSelective.insert(r);
      if (policy == RecomputePolicy::full) keptFull.insert(r);
      if (ra->layerOf(k) != rep.layer || !reported.insert(r).second)
        continue;
      int width = savedWidth(r);
      auto b = batchDim.find(r);
      rep.kept.push_back({ra->describeValue(k) + " " +
                              shapeString(r, b == batchDim.end() ? -1 : b->second, scale),
                          elementsOf(r) * scaleOf(r) * (width ? width : 2)});
    }
    for (Operation *op : o.recomputed) {
      auto it = costIndex.find(op);
      if (it == costIndex.end() || out.ops[it->second].kind == OpKind::View)
        continue;
      CostOp &c = out.ops[it->second];
      (policy == RecomputePolicy::full ? c.recomputeFull : c.recomputeSelective) = true;
      ++rep.recomputedOps;
      rep.recomputeFlops += c.flops;
      if (opLayer.lookup(op) == rep.layer)
        rep.recomputed.push_back(ra->describe(op));
    }
    out.recompute.push_back(std::move(rep));
  }
  return true;
}

void Walker::buildTpCollectives() {
  // Megatron with sequence parallelism: a column-parallel GEMM gathers its
  // (sequence-split) input first; a row-parallel GEMM reduce-scatters its
  // partial sums. GEMMs sharing an input (q, k, v) share the gather.
  // Backward mirrors each: the gather's gradient is a reduce-scatter.
  struct Gather { int layer; double elements; std::string what; };
  llvm::MapVector<Value, Gather> gathers;
  auto add = [&](int layer, CommKind fwd, CommKind bwd, double elements, const std::string &what) {
    out.tpCollectives.push_back({layer, Phase::Forward, fwd, elements, false, what});
    out.tpCollectives.push_back({layer, Phase::Backward, bwd, elements, false, what + " (backward)"});
  };
  bool vocabParallelHead = false;
  for (Operation *op : ops) {
    if (phaseOf(op) != Phase::Forward)
      continue;
    int layer = opLayer.lookup(op);
    if (auto m = dyn_cast<MatmulOp>(op)) {
      Value w = paramOf.count(m.getRhs()) ? m.getRhs() : paramOf.count(m.getLhs()) ? m.getLhs() : Value();
      if (!w)
        continue;
      const ParamInfo &p = out.params[paramOf[w]];
      Value x = w == m.getRhs() ? m.getLhs() : m.getRhs();
      if (p.rule == TpRule::Column || p.rule == TpRule::Vocab) {
        Value r = rootOf(x);
        auto [it, fresh] = gathers.insert({r, Gather{layer, elementsOf(r) * scaleOf(r), ""}});
        it->second.what += (fresh ? "input of " : ", ") + moduleOf(p.name);
        vocabParallelHead |= p.rule == TpRule::Vocab;
      } else if (p.rule == TpRule::Row) {
        add(layer, CommKind::ReduceScatter, CommKind::AllGather,
            elementsOf(m.getResult()) * scaleOf(m.getResult()), "output of " + moduleOf(p.name));
      }
    } else if (auto e = dyn_cast<EmbeddingOp>(op)) {
      auto it = paramOf.find(e.getTable());
      if (it != paramOf.end() && out.params[it->second].rule == TpRule::Vocab)
        add(layer, CommKind::ReduceScatter, CommKind::AllGather,
            elementsOf(e.getResult()) * scaleOf(e.getResult()),
            "output of " + moduleOf(out.params[it->second].name) + " (vocab-parallel)");
    }
  }
  for (auto &[r, g] : gathers) add(g.layer, CommKind::AllGather, CommKind::ReduceScatter, g.elements, g.what);
  if (vocabParallelHead) {
    // Vocabulary-parallel cross-entropy: max, sum of exp and the target
    // logit per row, all-reduced in fp32.
    Value logits;
    if (loss)
      logits = loss->getOperand(0);
    else if (!f.getBody().front().getTerminator()->getOperands().empty())
      logits = f.getBody().front().getTerminator()->getOperand(0);
    if (logits) {
      double rows = elementsOf(logits) * scaleOf(logits) / double(shapeOf(logits).back());
      out.tpCollectives.push_back({out.numLayers, Phase::Forward, CommKind::AllReduce, 3 * rows, true,
                                   "vocab-parallel cross-entropy statistics"});
    }
  }
  std::stable_sort(out.tpCollectives.begin(), out.tpCollectives.end(),
                   [](const TpCollective &a, const TpCollective &b) {
                     return std::make_pair(a.layer, int(a.phase)) < std::make_pair(b.layer, int(b.phase));
                   });
}

void Walker::synthesizeBackward() {
  // No autodiff IR: backward GEMMs and attention cost 2x their forward
  // (dX and dW), other ops once more; one AdamW per parameter.
  size_t n = out.ops.size();
  for (size_t i = 0; i < n; ++i) {
    CostOp c = out.ops[i];
    if (c.kind == OpKind::View)
      continue;
    c.phase = Phase::Backward;
    if (c.kind == OpKind::Matmul || c.kind == OpKind::Attention) {
      c.flops *= 2;
      c.elements *= 2;
    }
    out.ops.push_back(c);
  }
  for (size_t p = 0; p < out.params.size(); ++p) {
    CostOp c;
    c.name = "adamw (synthesized)";
    c.phase = Phase::Optimizer;
    c.kind = OpKind::Optimizer;
    c.layer = out.params[p].layer;
    c.elements = 7 * out.params[p].elements;
    c.param = int(p);
    out.ops.push_back(c);
  }
}

void Walker::summarize() {
  for (Operation *op : ops) {
    if (phaseOf(op) != Phase::Forward)
      continue;
    if (auto a = dyn_cast<AttentionOp>(op); a && !out.heads) {
      out.heads = attentionHeadsMajorDims(shapeOf(a.getQuery()), a.getLayout())[1];
      out.kvHeads = attentionHeadsMajorDims(shapeOf(a.getKey()), a.getLayout())[1];
      out.headDim = shapeOf(a.getQuery())[3];
    }
    if (auto e = dyn_cast<EmbeddingOp>(op); e && !out.hidden && paramOf.count(e.getTable()) &&
                                            out.params[paramOf[e.getTable()]].rule == TpRule::Vocab) {
      out.hidden = shapeOf(e.getResult()).back();
      out.vocab = shapeOf(e.getTable())[0];
    }
  }
  Value tokens = tokenArgs.empty() ? Value() : tokenArgs.front();
  if (tokens && rankOf(tokens) >= 2)
    out.seq = shapeOf(tokens)[1];
}

bool Walker::run(std::string &err) {
  if (!collectParams(err) || !assignPhases(err))
    return false;
  assignParamLayersAndRules();
  assignLayers();
  trackBatchDims();
  if (trainStep)
    mapGradients();
  buildOps();
  buildSaved();
  buildTpCollectives();
  summarize();
  if (!trainStep)
    synthesizeBackward();
  return true;
}

/// Collects the first diagnostic, so a failing pass gives one line.
struct FirstDiagnostic {
  explicit FirstDiagnostic(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          if (text.empty()) text = d.str();
          return success();
        }) {}
  std::string text;
  ScopedDiagnosticHandler handler;
};

OwningOpRef<ModuleOp> loadForward(MLIRContext &ctx, const std::string &path, int64_t batch,
                                  int64_t seq, double &scale, std::vector<std::string> &notes,
                                  std::string &err) {
  scale = 1;
  auto endsWith = [&](const char *s) {
    std::string x(s);
    return path.size() >= x.size() && path.compare(path.size() - x.size(), x.size(), x) == 0;
  };
  OwningOpRef<ModuleOp> module;
  if (endsWith(".mlir")) {
    ctx.getOrLoadDialect<LoomDialect>();
    ctx.getOrLoadDialect<func::FuncDialect>();
    FirstDiagnostic diag(ctx);
    module = parseSourceFile<ModuleOp>(path, &ctx);
    if (!module) {
      err = path + ": " + (diag.text.empty() ? "cannot parse" : diag.text);
      return nullptr;
    }
  } else {
    // Shapes only: weight files may be absent (graph-only exports) and are
    // never read.
    OnnxImportOptions opts{batch, seq};
    opts.weightsAsShapes = true;
    module = importOnnxModel(ctx, path, opts, err);
    if (!module) {
      // A static batch: import at its own batch and rescale.
      std::string staticErr;
      OnnxImportOptions own;
      own.seq = seq; // a static batch with a dynamic sequence
      own.weightsAsShapes = true;
      module = importOnnxModel(ctx, path, own, staticErr);
      if (!module) { // static throughout
        own.seq = 0;
        module = importOnnxModel(ctx, path, own, staticErr);
      }
      if (!module)
        return nullptr; // the first error says it best
      err.clear();
    }
  }
  auto fwd = module->lookupSymbol<func::FuncOp>("forward");
  if (!fwd || fwd.getNumArguments() < 1) {
    err = path + ": expected func @forward(tokens) -> logits";
    return nullptr;
  }
  auto tokens = dyn_cast<RankedTensorType>(fwd.getArgument(0).getType());
  if (!tokens || tokens.getRank() != 2 || !tokens.hasStaticShape()) {
    err = path + ": @forward's tokens must be a static [batch, seq] tensor";
    return nullptr;
  }
  int64_t b = tokens.getShape()[0], t = tokens.getShape()[1];
  if (seq && t != seq) {
    err = path + ": the model's sequence length is fixed at " + std::to_string(t) + " but --seq asks for " +
          std::to_string(seq) + " (attention cost is not linear in it: use a dynamic export)";
    return nullptr;
  }
  if (batch && b != batch) {
    scale = double(batch) / double(b);
    notes.push_back("the model's batch is fixed at " + std::to_string(b) + ": costs were read at batch " +
                    std::to_string(b) + " and scaled to " + std::to_string(batch) +
                    " along the tracked batch dim (exact for FLOPs and sizes)");
  }
  return module;
}

} // namespace

bool buildModelCost(const std::string &path, const IrCostOptions &opts, ModelCost &out,
                    std::string &err) {
  MLIRContext ctx;
  ModelCost cost;
  cost.model = path;
  double scale = 1;
  OwningOpRef<ModuleOp> module = loadForward(ctx, path, opts.batch, opts.seq, scale, cost.notes, err);
  if (!module)
    return false;
  // The import as it is, for the compiler's entry point (the buffer plans
  // below), before fusion changes it.
  OwningOpRef<ModuleOp> imported;
  if (opts.bufferPlan && scale == 1)
    imported = module->clone();
  FirstDiagnostic diag(ctx);
  {
    PassManager pm(&ctx);
    buildFusionPipeline(pm);
    if (failed(pm.run(*module))) {
      err = path + ": fusion pipeline failed: " + diag.text;
      return false;
    }
  }
  auto fwd = module->lookupSymbol<func::FuncOp>("forward");
  cost.batch = opts.batch ? opts.batch : cast<RankedTensorType>(fwd.getArgument(0).getType()).getShape()[0];

  // The training step, as `loom train` builds it, minus clipping (so the
  // backward is exactly what the AdamW gradients depend on) and autocast
  // (whose casts a GPU fuses into the GEMMs).
  OwningOpRef<ModuleOp> analysis = module->clone();
  bool trainStep = !opts.forwardOnly;
  if (trainStep) {
    diag.text.clear();
    PassManager pm(&ctx);
    BuildTrainStepOptions bt;
    bt.maxGradNorm = 0;
    pm.addPass(createBuildTrainStep(bt));
    pm.addPass(createCanonicalizerPass(rewriteConfig()));
    pm.addPass(createCSEPass());
    if (failed(pm.run(*analysis))) {
      cost.notes.push_back("building the training step failed (" + diag.text +
                           "): costed the forward IR, backward = 2x forward");
      trainStep = false;
      analysis = module->clone();
    }
  }
  func::FuncOp walked = analysis->lookupSymbol<func::FuncOp>(trainStep ? "train_step" : "forward");
  cost.backwardFromIr = trainStep;
  cost.costSource = trainStep ? "@train_step IR (forward, autodiff backward, AdamW)"
                              : "@forward IR; backward = 2x forward GEMM/attention FLOPs (no autodiff)";
  Walker walker(walked, trainStep, scale, cost);
  if (!walker.run(err)) {
    err = path + ": " + err;
    return false;
  }
  cost.batch = opts.batch ? opts.batch : cost.batch;

  // The compiler's buffer plan for the single-device step, built as `loom
  // train --precision bf16` builds it, when it can compile at this shape.
  if (!opts.bufferPlan) {
    cost.bufferPlanNote = "buffer plan not requested";
  } else if (scale != 1) {
    cost.bufferPlanNote = "the model cannot be compiled at the requested batch";
  } else {
    // The step `loom train --precision bf16` runs, through the compiler's
    // entry point from the same import, once per checkpoint policy.
    auto tokens = cast<RankedTensorType>(
        imported->lookupSymbol<func::FuncOp>("forward").getArgument(0).getType());
    for (int c = 0; c <= 2; ++c) {
      Plan plan;
      plan.checkpoint = c == 2 ? Checkpoint::Full : c == 1 ? Checkpoint::Selective : Checkpoint::None;
      OwningOpRef<ModuleOp> step = imported->clone();
      train::TrainProgram compiled;
      MemoryBreakdown &mem = c ? cost.policyBufferPlan[c] : cost.bufferPlan;
      std::string stepErr;
      if (!compiler::compileImportedTrainStep(*step, path, tokens.getShape()[0],
                                              tokens.getShape()[1],
                                              compiler::trainOptionsForPlan(plan), compiled,
                                              stepErr) ||
          !bufferPlanMemory(*compiled.program, mem, stepErr)) {
        if (c == 0) {
          cost.bufferPlanNote = stepErr;
          break;
        }
        continue;
      }
      // The CUDA backend also allocates a scratch block (flash attention's
      // bf16 operand copies, loss rows) and the GEMM workspace.
      mem.workspace += double(rt::backendWorkspaceBytes(*compiled.program, "cuda"));
      cost.programWork[c] = describeProgram(*compiled.program);
      cost.hasProgramWork[c] = true;
      if (c == 0) {
        cost.hasBufferPlan = true;
        cost.bufferPlanNote = "codegen's arena plan of @train_step (bf16 autocast, as loom train)";
      } else {
        cost.hasPolicyBufferPlan[c] = true;
      }
    }
    // fp8 plans run the tensorwise-scaled step (issue 17): their own
    // programs (fp8 casts and scales, scaled GEMMs), one per checkpoint
    // policy as above, priced the same way.
    for (int c = 0; opts.fp8Program && cost.hasBufferPlan && c <= 2; ++c) {
      Plan plan;
      plan.checkpoint = c == 2 ? Checkpoint::Full : c == 1 ? Checkpoint::Selective : Checkpoint::None;
      compiler::TrainOptions fo = compiler::trainOptionsForPlan(plan);
      fo.fp8 = "tensorwise";
      OwningOpRef<ModuleOp> step = imported->clone();
      train::TrainProgram compiled;
      std::string stepErr;
      if (compiler::compileImportedTrainStep(*step, path, tokens.getShape()[0], tokens.getShape()[1],
                                             fo, compiled, stepErr)) {
        cost.fp8ProgramWork[c] = describeProgram(*compiled.program);
        cost.hasFp8ProgramWork[c] = true;
      } else if (cost.fp8ProgramNote.empty()) {
        cost.fp8ProgramNote = stepErr;
        cost.notes.push_back("fp8 one-device plans are timed by the per-op model: their step does not "
                             "compile (" + stepErr + ")");
      }
    }
  }
  out = std::move(cost);
  return true;
}

bool rankBufferPlan(const std::string &path, int64_t microbatch, int64_t seq, int dpReplicate,
                    int dpShard, int tp, int checkpoint, MemoryBreakdown &out, std::string &err) {
  Plan plan;
  plan.dpReplicate = dpReplicate;
  plan.dpShard = dpShard;
  plan.tp = tp;
  plan.tpSp = plan.lossParallel = false; // Megatron tp, as before issue 18
  plan.checkpoint = checkpoint == 2   ? Checkpoint::Full
                    : checkpoint == 1 ? Checkpoint::Selective
                                      : Checkpoint::None;
  return rankBufferPlan(path, microbatch, seq, plan, out, err);
}

bool rankBufferPlan(const std::string &path, int64_t microbatch, int64_t seq, const Plan &plan,
                    MemoryBreakdown &out, std::string &err, rt::Program *programOut,
                    const RankIrCosts &irCosts) {
  train::TrainProgram step;
  if (!compileRankStep(path, microbatch, seq, plan, step, err, [&](ModuleOp module) {
        if (irCosts.partitioned && irCosts.hw)
          partitionedCostOf(module, *irCosts.hw, irCosts.gpusPerNode, *irCosts.partitioned);
      }))
    return false;
  rt::Program &program = *step.program;
  if (!bufferPlanMemory(program, out, err))
    return false;
  out.workspace += double(rt::backendWorkspaceBytes(program, "cuda"));
  out.comm += double(rt::backendCommunicationBytes(program, "cuda"));
  if (programOut)
    *programOut = std::move(program);
  return true;
}

bool compileRankStep(const std::string &path, int64_t microbatch, int64_t seq, const Plan &plan,
                     train::TrainProgram &out, std::string &err,
                     const std::function<void(ModuleOp)> &inspectStep) {
  // The compiler's own entry point, as `loom train --precision bf16 --plan`
  // compiles the step: the plan's global batch is its microbatch on every
  // data-parallel rank.
  int64_t batch = microbatch * plan.dpReplicate * plan.dpShard;
  return compiler::compileTrainStep(path, batch, seq, compiler::trainOptionsForPlan(plan), out, err,
                                    inspectStep);
}

} // namespace loom::planner
