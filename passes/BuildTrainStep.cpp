//===- BuildTrainStep.cpp - Forward, loss, backward and optimizer ---------===//
//
// Part of loom, under the Apache License v2.0.
//
// The whole training step lives in one function so every later pass
// (sharding, pipeline split, recompute, fp8) sees forward, backward and
// optimizer together.
//===----------------------------------------------------------------------===//
#include "passes/Autodiff.h"
#include "passes/ParallelLoss.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/Regex.h"

#include <cmath>

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_BUILDTRAINSTEP
#include "passes/Passes.h.inc"

namespace {

struct Param {
  ConstantOp constant;
  std::string name;
  ParamAttr attr; // null for constants made trainable by --trainable
};

struct BuildTrainStepPass : impl::BuildTrainStepBase<BuildTrainStepPass> {
  using Base::Base;

  Value scalar(OpBuilder &b, Location loc, double v) {
    auto t = RankedTensorType::get({}, b.getF32Type());
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getF32FloatAttr(float(v))),
                                StringAttr(), ParamAttr());
  }

  /// The parameters of `fwd`, in a stable order (first appearance).
  FailureOr<SmallVector<Param>> collectParams(func::FuncOp fwd) {
    llvm::Regex trainRe(trainable), frozenRe(frozen);
    if (!trainable.empty() && !trainRe.isValid())
      return fwd.emitError("invalid --trainable regex '") << trainable << "'", failure();
    if (!frozen.empty() && !frozenRe.isValid())
      return fwd.emitError("invalid --frozen regex '") << frozen << "'", failure();
    bool anyParamAttr = false;
    fwd.walk([&](ConstantOp c) { anyParamAttr |= bool(c.getParamAttr()); });
    SmallVector<Param> params;
    fwd.walk([&](ConstantOp c) {
      auto type = cast<RankedTensorType>(c.getType());
      if (!isa<FloatType>(type.getElementType()))
        return;
      std::string name = c.getParamAttr() ? c.getParamAttr().getName().str()
                         : c.getName()    ? c.getName()->str()
                                          : "";
      if (name.empty())
        return;
      bool isParam = bool(c.getParamAttr());
      if (!anyParamAttr && !isParam) {
        // No exporter metadata: named float initializers are parameters,
        // except rotary tables, which only ever feed rotary ops.
        bool onlyRotaryTable = !c->use_empty() && llvm::all_of(c->getUses(), [](OpOperand &u) {
          return isa<RotaryOp>(u.getOwner()) && u.getOperandNumber() > 0;
        });
        isParam = !onlyRotaryTable;
      }
      if (!trainable.empty() && trainRe.match(name))
        isParam = true;
      if (!frozen.empty() && frozenRe.match(name))
        isParam = false;
      if (isParam)
        params.push_back(Param{c, name, c.getParamAttr()});
    });
    if (params.empty())
      return fwd.emitError("no trainable parameters (see --trainable/--frozen)"), failure();
    // A parameter the exporter folded or merged away cannot be trained from
    // this graph: say which, unless --frozen asks to leave it as it is.
    if (auto unread = fwd->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(
            kUnreadParamsAttrName))
      for (NamedAttribute entry : unread) {
        StringRef name = entry.getName().getValue();
        if (!frozen.empty() && frozenRe.match(name))
          continue;
        return fwd.emitError("parameter '")
                   << name << "' was folded into initializer '"
                   << cast<StringAttr>(entry.getValue()).getValue()
                   << "' by the exporter's optimizer, so it cannot be trained from this graph; "
                      "export with optimize=False (or leave it untrained with --frozen)",
               failure();
      }
    return params;
  }

  /// lr(step) = peak * min(warmup(step), decay(step)): warmup is
  /// min(1, (s+1)/W) and decay is 1 until W, then cosine or linear towards
  /// minLrRatio over totalSteps. (For s < W the decay is 1; for s >= W the
  /// warmup is 1, so the min picks the right phase without a branch.)
  Value learningRate(OpBuilder &b, Location loc, Value step) {
    Value one = scalar(b, loc, 1.0);
    Value factor = one;
    if (warmupSteps > 0) {
      Value s1 = b.create<AddOp>(loc, step, one);
      Value warm = b.create<DivOp>(loc, s1, scalar(b, loc, double(warmupSteps)));
      factor = b.create<MinOp>(loc, one, warm);
    }
    if (schedule != "constant" && totalSteps > warmupSteps) {
      Value p = b.create<DivOp>(loc, b.create<SubOp>(loc, step, scalar(b, loc, double(warmupSteps))),
                                scalar(b, loc, double(totalSteps - warmupSteps)));
      p = b.create<MinOp>(loc, one, b.create<MaxOp>(loc, scalar(b, loc, 0.0), p));
      Value shape; // in [0, 1], 1 at the start of the decay
      if (schedule == "cosine") {
        Value c = b.create<CosOp>(loc, b.create<MulOp>(loc, p, scalar(b, loc, M_PI)));
        shape = b.create<MulOp>(loc, b.create<AddOp>(loc, one, c), scalar(b, loc, 0.5));
      } else {
        shape = b.create<SubOp>(loc, one, p);
      }
      Value decay = b.create<AddOp>(
          loc, scalar(b, loc, minLrRatio),
          b.create<MulOp>(loc, shape, scalar(b, loc, 1.0 - minLrRatio)));
      factor = b.create<MinOp>(loc, factor, decay);
    }
    return b.create<MulOp>(loc, factor, scalar(b, loc, lr));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (schedule != "constant" && schedule != "cosine" && schedule != "linear") {
      module.emitError("unknown schedule '") << schedule << "' (constant, cosine, linear)";
      return signalPassFailure();
    }
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd || fwd.getNumArguments() != 1 || fwd.getNumResults() != 1) {
      module.emitError("expected @forward(tokens) -> logits");
      return signalPassFailure();
    }
    auto tokensType = cast<RankedTensorType>(fwd.getArgument(0).getType());
    auto logitsType = cast<RankedTensorType>(fwd.getResultTypes()[0]);
    if (logitsType.getRank() < 2 ||
        logitsType.getNumElements() / logitsType.getShape().back() != tokensType.getNumElements()) {
      fwd.emitError("logits must be [tokens..., vocab]");
      return signalPassFailure();
    }
    auto params = collectParams(fwd);
    if (failed(params))
      return signalPassFailure();

    // Signature.
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    Location loc = fwd.getLoc();
    auto scalarType = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Type> argTypes, resultTypes = {scalarType, scalarType, scalarType};
    size_t P = params->size();
    for (int group = 0; group < 3; ++group)
      for (Param &p : *params) argTypes.push_back(p.constant.getType());
    argTypes.append({scalarType, tokensType, tokensType});
    for (int group = 0; group < 3; ++group)
      for (Param &p : *params) resultTypes.push_back(p.constant.getType());
    b.setInsertionPointToEnd(module.getBody());
    auto step = b.create<func::FuncOp>(loc, "train_step", b.getFunctionType(argTypes, resultTypes));
    Block *body = step.addEntryBlock();
    const char *prefixes[3] = {"", "exp_avg.", "exp_avg_sq."};
    for (int group = 0; group < 3; ++group)
      for (size_t i = 0; i < P; ++i) {
        const Param &p = (*params)[i];
        step.setArgAttr(group * P + i, "loom.name", b.getStringAttr(prefixes[group] + p.name));
        if (group == 0 && p.attr)
          step.setArgAttr(i, "loom.param", p.attr);
      }
    Value stepArg = body->getArgument(3 * P), tokens = body->getArgument(3 * P + 1),
          targets = body->getArgument(3 * P + 2);
    step.setArgAttr(3 * P, "loom.name", b.getStringAttr("step"));
    step.setArgAttr(3 * P + 1, "loom.name", b.getStringAttr("tokens"));
    step.setArgAttr(3 * P + 2, "loom.name", b.getStringAttr("targets"));

    // Forward, with parameters read from the arguments.
    IRMapping map;
    map.map(fwd.getArgument(0), tokens);
    for (size_t i = 0; i < P; ++i) map.map((*params)[i].constant.getResult(), body->getArgument(i));
    b.setInsertionPointToEnd(body);
    Value logits;
    for (Operation &op : fwd.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        logits = map.lookup(ret.getOperand(0));
        continue;
      }
      if (auto c = dyn_cast<ConstantOp>(op); c && map.contains(c.getResult()))
        continue;
      b.clone(op, map);
    }
    int64_t vocab = logitsType.getShape().back(), rows = tokensType.getNumElements();
    Value flatLogits = b.create<ReshapeOp>(
        loc, RankedTensorType::get({rows, vocab}, logitsType.getElementType()), logits);
    Value flatTargets = b.create<ReshapeOp>(
        loc, RankedTensorType::get({rows}, tokensType.getElementType()), targets);
    // Sharded logits (loss, context or sequence parallelism) reduce over
    // their ranks; otherwise this is one device's cross_entropy.
    Value loss = buildParallelLoss(b, loc, flatLogits, flatTargets,
                                   fwd.getResultAttrOfType<ShardingAttr>(0, kShardingAttrName),
                                   logitsType.getRank() - 1);
    // Checks: the residual stream entering every norm, as a sum of squares
    // (sums add up across data-parallel ranks; the driver takes the root).
    SmallVector<Value> activationSums;
    if (returnActivationSums) {
      SmallVector<Value> streams;
      for (Operation &op : *body)
        if (isa<RmsNormOp, LayerNormOp>(op))
          streams.push_back(op.getOperand(0));
      for (Value x : streams) {
        auto t = cast<RankedTensorType>(x.getType());
        SmallVector<int64_t> all;
        for (int64_t d = 0; d < t.getRank(); ++d) all.push_back(d);
        activationSums.push_back(
            b.create<ReduceOp>(loc, b.create<MulOp>(loc, x, x), ReduceKind::sum, all, false));
      }
    }

    // Reverse mode over the ops reachable from a parameter.
    SmallVector<Value> paramArgs;
    for (size_t i = 0; i < P; ++i) paramArgs.push_back(body->getArgument(i));
    SmallVector<Operation *> forwardOps;
    for (Operation &op : *body) forwardOps.push_back(&op);
    llvm::DenseMap<Value, Value> grads;
    if (failed(buildReverseMode(b, forwardOps, paramArgs, loss, scalar(b, loc, 1.0), grads)))
      return signalPassFailure();

    // Global gradient norm and clipping (torch.nn.utils.clip_grad_norm_:
    // coef = max_norm / (norm + 1e-6), applied when below 1).
    SmallVector<Value> g(P);
    Value sumSq;
    for (size_t i = 0; i < P; ++i) {
      Value arg = body->getArgument(i);
      g[i] = grads.lookup(arg);
      if (!g[i]) {
        auto t = cast<RankedTensorType>(arg.getType());
        g[i] = b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)),
                                    StringAttr(), ParamAttr());
      }
      auto t = cast<RankedTensorType>(g[i].getType());
      SmallVector<int64_t> all;
      for (int64_t d = 0; d < t.getRank(); ++d) all.push_back(d);
      Value sq = b.create<MulOp>(loc, g[i], g[i]);
      Value s = t.getRank() ? Value(b.create<ReduceOp>(loc, sq, ReduceKind::sum, all, false)) : sq;
      sumSq = sumSq ? b.create<AddOp>(loc, sumSq, s).getResult() : s;
    }
    SmallVector<Value> unclipped(g);
    Value norm = b.create<SqrtOp>(loc, sumSq);
    if (maxGradNorm > 0) {
      Value coef = b.create<DivOp>(loc, scalar(b, loc, maxGradNorm),
                                   b.create<AddOp>(loc, norm, scalar(b, loc, 1e-6)));
      coef = b.create<MinOp>(loc, scalar(b, loc, 1.0), coef);
      for (Value &gi : g) gi = b.create<MulOp>(loc, gi, coef);
    }
    Value lrValue = learningRate(b, loc, stepArg);

    SmallVector<Value> results = {loss, norm, lrValue};
    SmallVector<Value> newP, newM, newV;
    for (size_t i = 0; i < P; ++i) {
      auto op = b.create<AdamWOp>(loc, body->getArgument(i), g[i], body->getArgument(P + i),
                                  body->getArgument(2 * P + i), lrValue, stepArg,
                                  /*grad_scale=*/Value(), b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
                                  b.getF64FloatAttr(epsilon), b.getF64FloatAttr(weightDecay));
      newP.push_back(op.getNewParam());
      newM.push_back(op.getNewExpAvg());
      newV.push_back(op.getNewExpAvgSq());
    }
    results.append(newP);
    results.append(newM);
    results.append(newV);
    if (returnGradients) {
      // The signature was built without them: extend it.
      results.append(unclipped);
      SmallVector<Type> types(step.getResultTypes());
      for (Value v : unclipped) types.push_back(v.getType());
      step.setFunctionType(b.getFunctionType(step.getArgumentTypes(), types));
    }
    if (!activationSums.empty()) {
      results.append(activationSums);
      SmallVector<Type> types(step.getResultTypes());
      for (Value v : activationSums) types.push_back(v.getType());
      step.setFunctionType(b.getFunctionType(step.getArgumentTypes(), types));
    }
    b.create<func::ReturnOp>(loc, results);
    step.setResultAttr(0, "loom.name", b.getStringAttr("loss"));
    step.setResultAttr(1, "loom.name", b.getStringAttr("grad_norm"));
    step.setResultAttr(2, "loom.name", b.getStringAttr("lr"));
    for (size_t k = 0; k < 3 * P; ++k)
      step.setResultAttr(3 + k, "loom.updates", b.getI64IntegerAttr(int64_t(k)));
    if (returnGradients)
      for (size_t i = 0; i < P; ++i)
        step.setResultAttr(3 + 3 * P + i, "loom.name",
                           b.getStringAttr("grad." + (*params)[i].name));
    for (size_t k = 0; k < activationSums.size(); ++k)
      step.setResultAttr(3 + 3 * P + (returnGradients ? P : 0) + k, "loom.name",
                         b.getStringAttr("act_sumsq." + std::to_string(k)));
  }
};

} // namespace
} // namespace loom
