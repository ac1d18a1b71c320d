//===- CompileTrainStep.cpp -----------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/CompileTrainStep.h"
#include "compiler/ModelLoading.h"
#include "compiler/PipelineProgram.h"
#include "compiler/SequencePlan.h"
#include "codegen/LowerToProgram.h"
#include "frontends/onnx/OnnxImporter.h"
#include "ir/LoomOps.h"
#include "ir/Sharding.h"
#include "passes/PatternUtils.h"
#include "passes/ParallelismRefusal.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cstdlib>
#include <cstring>
#include <map>

namespace loom::compiler {

namespace {

/// The name BuildTrainStep gives a constant it makes a parameter.
std::string paramNameOf(ConstantOp c) {
  if (ParamAttr p = c.getParamAttr())
    return p.getName().str();
  return c.getName() ? c.getName()->str() : "";
}

/// The constant's f32 values into `out` (left empty with `shapesOnly`:
/// weights imported as shapes have none worth copying, and a large model's
/// would not fit); false when it is not an f32 tensor.
bool floatValues(ConstantOp c, std::vector<float> &out, bool shapesOnly) {
  auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(c.getValue());
  if (!dense || !dense.getElementType().isF32())
    return false;
  if (shapesOnly)
    return true;
  out.resize(dense.getNumElements());
  if (dense.isSplat()) {
    std::fill(out.begin(), out.end(), dense.getSplatValue<float>());
  } else {
    llvm::ArrayRef<char> raw = dense.getRawData();
    std::memcpy(out.data(), raw.data(), out.size() * sizeof(float));
  }
  return true;
}

} // namespace

void applyPlan(const planner::Plan &plan, TrainOptions &o) {
  o.dpReplicate = plan.dpReplicate;
  o.dpShard = plan.dpShard;
  o.tp = plan.tp;
  applySequencePlan(plan, o);
  o.pipeline = plan;
}

TrainOptions trainOptionsForPlan(const planner::Plan &plan) {
  TrainOptions o;
  o.bf16 = true;
  applyPlan(plan, o);
  o.ac = plan.checkpoint == planner::Checkpoint::Full        ? "full"
         : plan.checkpoint == planner::Checkpoint::Selective ? "selective"
                                                             : "none";
  o.weightsAsShapes = true;
  return o;
}

namespace {

/// The rows of one rank's step (a microbatch's under a pipeline plan) and
/// the pipeline layout; false with `err` when the batch does not split.
bool rowsPerRank(int64_t batch, const TrainOptions &o, int64_t &rows, PipelineLayout &layout,
                 std::string &err) {
  int dp = o.dpReplicate * o.dpShard;
  if (dp < 1) {
    err = "the data-parallel degree must be positive";
    return false;
  }
  if (batch % dp) {
    err = "--batch " + std::to_string(batch) + " does not divide by the data-parallel degree " +
          std::to_string(dp) + " (dp_replicate=" + std::to_string(o.dpReplicate) +
          " x dp_shard=" + std::to_string(o.dpShard) + "): every rank needs an equal batch";
    return false;
  }
  // A pipeline step runs one microbatch at a time: its programs are built
  // for a microbatch's rows (and the schedule picked first: it decides how
  // the stages are placed).
  rows = batch / dp;
  if (o.pipeline.pp > 1 && !planPipelineLayout(o, batch, layout, err))
    return false;
  if (o.pipeline.pp > 1)
    rows /= o.pipeline.microbatches;
  return true;
}

/// compileImportedTrainStep; the sp and vocabulary-parallel passes record
/// into `refusal` (may be null) when the model refuses their feature.
bool compileImported(mlir::ModuleOp module, const std::string &path, int64_t batch, int64_t seq,
                     const TrainOptions &o, TrainProgram &out, std::string &err,
                     const std::function<void(mlir::ModuleOp)> &inspectStep,
                     ParallelismRefusal *refusal);

} // namespace

bool compileTrainStep(const std::string &path, int64_t batch, int64_t seq,
                      const TrainOptions &o, TrainProgram &out, std::string &err,
                      const std::function<void(mlir::ModuleOp)> &inspectStep) {
  int64_t rows = 0;
  PipelineLayout layout;
  if (!rowsPerRank(batch, o, rows, layout, err))
    return false;
  // Sequence parallelism and the vocabulary-parallel loss are on by
  // default with tp; a model whose attention or head tp does not split
  // refuses them (the pass records which: ParallelismRefusal.h). Left to
  // their defaults, the step is built again without the one refused (each
  // at most once), and the program says so.
  TrainOptions opts = o;
  std::vector<std::string> notes;
  for (;;) {
    mlir::MLIRContext ctx;
    // Static shapes: each rank's step is built for its own rows.
    auto module = importModel(ctx, path, rows, seq, opts.weightsAsShapes, err);
    if (!module)
      return false;
    ParallelismRefusal refusal;
    if (compileImported(*module, path, batch, seq, opts, out, err, inspectStep, &refusal)) {
      out.notes.insert(out.notes.end(), notes.begin(), notes.end());
      return true;
    }
    bool sp = opts.tpSpDefaulted && refusal.feature == RefusedParallelism::Sequence;
    bool loss = opts.lossParallelDefaulted && refusal.feature == RefusedParallelism::Loss;
    if (!sp && !loss)
      return false;
    (sp ? opts.tpSp : opts.lossParallel) = false;
    (sp ? opts.tpSpDefaulted : opts.lossParallelDefaulted) = false;
    notes.push_back(std::string(sp ? "tp_sp" : "loss_parallel") + "=off for this model (" +
                    refusal.reason + "); the plan's default, say " +
                    (sp ? "tp_sp" : "loss_parallel") + "=on to require it");
    err.clear();
  }
}

bool compileImportedTrainStep(mlir::ModuleOp module, const std::string &path, int64_t batch,
                              int64_t seq, const TrainOptions &o, TrainProgram &out,
                              std::string &err,
                              const std::function<void(mlir::ModuleOp)> &inspectStep) {
  return compileImported(module, path, batch, seq, o, out, err, inspectStep, nullptr);
}

namespace {

bool compileImported(mlir::ModuleOp module, const std::string &path, int64_t batch, int64_t seq,
                     const TrainOptions &o, TrainProgram &out, std::string &err,
                     const std::function<void(mlir::ModuleOp)> &inspectStep,
                     ParallelismRefusal *refusal) {
  int64_t rows = 0;
  PipelineLayout layout;
  if (!rowsPerRank(batch, o, rows, layout, err) || !checkTokens(module, path, rows, seq, err))
    return false;
  BuildTrainStepOptions bt;
  bt.lr = o.lr;
  bt.beta1 = o.beta1;
  bt.beta2 = o.beta2;
  bt.epsilon = o.eps;
  bt.weightDecay = o.weightDecay;
  bt.maxGradNorm = o.maxGradNorm;
  bt.warmupSteps = o.warmup;
  bt.schedule = o.schedule;
  bt.totalSteps = o.totalSteps;
  bt.minLrRatio = o.minLrRatio;
  bt.trainable = o.trainable;
  bt.frozen = o.frozen;
  bt.returnGradients = o.returnGradients;
  bt.returnActivationSums = o.returnActivationSums;
  auto fuse = [&](mlir::PassManager &pm) {
    buildFusionPipeline(pm, /*autocastBf16=*/o.bf16);
    if (o.bf16) {
      // Autocast rounds an activation once per reader; one rounding shared
      // by q, k and v lets tensor parallelism see them as one group.
      pm.addPass(mlir::createCSEPass());
    }
  };
  if (!runPipeline(module, path, "fusing the model", fuse, err))
    return false;
  if (!checkSequencePlan(module, o, seq, err))
    return false;
  // Initial values: the fused forward's constants, by parameter name, taken
  // before tensor parallelism gives split weights their local shapes.
  struct FullValue {
    std::vector<int64_t> shape;
    std::vector<float> value;
    bool isF32 = false;
  };
  std::map<std::string, FullValue> initial;
  module.lookupSymbol<mlir::func::FuncOp>("forward").walk([&](ConstantOp c) {
    std::string n = paramNameOf(c);
    if (n.empty() || initial.count(n))
      return;
    FullValue &f = initial[n];
    auto t = llvm::cast<mlir::RankedTensorType>(c.getType());
    f.shape.assign(t.getShape().begin(), t.getShape().end());
    f.isF32 = floatValues(c, f.value, o.weightsAsShapes);
  });
  SpmdStepOptions spmd;
  spmd.step = bt;
  spmd.tp = o.tp;
  spmd.dpReplicate = o.dpReplicate;
  spmd.dpShard = o.dpShard;
  spmd.ddpBucketBytes = o.ddpBucketBytes;
  spmd.fsdpReshardAfterForward = o.fsdpReshardAfterForward;
  spmd.fsdpPrefetch = o.fsdpPrefetch;
  spmd.bf16 = o.bf16;
  spmd.cp = o.cp;
  spmd.cpRotate = o.cpRotate;
  spmd.sequenceParallel = o.tpSp;
  spmd.lossParallel = o.lossParallel;
  spmd.refusal = refusal;
  spmd.fp8 = o.fp8;
  spmd.fp8LmHead = o.fp8LmHead;
  // The same bits with or without the fused clipping; LOOM_FUSE_GRAD_CLIP=0
  // keeps the unfused ops (an A/B switch for timing and for checking that).
  const char *f = std::getenv("LOOM_FUSE_GRAD_CLIP");
  spmd.fuseGradientClipping = !f || std::string(f) != "0";
  // Likewise LOOM_FOLD_ATTENTION_TRANSPOSES=0 keeps heads-major attention
  // with its transposes (the same bits, more copies).
  const char *fa = std::getenv("LOOM_FOLD_ATTENTION_TRANSPOSES");
  spmd.foldAttentionTransposes = !fa || std::string(fa) != "0";
  if (std::optional<RecomputePolicy> ac = parseRecomputePolicy(o.ac))
    spmd.recompute.policy = *ac;
  spmd.recompute.every = o.acEvery;
  spmd.recompute.memoryBudgetGiB = o.acMemoryBudgetGiB;
  spmd.recompute.backend = o.acBackend;
  layout.apply(spmd);
  auto addPasses = [&](mlir::PassManager &pm) { buildSpmdTrainStep(pm, spmd); };
  if (!runPipeline(module, path, "building the training step", addPasses, err))
    return false;
  if (inspectStep)
    inspectStep(module);
  if (o.pipeline.pp > 1) {
    auto initialValue = [&](const std::string &name, ParamSlot &slot) {
      auto it = initial.find(name);
      if (it == initial.end() || !it->second.isF32)
        return false;
      slot.shape = it->second.shape;
      slot.value = it->second.value;
      return true;
    };
    if (!lowerPipelineStep(module, path, batch, seq, o, layout, initialValue, out, err))
      return false;
    recordSequenceLayout(module, o, out);
    out.recomputedOps.clear();
    return true;
  }
  auto step = module.lookupSymbol<mlir::func::FuncOp>("train_step");
  size_t numParams = (step.getNumArguments() - 3) / 3;
  out.params.clear();
  for (size_t i = 0; i < numParams; ++i) {
    ParamSlot slot;
    slot.name = step.getArgAttrOfType<mlir::StringAttr>(i, "loom.name").str();
    if (auto p = step.getArgAttrOfType<ParamAttr>(i, "loom.param"))
      slot.transposed = p.getTransposed();
    auto it = initial.find(slot.name);
    if (it == initial.end() || !it->second.isF32) {
      err = path + ": parameter '" + slot.name + "' has no float32 initial value";
      return false;
    }
    // Full shape and value; the step argument may be this rank's slice.
    slot.shape = it->second.shape;
    slot.value = it->second.value;
    if (auto sh = step.getArgAttrOfType<ShardingAttr>(i, kShardingAttrName)) {
      if (PlacementAttr p = sh.along(MeshAxis::tp); p && p.getKind() == PlacementKind::shard)
        slot.tpDim = p.getDim(), slot.tpBlocks = p.getBlocks();
      if (PlacementAttr p = sh.along(MeshAxis::dp_shard); p && p.getKind() == PlacementKind::shard)
        slot.dim0Shards = o.dpShard;
    }
    out.params.push_back(std::move(slot));
  }
  out.program = std::make_shared<rt::Program>();
  if (!lowerToProgram(step, *out.program, err)) {
    err = path + ": " + err;
    return false;
  }
  out.batch = batch;
  out.seq = seq;
  out.hasGradients = o.returnGradients;
  out.activationSums = 0;
  for (unsigned r = 0; r < step.getNumResults(); ++r)
    if (auto n = step.getResultAttrOfType<mlir::StringAttr>(r, "loom.name");
        n && n.getValue().starts_with("act_sumsq."))
      ++out.activationSums;
  out.dpReplicate = o.dpReplicate;
  out.dpShard = o.dpShard;
  out.tp = o.tp;
  recordSequenceLayout(module, o, out);
  out.recomputedOps.clear();
  step.walk([&](mlir::Operation *op) {
    if (op->hasAttr(kRecomputedAttrName))
      out.recomputedOps.push_back(op->getName().stripDialect().str());
  });
  return true;
}

} // namespace

} // namespace loom::compiler
