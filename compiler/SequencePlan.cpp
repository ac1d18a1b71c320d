//===- SequencePlan.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/SequencePlan.h"
#include "ir/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdio>

namespace loom::compiler {

void applySequencePlan(const planner::Plan &plan, TrainOptions &o) {
  o.cp = plan.cp;
  o.cpRotate = planner::cpRotateName(plan.cpRotate);
  o.tpSp = plan.tp > 1 && plan.tpSp;
  o.lossParallel = plan.tp > 1 && plan.lossParallel;
  o.tpSpDefaulted = o.tpSp && !plan.tpSpChosen;
  o.lossParallelDefaulted = o.lossParallel && !plan.lossParallelChosen;
}

std::string planNameOf(const TrainOptions &o) {
  planner::Plan p;
  p.dpReplicate = o.dpReplicate;
  p.dpShard = o.dpShard;
  p.cp = o.cp;
  p.tp = o.tp;
  p.cpRotate = o.cpRotate == "ring" ? planner::CpRotate::Ring : planner::CpRotate::AllGather;
  p.tpSp = o.tpSp;
  p.lossParallel = o.lossParallel;
  return planner::meshPlanName(p);
}

bool checkSequencePlan(mlir::ModuleOp fused, const TrainOptions &o, int64_t seq, std::string &err) {
  std::string plan = "plan '" + planNameOf(o) + "': ";
  if (o.cp > 1 && seq % (2 * o.cp)) {
    err = plan + "the sequence length " + std::to_string(seq) + " does not divide into 2 x cp = " +
          std::to_string(2 * o.cp) + " load-balanced chunks";
    return false;
  }
  if (o.tp <= 1)
    return true;
  auto fwd = fused.lookupSymbol<mlir::func::FuncOp>("forward");
  bool ok = true;
  fwd.walk([&](AttentionOp a) {
    int64_t hq = a.getQuery().getType().getDimSize(1), hkv = a.getKey().getType().getDimSize(1);
    if (ok && hq % o.tp) {
      err = plan + std::to_string(hq) + " attention heads do not divide by tp=" +
            std::to_string(o.tp);
      ok = false;
    } else if (ok && hkv % o.tp && o.tp % hkv) {
      err = plan + std::to_string(hkv) + " key/value heads do not divide by tp=" +
            std::to_string(o.tp) + " (nor tp by them, to replicate each over tp / " +
            std::to_string(hkv) + " ranks)";
      ok = false;
    }
  });
  if (ok && o.tpSp && (seq / o.cp) % o.tp) {
    err = plan + "the sequence length " + std::to_string(seq) +
          (o.cp > 1 ? " (" + std::to_string(seq / o.cp) + " per cp rank)" : std::string()) +
          " does not divide by tp=" + std::to_string(o.tp) + " for sequence parallelism";
    ok = false;
  }
  return ok;
}

void recordSequenceLayout(mlir::ModuleOp module, const TrainOptions &o, TrainProgram &out) {
  out.cp = o.cp;
  out.tokensSplitOverTp = false;
  if (auto fwd = module.lookupSymbol<mlir::func::FuncOp>("forward"))
    if (auto sh = fwd.getArgAttrOfType<ShardingAttr>(0, kShardingAttrName))
      out.tokensSplitOverTp = bool(sh.along(MeshAxis::tp));
  out.activationsSplitOverTp = o.tp > 1 && o.tpSp;
  out.lossParallel = o.tp > 1 && o.lossParallel;
}

void printSequenceSummary(const planner::Plan &plan, const TrainProgram &tp) {
  int64_t T = tp.seq;
  if (plan.cp > 1)
    std::printf("cp=%d (%s): rank c holds sequence chunks c and %d - c of %d (%lld of %lld tokens "
                "per sequence); keys and values reach the other ranks by %s\n",
                plan.cp, planner::cpRotateName(plan.cpRotate), 2 * plan.cp - 1, 2 * plan.cp,
                (long long)(T / plan.cp), (long long)T,
                plan.cpRotate == planner::CpRotate::Ring ? "ring shifts (collective_permute)"
                                                         : "one all-gather");
  // What the step was built with (the compiler may have left a defaulted
  // switch off for this model: tp.notes says why).
  if (plan.tp > 1)
    std::printf("tp=%d: sequence parallel %s, loss parallel %s\n", plan.tp,
                tp.activationsSplitOverTp
                    ? ("on (norms and residual adds on " + std::to_string(T / plan.cp / plan.tp) +
                       " of " + std::to_string(T / plan.cp) + " tokens)")
                          .c_str()
                    : "off",
                tp.lossParallel ? "on (vocabulary-parallel embedding, head and cross-entropy)"
                                : "off");
  for (const std::string &note : tp.notes) std::printf("note: %s\n", note.c_str());
}

} // namespace loom::compiler
