//===- SplitPipeline.cpp - Stage functions and per-rank optimizers --------===//
//
// Part of loom, under the Apache License v2.0.
//
// The second half of pipeline parallelism: cut the finished per-rank
// @train_step (forward with stage boundaries, autodiff, the SPMD passes'
// collectives, clipping, AdamW) into what a pipeline schedule runs.
//
// Every op gets a stage by dataflow: the tokens are stage 0's, the targets
// the last stage's, a boundary's result belongs to the stage it enters, and
// any other op to the highest stage among its operands; ops that read only
// parameters and constants (an FSDP gather, a transposed weight) belong to
// no stage and are copied into every function that needs them. Because
// autodiff turned each forward boundary into a backward one, the backward
// of stage s reads only stage s's values. The one place two stages meet
// without a boundary is the gradient of a parameter that two stages read
// (a tied embedding): autodiff adds the stages' parts, and that sum moves
// to the optimizer.
//
// Each function is the backward slice of what it must produce, cut at what
// it receives: a forward at the parameters, tokens and received
// activations; a backward also at the forward's values (its saved
// activations: the forward returns them, the backward takes them back);
// a weight-gradient half also at what the input-gradient half computed.
// The optimizer copies, from the step, whatever its parameters' state and
// accumulated gradients allow, and replaces the global norm's sum by its
// own parameters' share all_reduced over pp.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/PatternUtils.h"
#include "passes/TrainStepStructure.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_SPLITPIPELINE
#include "passes/Passes.h.inc"

namespace {

constexpr int64_t kNone = -1; // no stage: parameters and constants only

struct Transfer {
  Value value;
  TransferKind kind;
  int64_t peer, tag;
};

/// What a new function takes and gives.
struct FunctionSpec {
  std::string name;
  PipelineFunctionAttr attr;
  SmallVector<Value> outputs;
  SmallVector<PipelineValueAttr> outputRoles;
  SmallVector<std::string> outputNames;
  SmallVector<Transfer> sends;
  void output(Value v, PipelineValueAttr role, std::string name) {
    outputs.push_back(v);
    outputRoles.push_back(role);
    outputNames.push_back(std::move(name));
  }
};

using InputRoles = llvm::DenseMap<Value, std::pair<PipelineValueAttr, std::string>>;

struct SplitPipelinePass : impl::SplitPipelineBase<SplitPipelinePass> {
  using Base::Base;

  func::FuncOp step;
  Block *body = nullptr;
  unsigned P = 0; // parameters
  int64_t N = 0;  // stages
  llvm::DenseMap<Value, int64_t> stageOf;
  llvm::DenseSet<Operation *> forwardOps;
  llvm::DenseMap<Value, std::pair<PipelineValueKind, int64_t>> argRole;
  llvm::DenseMap<Value, std::string> argName;

  int64_t rankOf(int64_t stage) const {
    return vshape && stage >= ranks ? 2 * ranks - 1 - stage : stage % ranks;
  }
  PipelineValueAttr role(PipelineValueKind k, int64_t index) {
    return PipelineValueAttr::get(&getContext(), k, index);
  }

  /// Ops needed for `outputs`, in block order, not crossing `cut` values.
  SmallVector<Operation *> slice(ArrayRef<Value> outputs, function_ref<bool(Value)> cut) {
    llvm::DenseSet<Operation *> seen;
    SmallVector<Operation *> stack;
    auto visit = [&](Value v) {
      if (cut(v) || isa<BlockArgument>(v))
        return;
      Operation *d = v.getDefiningOp();
      if (seen.insert(d).second)
        stack.push_back(d);
    };
    for (Value v : outputs) visit(v);
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      for (Value v : op->getOperands()) visit(v);
    }
    SmallVector<Operation *> ordered;
    for (Operation &op : *body)
      if (seen.contains(&op))
        ordered.push_back(&op);
    return ordered;
  }

  /// Builds the function: arguments for the step arguments and `inputs`
  /// (with their roles) the slice reads, loom.recv for boundary results,
  /// the slice's ops, loom.send for `spec.sends`, results `spec.outputs`.
  func::FuncOp build(const FunctionSpec &spec, ArrayRef<Operation *> ops, const InputRoles &inputs,
                     const llvm::DenseMap<Value, Transfer> &recvs) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    b.setInsertionPoint(step);
    auto fn = b.create<func::FuncOp>(step.getLoc(), spec.name, b.getFunctionType({}, {}));
    Block *entry = fn.addEntryBlock();
    IRMapping map;
    SmallVector<DictionaryAttr> argAttrs;
    llvm::DenseSet<Operation *> inSlice(ops.begin(), ops.end());
    // Arguments, in a stable order: step arguments by position, then the
    // other inputs by role and index.
    SmallVector<std::pair<Value, std::pair<PipelineValueAttr, std::string>>> args;
    SmallVector<Value> received;
    llvm::DenseSet<Value> wanted;
    auto need = [&](Value v) {
      if (map.contains(v) || wanted.contains(v))
        return;
      if (auto a = dyn_cast<BlockArgument>(v); a && a.getOwner() == body) {
        auto [kind, index] = argRole.lookup(v);
        args.push_back({v, {role(kind, index), argName.lookup(v)}});
        wanted.insert(v);
      } else if (auto it = inputs.find(v); it != inputs.end()) {
        args.push_back({v, it->second});
        wanted.insert(v);
      } else if (recvs.count(v)) {
        received.push_back(v);
        wanted.insert(v);
      }
    };
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        if (!v.getDefiningOp() || !inSlice.contains(v.getDefiningOp()))
          need(v);
    for (Value v : spec.outputs)
      if (!v.getDefiningOp() || !inSlice.contains(v.getDefiningOp()))
        need(v);
    for (const Transfer &t : spec.sends)
      if (!t.value.getDefiningOp() || !inSlice.contains(t.value.getDefiningOp()))
        need(t.value);
    auto order = [&](const auto &a) {
      auto ba = dyn_cast<BlockArgument>(a.first);
      return std::make_tuple(ba ? 0 : 1, ba ? int64_t(ba.getArgNumber()) : 0,
                             int64_t(a.second.first.getKind()), a.second.first.getIndex());
    };
    llvm::stable_sort(args, [&](const auto &x, const auto &y) { return order(x) < order(y); });
    for (auto &[v, r] : args) {
      map.map(v, entry->addArgument(v.getType(), step.getLoc()));
      NamedAttrList attrs;
      attrs.set("loom.pipeline_value", r.first);
      if (!r.second.empty())
        attrs.set("loom.name", b.getStringAttr(r.second));
      if (auto a = dyn_cast<BlockArgument>(v))
        if (auto p = step.getArgAttrOfType<ParamAttr>(a.getArgNumber(), "loom.param"))
          attrs.set("loom.param", p);
      argAttrs.push_back(attrs.getDictionary(ctx));
    }
    b.setInsertionPointToStart(entry);
    llvm::stable_sort(received, [&](Value x, Value y) { return recvs.lookup(x).tag < recvs.lookup(y).tag; });
    for (Value v : received) {
      const Transfer &t = recvs.lookup(v);
      map.map(v, b.create<RecvOp>(step.getLoc(), v.getType(), TransferKindAttr::get(ctx, t.kind),
                                  b.getI64IntegerAttr(t.peer), b.getI64IntegerAttr(t.tag))
                     .getResult());
    }
    for (Operation *op : ops) b.clone(*op, map);
    for (const Transfer &t : spec.sends)
      b.create<SendOp>(step.getLoc(), map.lookup(t.value), TransferKindAttr::get(ctx, t.kind),
                       b.getI64IntegerAttr(t.peer), b.getI64IntegerAttr(t.tag));
    SmallVector<Value> results;
    SmallVector<Type> resultTypes;
    for (Value v : spec.outputs) {
      results.push_back(map.lookup(v));
      resultTypes.push_back(v.getType());
    }
    b.create<func::ReturnOp>(step.getLoc(), results);
    fn.setFunctionType(b.getFunctionType(entry->getArgumentTypes(), resultTypes));
    for (auto [k, attrs] : llvm::enumerate(argAttrs)) fn.setArgAttrs(unsigned(k), attrs);
    for (size_t k = 0; k < spec.outputs.size(); ++k) {
      fn.setResultAttr(unsigned(k), "loom.pipeline_value", spec.outputRoles[k]);
      if (!spec.outputNames[k].empty())
        fn.setResultAttr(unsigned(k), "loom.name", b.getStringAttr(spec.outputNames[k]));
    }
    fn->setAttr("loom.pipeline", spec.attr);
    return fn;
  }

  void runOnOperation() override;
};

/// The gradient as autodiff computed it: AdamW's operand without the
/// data-parallel reductions the SPMD passes put after it.
FailureOr<Value> rawGradient(ParamUpdate &u) {
  Value g = u.grad;
  while (Operation *def = g.getDefiningOp()) {
    ArrayAttr axes;
    if (auto ar = dyn_cast<AllReduceOp>(def))
      axes = ar.getAxes();
    else if (auto rs = dyn_cast<ReduceScatterOp>(def))
      axes = rs.getAxes();
    else
      break;
    bool dataParallel = llvm::all_of(axes.getAsRange<MeshAxisAttr>(), [](MeshAxisAttr a) {
      return a.getValue() == MeshAxis::dp_replicate || a.getValue() == MeshAxis::dp_shard;
    });
    if (!dataParallel)
      break;
    g = def->getOperand(0);
  }
  if (isa_and_nonnull<SplitOp, ReshapeOp>(g.getDefiningOp()) &&
      llvm::any_of(g.getDefiningOp()->getOperands(),
                   [](Value v) { return isa_and_nonnull<SplitOp, AllReduceOp>(v.getDefiningOp()); })) {
    u.adamw.emitError("gradients reduced in DDP buckets cannot be split into pipeline stages "
                      "(build the step with one all_reduce per gradient)");
    return failure();
  }
  return g;
}

void SplitPipelinePass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  if (ranks < 1 || microbatches < 1) {
    module.emitError("ranks and microbatches must be at least 1");
    return signalPassFailure();
  }
  auto s = analyzeTrainStep(module);
  if (failed(s))
    return signalPassFailure();
  step = s->step;
  body = &step.getBody().front();
  P = unsigned(s->params.size());
  // Stages: @forward's count (loom-split-pipeline-stages), else the
  // boundaries'.
  N = 1;
  if (auto fwd = module.lookupSymbol<func::FuncOp>("forward"))
    if (auto n = fwd->getAttrOfType<IntegerAttr>("loom.pipeline_stages"))
      N = n.getInt();
  step.walk([&](StageBoundaryOp b) { N = std::max({N, int64_t(b.getFrom()) + 1, int64_t(b.getTo()) + 1}); });
  if (N % ranks || (vshape && N != 2 * ranks)) {
    module.emitError("") << N << " stages do not fit " << int64_t(ranks) << " pipeline ranks"
                         << (vshape ? " in a V (2 stages per rank)" : "");
    return signalPassFailure();
  }

  // Argument roles and names.
  for (unsigned i = 0; i < P; ++i) {
    std::string name = step.getArgAttrOfType<StringAttr>(i, "loom.name").str();
    for (auto [g, kind] : llvm::enumerate(std::array<PipelineValueKind, 3>{
             PipelineValueKind::param, PipelineValueKind::exp_avg, PipelineValueKind::exp_avg_sq})) {
      Value a = body->getArgument(unsigned(g) * P + i);
      argRole[a] = {kind, int64_t(i)};
      argName[a] = step.getArgAttrOfType<StringAttr>(unsigned(g) * P + i, "loom.name").str();
    }
    (void)name;
  }
  Value stepArg = body->getArgument(3 * P), tokens = body->getArgument(3 * P + 1),
        targets = body->getArgument(3 * P + 2);
  argRole[stepArg] = {PipelineValueKind::step, 0};
  argRole[tokens] = {PipelineValueKind::tokens, 0};
  argRole[targets] = {PipelineValueKind::targets, 0};
  argName[stepArg] = "step", argName[tokens] = "tokens", argName[targets] = "targets";

  // Seed each microbatch's loss gradient with 1 / microbatches.
  SmallVector<CrossEntropyGradOp> ceGrads;
  step.walk([&](CrossEntropyGradOp g) { ceGrads.push_back(g); });
  if (ceGrads.size() != 1) {
    step.emitError("expected one cross_entropy_grad (the loss's gradient), found ")
        << ceGrads.size();
    return signalPassFailure();
  }
  {
    OpBuilder b(ceGrads[0]);
    auto t = RankedTensorType::get({}, b.getF32Type());
    Value seed = b.create<ConstantOp>(
        step.getLoc(), DenseElementsAttr::get(t, b.getF32FloatAttr(float(1.0 / double(microbatches)))),
        StringAttr(), ParamAttr());
    ceGrads[0]->setOperand(2, seed);
  }

  // Stages by dataflow.
  stageOf[tokens] = 0;
  stageOf[targets] = N - 1;
  llvm::DenseSet<Operation *> mixed;
  for (Operation &op : *body) {
    if (auto bnd = dyn_cast<StageBoundaryOp>(op)) {
      int64_t in = stageOf.lookup(bnd.getInput());
      if (!stageOf.count(bnd.getInput()))
        in = kNone;
      if (in != kNone && in != int64_t(bnd.getFrom())) {
        bnd.emitOpError("leaves stage ") << int64_t(bnd.getFrom()) << " but its input is stage " << in << "'s";
        return signalPassFailure();
      }
      stageOf[bnd.getResult()] = int64_t(bnd.getTo());
      continue;
    }
    int64_t st = kNone;
    bool differ = false;
    for (Value v : op.getOperands()) {
      auto it = stageOf.find(v);
      int64_t o = it == stageOf.end() ? kNone : it->second;
      if (o != kNone && st != kNone && o != st)
        differ = true;
      st = std::max(st, o);
    }
    if (differ)
      mixed.insert(&op);
    for (Value r : op.getResults()) stageOf[r] = st;
  }
  auto stage = [&](Value v) {
    auto it = stageOf.find(v);
    return it == stageOf.end() ? kNone : it->second;
  };

  // The forward: what the loss and the activation checks depend on.
  auto ret = cast<func::ReturnOp>(body->getTerminator());
  SmallVector<Value> forwardRoots = {ret.getOperand(0)};
  SmallVector<std::pair<Value, int64_t>> actSums;
  for (unsigned r = 0; r < step.getNumResults(); ++r)
    if (auto n = step.getResultAttrOfType<StringAttr>(r, "loom.name");
        n && n.getValue().starts_with("act_sumsq.")) {
      forwardRoots.push_back(ret.getOperand(r));
      actSums.push_back({ret.getOperand(r), int64_t(actSums.size())});
    }
  for (Operation *op : slice(forwardRoots, [](Value) { return false; })) forwardOps.insert(op);
  auto isForwardValue = [&](Value v) {
    Operation *d = v.getDefiningOp();
    return d && forwardOps.contains(d);
  };
  for (Operation *op : mixed)
    if (forwardOps.contains(op)) {
      op->emitOpError("reads values of two pipeline stages without a stage boundary");
      return signalPassFailure();
    }

  // Gradient contributions: each parameter's raw gradient, split at the
  // adds that join two stages (a parameter read by several stages).
  struct Leaf {
    Value value;
    int64_t stage;
    unsigned param;
  };
  SmallVector<Leaf> leaves;
  SmallVector<Value> raw(P);
  llvm::DenseSet<Operation *> joins;
  for (ParamUpdate &u : s->params) {
    FailureOr<Value> g = rawGradient(u);
    if (failed(g))
      return signalPassFailure();
    raw[u.index] = *g;
    SmallVector<Value> todo = {*g};
    while (!todo.empty()) {
      Value v = todo.pop_back_val();
      Operation *d = v.getDefiningOp();
      if (d && mixed.contains(d) && isa<AddOp>(d)) {
        joins.insert(d);
        todo.push_back(d->getOperand(1));
        todo.push_back(d->getOperand(0));
        continue;
      }
      if (stage(v) == kNone) {
        if (d && isa<ConstantOp>(d))
          continue; // a parameter the loss does not reach: its gradient is a constant zero
        step.emitError("the gradient of parameter ") << argName.lookup(body->getArgument(u.index))
                                                     << " belongs to no pipeline stage";
        return signalPassFailure();
      }
      leaves.push_back({v, stage(v), u.index});
    }
  }

  // Boundaries by stage and direction.
  SmallVector<StageBoundaryOp> boundaries;
  step.walk([&](StageBoundaryOp b) { boundaries.push_back(b); });
  llvm::DenseMap<Value, Transfer> recvs; // boundary result -> how it arrives
  for (StageBoundaryOp bnd : boundaries) {
    bool fwd = int64_t(bnd.getTo()) > int64_t(bnd.getFrom());
    if (std::abs(int64_t(bnd.getTo()) - int64_t(bnd.getFrom())) != 1) {
      bnd.emitOpError("crosses more than one stage");
      return signalPassFailure();
    }
    recvs[bnd.getResult()] = {bnd.getResult(), fwd ? TransferKind::activation : TransferKind::gradient,
                              int64_t(bnd.getFrom()), int64_t(bnd.getTag())};
  }
  auto isRecv = [&](Value v) { return recvs.count(v) > 0; };

  OpBuilder b(ctx);
  int64_t savedCount = 0, stashCount = 0;
  // Ops the stage functions run; the optimizers copy from the rest.
  llvm::DenseSet<Operation *> stageOps(forwardOps.begin(), forwardOps.end());
  // Per stage: which parameters its functions read (the optimizer's rank
  // holds them).
  std::vector<std::set<unsigned>> paramsOfStage(static_cast<size_t>(N));
  auto noteParams = [&](func::FuncOp fn, int64_t st) {
    for (unsigned a = 0; a < fn.getNumArguments(); ++a)
      if (auto r = fn.getArgAttrOfType<PipelineValueAttr>(a, "loom.pipeline_value");
          r && r.getKind() == PipelineValueKind::param)
        paramsOfStage[size_t(st)].insert(unsigned(r.getIndex()));
  };

  for (int64_t st = 0; st < N; ++st) {
    int64_t rank = rankOf(st);
    // Forward: its sends, the loss (last stage), its checks; plus what its
    // backward reads of it (found below, then the forward is built).
    SmallVector<Transfer> fwdSends, bwdSends;
    for (StageBoundaryOp bnd : boundaries) {
      if (int64_t(bnd.getFrom()) != st)
        continue;
      bool fwd = int64_t(bnd.getTo()) > int64_t(bnd.getFrom());
      (fwd ? fwdSends : bwdSends)
          .push_back({bnd.getInput(), fwd ? TransferKind::activation : TransferKind::gradient,
                      int64_t(bnd.getTo()), int64_t(bnd.getTag())});
    }
    SmallVector<Leaf> mine;
    for (const Leaf &l : leaves)
      if (l.stage == st)
        mine.push_back(l);
    // The backward: cut at arguments, received gradients and the
    // forward's values that have a stage (stage-free ones are recomputed,
    // and so is the exact widening of a narrower float: autocast's bf16
    // values widened back to f32 are saved at their own 2 bytes, the
    // backward widens them again, as the one-program step stores them).
    auto widened = [&](Value v) {
      auto c = v.getDefiningOp<CastOp>();
      if (!c)
        return false;
      Type from = getElementTypeOrSelf(c.getInput().getType());
      Type to = getElementTypeOrSelf(v.getType());
      return isa<FloatType>(from) && isa<FloatType>(to) &&
             from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth();
    };
    auto backwardCut = [&](Value v) {
      return isRecv(v) || (isForwardValue(v) && stage(v) != kNone && !widened(v));
    };
    SmallVector<Value> inputGradOuts, leafOuts;
    for (const Transfer &t : bwdSends) inputGradOuts.push_back(t.value);
    for (const Leaf &l : mine) leafOuts.push_back(l.value);
    SmallVector<Value> allBackwardOuts(inputGradOuts);
    allBackwardOuts.append(leafOuts);
    SmallVector<Operation *> backwardOps = slice(allBackwardOuts, backwardCut);
    for (Operation *op : backwardOps) {
      if (mixed.contains(op)) {
        op->emitOpError("reads values of two pipeline stages without a stage boundary");
        return signalPassFailure();
      }
      stageOps.insert(op);
    }
    SmallVector<Operation *> inputOps, weightOps;
    llvm::DenseSet<Value> inputValues; // computed or received by the input half
    if (splitBackward) {
      inputOps = slice(inputGradOuts, backwardCut);
      for (Operation *op : inputOps)
        for (Value r : op->getResults()) inputValues.insert(r);
      weightOps = slice(leafOuts, [&](Value v) {
        return backwardCut(v) || (inputValues.contains(v) && stage(v) != kNone);
      });
    }
    // Saved activations: forward values the backward reads.
    SmallVector<Value> saved;
    llvm::DenseSet<Value> savedSet;
    auto noteSaved = [&](ArrayRef<Operation *> ops, ArrayRef<Value> outs) {
      llvm::DenseSet<Operation *> in(ops.begin(), ops.end());
      auto consider = [&](Value v) {
        if (isForwardValue(v) && stage(v) != kNone && !isRecv(v) &&
            !in.contains(v.getDefiningOp()) && savedSet.insert(v).second)
          saved.push_back(v);
        if (isRecv(v) && recvs.lookup(v).kind == TransferKind::activation && savedSet.insert(v).second)
          saved.push_back(v);
      };
      for (Operation *op : ops)
        for (Value v : op->getOperands()) consider(v);
      for (Value v : outs) consider(v);
    };
    noteSaved(backwardOps, allBackwardOuts);
    llvm::stable_sort(saved, [&](Value a, Value c) {
      return a.getDefiningOp()->isBeforeInBlock(c.getDefiningOp());
    });
    InputRoles savedInputs;
    FunctionSpec fwdSpec;
    fwdSpec.name = "stage" + std::to_string(st) + ".forward";
    fwdSpec.attr = PipelineFunctionAttr::get(ctx, PipelinePhase::forward, st, rank);
    fwdSpec.sends = fwdSends;
    for (auto [v, k] : actSums)
      if (stage(v) == st)
        fwdSpec.output(v, role(PipelineValueKind::act_sumsq, k), "act_sumsq." + std::to_string(k));
    if (stage(ret.getOperand(0)) == st)
      fwdSpec.output(ret.getOperand(0), role(PipelineValueKind::loss, 0), "loss");
    // Values one function keeps for a later one: its results, the later
    // one's arguments, numbered across the module.
    auto keep = [&](FunctionSpec &spec, ArrayRef<Value> values, PipelineValueKind kind,
                    int64_t &counter, InputRoles &inputs) {
      std::string prefix = stringifyPipelineValueKind(kind).str() + ".";
      for (Value v : values) {
        int64_t k = counter++;
        spec.output(v, role(kind, k), prefix + std::to_string(k));
        inputs[v] = {role(kind, k), prefix + std::to_string(k)};
      }
    };
    keep(fwdSpec, saved, PipelineValueKind::saved, savedCount, savedInputs);
    SmallVector<Value> fwdOuts(fwdSpec.outputs);
    for (const Transfer &t : fwdSends) fwdOuts.push_back(t.value);
    auto forwardSlice = slice(fwdOuts, isRecv);
    if (!llvm::all_of(forwardSlice, [&](Operation *op) {
          return llvm::all_of(op->getResults(),
                              [&](Value r) { return stage(r) == st || stage(r) == kNone; });
        })) {
      step.emitError("the forward of stage ") << st << " reaches into another stage's values";
      return signalPassFailure();
    }
    func::FuncOp fwdFn = build(fwdSpec, forwardSlice, {}, recvs);
    noteParams(fwdFn, st);

    // Accumulators: each microbatch's contribution added to the step's sum.
    auto accumulate = [&](FunctionSpec &spec, ArrayRef<Operation *> ops, InputRoles inputs,
                          SmallVector<Leaf> accLeaves) {
      func::FuncOp fn = build(spec, ops, inputs, recvs);
      noteParams(fn, st);
      Block &entry = fn.getBody().front();
      auto term = cast<func::ReturnOp>(entry.getTerminator());
      OpBuilder fb(term);
      SmallVector<Value> results(term.getOperands());
      for (const Leaf &l : accLeaves) {
        int64_t id = std::find_if(leaves.begin(), leaves.end(),
                                  [&](const Leaf &x) { return x.value == l.value; }) -
                     leaves.begin();
        unsigned k = unsigned(llvm::find(spec.outputs, l.value) - spec.outputs.begin());
        StringAttr name = fb.getStringAttr("grad_acc." + argName.lookup(body->getArgument(l.param)));
        NamedAttrList attrs;
        attrs.set("loom.pipeline_value", role(PipelineValueKind::accumulator, id));
        attrs.set("loom.name", name);
        unsigned at = fn.getNumArguments();
        if (failed(fn.insertArgument(at, l.value.getType(), attrs.getDictionary(ctx), step.getLoc())))
          return func::FuncOp();
        results[k] = fb.create<AddOp>(step.getLoc(), entry.getArgument(at), results[k]);
        fn.setResultAttr(k, "loom.pipeline_value", role(PipelineValueKind::accumulator, id));
        fn.setResultAttr(k, "loom.updates", fb.getI64IntegerAttr(at));
        fn.setResultAttr(k, "loom.name", name);
      }
      term->setOperands(results);
      return fn;
    };
    auto leafSpec = [&](FunctionSpec &spec, ArrayRef<Leaf> ls) {
      for (const Leaf &l : ls) spec.output(l.value, role(PipelineValueKind::accumulator, 0), "");
    };
    if (!splitBackward) {
      FunctionSpec spec;
      spec.name = "stage" + std::to_string(st) + ".backward";
      spec.attr = PipelineFunctionAttr::get(ctx, PipelinePhase::backward, st, rank);
      spec.sends = bwdSends;
      leafSpec(spec, mine);
      accumulate(spec, backwardOps, savedInputs, mine);
    } else {
      // The input half keeps what the weight half reads of its work.
      SmallVector<Value> stash;
      {
        llvm::DenseSet<Operation *> wIn(weightOps.begin(), weightOps.end());
        llvm::DenseSet<Value> seen;
        auto consider = [&](Value v) {
          bool fromInput = (inputValues.contains(v) && stage(v) != kNone) ||
                           (isRecv(v) && recvs.lookup(v).kind == TransferKind::gradient);
          if (fromInput && !wIn.contains(v.getDefiningOp()) && seen.insert(v).second)
            stash.push_back(v);
        };
        for (Operation *op : weightOps)
          for (Value v : op->getOperands()) consider(v);
        for (Value v : leafOuts) consider(v);
      }
      FunctionSpec in;
      in.name = "stage" + std::to_string(st) + ".backward_input";
      in.attr = PipelineFunctionAttr::get(ctx, PipelinePhase::backward_input, st, rank);
      in.sends = bwdSends;
      InputRoles wInputs = savedInputs;
      keep(in, stash, PipelineValueKind::stash, stashCount, wInputs);
      noteParams(build(in, inputOps, savedInputs, recvs), st);
      FunctionSpec w;
      w.name = "stage" + std::to_string(st) + ".backward_weight";
      w.attr = PipelineFunctionAttr::get(ctx, PipelinePhase::backward_weight, st, rank);
      leafSpec(w, mine);
      accumulate(w, weightOps, wInputs, mine);
    }
  }

  // Optimizers, one per pipeline rank.
  std::vector<std::set<int64_t>> ownersOf(P); // ranks holding parameter i
  for (int64_t st = 0; st < N; ++st)
    for (unsigned i : paramsOfStage[size_t(st)]) ownersOf[i].insert(rankOf(st));
  // The global norm: its sum of terms, one term per parameter.
  auto sqrt = ret.getOperand(1).getDefiningOp<SqrtOp>();
  if (!sqrt) {
    step.emitError("the gradient norm (result 1) is not a sqrt of a sum of squares");
    return signalPassFailure();
  }
  Value normSum = sqrt.getInput();
  SmallVector<Value> terms;
  llvm::DenseSet<Operation *> normAdds;
  {
    SmallVector<Value> todo = {normSum};
    while (!todo.empty()) {
      Value v = todo.pop_back_val();
      if (auto add = v.getDefiningOp<AddOp>(); add && !forwardOps.contains(add)) {
        normAdds.insert(add);
        todo.push_back(add.getRhs());
        todo.push_back(add.getLhs());
      } else {
        terms.push_back(v);
      }
    }
  }
  llvm::DenseMap<Value, unsigned> termParam;
  for (ParamUpdate &u : s->params) {
    // The term, and its sums over the ranks that split the gradient.
    SmallVector<Value> todo = {u.normTerm};
    while (!todo.empty()) {
      Value t = todo.pop_back_val();
      termParam[t] = u.index;
      for (Operation *user : t.getUsers())
        if (isa<AllReduceOp>(user))
          todo.push_back(user->getResult(0));
    }
  }
  for (int64_t r = 0; r < ranks; ++r) {
    IRMapping map;
    b.setInsertionPoint(step);
    auto fn = b.create<func::FuncOp>(step.getLoc(), "rank" + std::to_string(r) + ".optimizer",
                                     b.getFunctionType({}, {}));
    Block *entry = fn.addEntryBlock();
    SmallVector<DictionaryAttr> argAttrs;
    auto addArg = [&](Value like, PipelineValueAttr rl, const std::string &name) {
      BlockArgument a = entry->addArgument(like.getType(), step.getLoc());
      NamedAttrList attrs;
      // The step argument's attributes (name, param, sharding) come along.
      if (auto ba = dyn_cast<BlockArgument>(like); ba && ba.getOwner() == body)
        if (DictionaryAttr d = step.getArgAttrDict(ba.getArgNumber()))
          attrs = NamedAttrList(d);
      attrs.set("loom.pipeline_value", rl);
      attrs.set("loom.name", b.getStringAttr(name));
      argAttrs.push_back(attrs.getDictionary(ctx));
      return a;
    };
    SmallVector<unsigned> owned;
    for (unsigned i = 0; i < P; ++i)
      if (ownersOf[i].count(r))
        owned.push_back(i);
    for (int g = 0; g < 3; ++g)
      for (unsigned i : owned) {
        Value a = body->getArgument(unsigned(g) * P + i);
        auto [kind, index] = argRole.lookup(a);
        map.map(a, addArg(a, role(kind, index), argName.lookup(a)));
      }
    map.map(stepArg, addArg(stepArg, role(PipelineValueKind::step, 0), "step"));
    b.setInsertionPointToStart(entry);
    // Accumulated contributions: this rank's as arguments; other ranks'
    // parts of a parameter it holds arrive from them, and its parts of a
    // parameter another rank holds go there.
    SmallVector<Transfer> sends;
    for (auto [id, l] : llvm::enumerate(leaves)) {
      int64_t from = rankOf(l.stage);
      bool held = ownersOf[l.param].count(r) > 0;
      std::string name = "grad_acc." + argName.lookup(body->getArgument(l.param));
      if (from == r) {
        BlockArgument a = addArg(l.value, role(PipelineValueKind::accumulator, int64_t(id)), name);
        if (held)
          map.map(l.value, a);
        for (int64_t other : ownersOf[l.param])
          if (other != r)
            sends.push_back({a, TransferKind::accumulated_gradient, other, int64_t(id)});
      } else if (held) {
        map.map(l.value, b.create<RecvOp>(step.getLoc(), l.value.getType(),
                                          TransferKindAttr::get(ctx, TransferKind::accumulated_gradient),
                                          b.getI64IntegerAttr(from), b.getI64IntegerAttr(int64_t(id))));
      }
    }
    for (const Transfer &t : sends)
      b.create<SendOp>(step.getLoc(), t.value, TransferKindAttr::get(ctx, t.kind),
                       b.getI64IntegerAttr(t.peer), b.getI64IntegerAttr(t.tag));
    // Everything after the backward that this rank's state allows, in the
    // step's order; the norm's sum becomes this rank's share, all_reduced.
    auto available = [&](Operation *op) {
      return llvm::all_of(op->getOperands(), [&](Value v) {
        return map.contains(v) || isa_and_nonnull<ConstantOp>(v.getDefiningOp());
      });
    };
    for (Operation &op : *body) {
      if (stageOps.contains(&op) || normAdds.contains(&op) || isa<func::ReturnOp>(op) ||
          isa<StageBoundaryOp>(op))
        continue;
      if (&op == sqrt.getOperation()) {
        Value share;
        for (Value t : terms) {
          auto it = termParam.find(t);
          if (!map.contains(t) || it == termParam.end() || *ownersOf[it->second].begin() != r)
            continue;
          share = share ? b.create<AddOp>(step.getLoc(), share, map.lookup(t)).getResult()
                        : map.lookup(t);
        }
        if (!share)
          share = b.create<ConstantOp>(
              step.getLoc(),
              DenseElementsAttr::get(cast<ShapedType>(normSum.getType()), b.getF32FloatAttr(0)),
              StringAttr(), ParamAttr());
        if (ranks > 1)
          share = b.create<AllReduceOp>(step.getLoc(), share.getType(), share,
                                        meshAxes(ctx, {MeshAxis::pp}), ReduceKind::sum);
        map.map(normSum, share);
      }
      if (!available(&op))
        continue;
      for (Value v : op.getOperands())
        if (!map.contains(v))
          b.clone(*v.getDefiningOp(), map); // a constant
      b.clone(op, map);
    }
    // Results: the norm, the lr, the updated state, the checks' gradients.
    SmallVector<Value> results;
    SmallVector<NamedAttrList> resultAttrs;
    std::string missing;
    auto result = [&](Value v, PipelineValueAttr rl, StringRef name, int64_t updates = -1) {
      if (!map.contains(v)) {
        if (missing.empty())
          missing = name.str();
        return;
      }
      results.push_back(map.lookup(v));
      NamedAttrList attrs;
      attrs.set("loom.pipeline_value", rl);
      attrs.set("loom.name", b.getStringAttr(name));
      if (updates >= 0)
        attrs.set("loom.updates", b.getI64IntegerAttr(updates));
      resultAttrs.push_back(attrs);
    };
    result(ret.getOperand(1), role(PipelineValueKind::grad_norm, 0), "grad_norm");
    result(ret.getOperand(2), role(PipelineValueKind::lr, 0), "lr");
    for (int g = 0; g < 3; ++g)
      for (auto [k, i] : llvm::enumerate(owned)) {
        Value a = body->getArgument(unsigned(g) * P + i);
        auto [kind, index] = argRole.lookup(a);
        result(ret.getOperand(3 + unsigned(g) * P + i), role(kind, index), argName.lookup(a),
               int64_t(g) * int64_t(owned.size()) + int64_t(k));
      }
    for (unsigned r2 = 3 + 3 * P; r2 < step.getNumResults(); ++r2) {
      auto n = step.getResultAttrOfType<StringAttr>(r2, "loom.name");
      if (!n || !n.getValue().starts_with("grad."))
        continue;
      unsigned i = r2 - 3 - 3 * P;
      if (ownersOf[i].count(r) && map.contains(ret.getOperand(r2)))
        result(ret.getOperand(r2), role(PipelineValueKind::grad, i), n.getValue());
    }
    if (!missing.empty()) {
      step.emitError("rank ") << r << "'s optimizer cannot compute " << missing
                              << " from the state and gradients of its stages";
      return signalPassFailure();
    }
    b.create<func::ReturnOp>(step.getLoc(), results);
    refreshFunctionType(fn);
    for (auto [k, attrs] : llvm::enumerate(argAttrs)) fn.setArgAttrs(unsigned(k), attrs);
    for (auto [k, attrs] : llvm::enumerate(resultAttrs))
      fn.setResultAttrs(unsigned(k), attrs.getDictionary(ctx));
    fn->setAttr("loom.pipeline", PipelineFunctionAttr::get(ctx, PipelinePhase::optimizer, -1, r));
    for (unsigned i : owned)
      if (!map.contains(ret.getOperand(3 + i))) {
        step.emitError("rank ") << r << " holds parameter " << argName.lookup(body->getArgument(i))
                                << " but cannot compute its update";
        return signalPassFailure();
      }
  }

  // The mesh gains its pipeline axis; the one-function forms go.
  MeshAttr old = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  module->setAttr(kMeshAttrName,
                  MeshAttr::get(ctx, ranks, old ? old.getDpReplicate() : 1,
                                old ? old.getDpShard() : 1, old ? old.getCp() : 1,
                                old ? old.getTp() : 1));
  step.erase();
  if (auto fwd = module.lookupSymbol<func::FuncOp>("forward"))
    fwd.erase();
}

} // namespace
} // namespace loom
