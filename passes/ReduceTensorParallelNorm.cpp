//===- ReduceTensorParallelNorm.cpp - Grad norm across tp shards ----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"
#include "passes/Passes.h"
#include "passes/TrainStepStructure.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_REDUCETENSORPARALLELNORM
#include "passes/Passes.h.inc"

namespace {

struct ReduceTensorParallelNormPass
    : impl::ReduceTensorParallelNormBase<ReduceTensorParallelNormPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    MeshAttr mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
    if (!mesh || mesh.getTp() == 1)
      return;
    auto s = analyzeTrainStep(module);
    if (failed(s))
      return signalPassFailure();
    // Shardings by parameter name, from @forward's constants.
    std::map<std::string, ShardingAttr> byName;
    if (auto fwd = module.lookupSymbol<func::FuncOp>("forward"))
      fwd.walk([&](ConstantOp c) {
        if (auto sh = c->getAttrOfType<ShardingAttr>(kShardingAttrName); sh && c.getParamAttr())
          byName[c.getParamAttr().getName().str()] = sh;
      });
    func::FuncOp step = s->step;
    unsigned P = s->params.size();
    ArrayAttr tpAxis = meshAxes(ctx, {MeshAxis::tp});
    OpBuilder b(ctx);
    for (ParamUpdate &u : s->params) {
      auto name = step.getArgAttrOfType<StringAttr>(u.index, "loom.name");
      auto it = name ? byName.find(name.str()) : byName.end();
      if (it == byName.end())
        continue;
      for (unsigned group = 0; group < 3; ++group)
        step.setArgAttr(group * P + u.index, kShardingAttrName, it->second);
      b.setInsertionPointAfterValue(u.normTerm);
      auto total = b.create<AllReduceOp>(u.adamw.getLoc(), u.normTerm.getType(), u.normTerm,
                                         tpAxis, ReduceKind::sum);
      u.normTerm.replaceAllUsesExcept(total.getResult(), total);
    }
  }
};

} // namespace
} // namespace loom
