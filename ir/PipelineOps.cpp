//===- PipelineOps.cpp - Stage boundaries and point-to-point transfers ----===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {

LogicalResult StageBoundaryOp::verify() {
  int64_t from = int64_t(getFrom()), to = int64_t(getTo());
  if (from < 0 || to < 0)
    return emitOpError("stages are non-negative, not ") << from << " -> " << to;
  if (from == to)
    return emitOpError("leaves stage ") << from << " for itself";
  return success();
}

// The reader's gradient goes back to the producer's stage under the same
// tag; the pair is one transfer each way per microbatch.
LogicalResult StageBoundaryOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                              SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<StageBoundaryOp>(getLoc(), dys[0].getType(), dys[0], getToAttr(),
                                       getFromAttr(), getTagAttr())
                 .getResult()});
  return success();
}

} // namespace loom
