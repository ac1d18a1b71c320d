//===- PipelineProgram.cpp ------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/PipelineProgram.h"
#include "compiler/PipelinePlan.h"
#include "codegen/LowerToProgram.h"
#include "ir/LoomOps.h"
#include "ir/Sharding.h"

#include <map>
#include <sstream>

namespace loom::compiler {

void PipelineLayout::apply(SpmdStepOptions &o) const {
  if (pp <= 1)
    return;
  o.pipelineRanks = pp;
  o.pipelineStages = schedule.stages;
  o.microbatches = microbatches;
  o.pipelineCuts = cuts;
  o.pipelineVShape = vshape;
  o.splitBackward = schedule.splitBackward;
}

bool checkPipelineOptions(const TrainOptions &o, std::string &err) {
  if (o.pipeline.pp <= 1)
    return true;
  // Not combined with pipelines yet: fp8's linear layers and activation
  // checkpointing (loom-recompute works on the whole @train_step).
  std::string name = planner::meshPlanName(o.pipeline);
  if (!o.fp8.empty()) {
    err = "plan '" + name + "': --fp8 is not supported with pipeline plans yet";
    return false;
  }
  if (o.ac != "none") {
    err = "plan '" + name + "': --ac " + o.ac + " is not supported with pipeline plans yet";
    return false;
  }
  return true;
}

bool planPipelineLayout(const TrainOptions &o, int64_t batch, PipelineLayout &out,
                        std::string &err) {
  const planner::Plan &plan = o.pipeline;
  std::string name = planner::meshPlanName(plan);
  int dp = o.dpReplicate * o.dpShard;
  if (!checkPipelineOptions(o, err))
    return false;
  out.pp = plan.pp;
  out.microbatches = plan.microbatches;
  if (batch % (int64_t(dp) * plan.microbatches)) {
    err = "--batch " + std::to_string(batch) + " does not split into " +
          std::to_string(plan.microbatches) + " microbatches on each of " + std::to_string(dp) +
          " data-parallel rank" + (dp == 1 ? "" : "s") + " (plan " + name + ")";
    return false;
  }
  if (!planSchedule(plan, out.schedule, err))
    return false;
  // Stage placement: a loop (stage s on rank s % pp) or ZBV's V.
  const rt::PipelineSchedule &s = out.schedule;
  bool loop = true, vee = s.stages == 2 * s.ranks;
  for (int st = 0; st < s.stages; ++st) {
    loop &= s.stageRank[size_t(st)] == st % s.ranks;
    vee &= s.stageRank[size_t(st)] == (st < s.ranks ? st : 2 * s.ranks - 1 - st);
  }
  if (!loop && !vee) {
    err = "plan '" + name + "': schedule " + s.name +
          " places its stages neither in a loop (stage s on rank s % pp) nor in a V (ZBV)";
    return false;
  }
  out.vshape = !loop;
  out.cuts.clear();
  if (!o.ppSplit.empty()) {
    std::stringstream ss(o.ppSplit);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos) {
        err = "--pp-split '" + o.ppSplit + "': expected layer numbers such as 2,4,6, not '" + item + "'";
        return false;
      }
      out.cuts.push_back(std::stoll(item));
    }
    if (int(out.cuts.size()) != s.stages - 1) {
      err = "--pp-split '" + o.ppSplit + "' names " + std::to_string(out.cuts.size()) +
            " cuts; " + std::to_string(s.stages) + " stages need " + std::to_string(s.stages - 1);
      return false;
    }
  }
  return true;
}

namespace {

rt::PipeSlot slotOf(mlir::DictionaryAttr attrs) {
  rt::PipeSlot s;
  if (!attrs)
    return s;
  if (auto v = attrs.getAs<PipelineValueAttr>("loom.pipeline_value")) {
    s.role = rt::PipeRole(uint8_t(v.getKind()));
    s.index = v.getIndex();
  }
  if (auto k = attrs.getAs<TransferKindAttr>("loom.transfer"))
    s.transfer = rt::TransferKind(uint8_t(k.getValue()));
  if (auto p = attrs.getAs<mlir::IntegerAttr>("loom.peer"))
    s.peer = p.getInt();
  return s;
}

} // namespace

bool lowerPipelineStep(mlir::ModuleOp module, const std::string &path, int64_t batch, int64_t seq,
                       const TrainOptions &o, const PipelineLayout &layout,
                       const std::function<bool(const std::string &, ParamSlot &)> &initialValue,
                       TrainProgram &out, std::string &err) {
  auto prog = std::make_shared<rt::PipelineProgram>();
  prog->schedule = layout.schedule;
  prog->microbatches = layout.microbatches;
  prog->stageCuts = layout.cuts;
  prog->ranksPerStage = o.dpReplicate * o.dpShard * o.tp;
  std::map<size_t, ParamSlot> slots;
  size_t actSums = 0;
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    auto attr = fn->getAttrOfType<PipelineFunctionAttr>("loom.pipeline");
    if (!attr)
      continue;
    rt::PipelineFunction f;
    f.phase = rt::PipePhase(uint8_t(attr.getPhase()));
    f.stage = int(attr.getStage());
    f.rank = int(attr.getRank());
    auto program = std::make_shared<rt::Program>();
    if (!lowerToProgram(fn, *program, err)) {
      err = path + ": " + fn.getName().str() + ": " + err;
      return false;
    }
    f.program = program;
    for (unsigned a = 0; a < fn.getNumArguments(); ++a) f.inputs.push_back(slotOf(fn.getArgAttrDict(a)));
    for (unsigned r = 0; r < fn.getNumResults(); ++r) {
      f.outputs.push_back(slotOf(fn.getResultAttrDict(r)));
      if (f.outputs.back().role == rt::PipeRole::ActSumSq)
        actSums = std::max(actSums, size_t(f.outputs.back().index) + 1);
    }
    if (f.phase == rt::PipePhase::Optimizer) {
      // Parameters: their names, layouts and slices, from the optimizer
      // arguments that hold them.
      for (unsigned a = 0; a < fn.getNumArguments(); ++a) {
        const rt::PipeSlot &s = f.inputs[a];
        if (s.role != rt::PipeRole::Param || slots.count(size_t(s.index)))
          continue;
        ParamSlot slot;
        slot.name = fn.getArgAttrOfType<mlir::StringAttr>(a, "loom.name").str();
        if (auto p = fn.getArgAttrOfType<ParamAttr>(a, "loom.param"))
          slot.transposed = p.getTransposed();
        if (!initialValue(slot.name, slot)) {
          err = path + ": parameter '" + slot.name + "' has no float32 initial value";
          return false;
        }
        if (auto sh = fn.getArgAttrOfType<ShardingAttr>(a, kShardingAttrName)) {
          if (PlacementAttr p = sh.along(MeshAxis::tp); p && p.getKind() == PlacementKind::shard)
            slot.tpDim = p.getDim(), slot.tpBlocks = p.getBlocks();
          if (PlacementAttr p = sh.along(MeshAxis::dp_shard);
              p && p.getKind() == PlacementKind::shard)
            slot.dim0Shards = o.dpShard;
        }
        slots[size_t(s.index)] = std::move(slot);
      }
    }
    prog->functions.push_back(std::move(f));
  }
  out.params.clear();
  for (auto &[i, slot] : slots) {
    if (i != out.params.size()) {
      err = path + ": no pipeline rank holds parameter " + std::to_string(out.params.size());
      return false;
    }
    out.params.push_back(std::move(slot));
  }
  prog->numParams = out.params.size();
  // Every stage has the programs its schedule runs.
  const rt::PipelineSchedule &s = prog->schedule;
  for (int st = 0; st < s.stages; ++st) {
    std::vector<rt::PipePhase> need = {rt::PipePhase::Forward};
    if (s.splitBackward)
      need.insert(need.end(), {rt::PipePhase::BackwardInput, rt::PipePhase::BackwardWeight});
    else
      need.push_back(rt::PipePhase::Backward);
    for (rt::PipePhase ph : need) {
      bool found = false;
      for (const rt::PipelineFunction &f : prog->functions)
        found |= f.stage == st && f.phase == ph && f.rank == s.stageRank[size_t(st)];
      if (!found) {
        err = path + ": stage " + std::to_string(st) + " has no " + rt::pipePhaseName(ph) +
              " program on rank " + std::to_string(s.stageRank[size_t(st)]);
        return false;
      }
    }
  }
  for (int r = 0; r < s.ranks; ++r)
    if (!prog->optimizerOf(r)) {
      err = path + ": pipeline rank " + std::to_string(r) + " has no optimizer";
      return false;
    }
  out.pipeline = prog;
  out.program = std::const_pointer_cast<rt::Program>(prog->optimizerOf(0)->program);
  out.batch = batch;
  out.seq = seq;
  out.hasGradients = o.returnGradients;
  out.activationSums = actSums;
  out.dpReplicate = o.dpReplicate;
  out.dpShard = o.dpShard;
  out.tp = o.tp;
  out.pp = layout.pp;
  return true;
}

} // namespace loom::compiler
