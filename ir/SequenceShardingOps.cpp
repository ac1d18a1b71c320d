//===- SequenceShardingOps.cpp - Sequence, context and vocabulary ops -----===//
//
// Part of loom, under the Apache License v2.0.
//
// Verifiers, result types and gradient rules of SequenceSharding.td, and
// the gradient of all_gather (sequence parallelism differentiates it).
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace loom {

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The group size over `axes`, or 0 when the module has no mesh yet.
int64_t groupSizeOf(Operation *op, ArrayAttr axes) {
  MeshAttr mesh = lookupMesh(op);
  return mesh ? mesh.groupSize(axes) : 0;
}

} // namespace

MeshAttr meshWithAxis(MLIRContext *ctx, MeshAttr old, MeshAxis axis, int64_t size) {
  auto get = [&](MeshAxis a) { return a == axis ? size : old ? old.size(a) : 1; };
  return MeshAttr::get(ctx, get(MeshAxis::pp), get(MeshAxis::dp_replicate),
                       get(MeshAxis::dp_shard), get(MeshAxis::cp), get(MeshAxis::tp));
}

//===----------------------------------------------------------------------===//
// shard_slice and collective_permute
//===----------------------------------------------------------------------===//

LogicalResult ShardSliceOp::verify() {
  if (failed(verifyMeshAxes(*this, getAxes())))
    return failure();
  auto in = tensorOf(getInput()), out = tensorOf(getResult());
  int64_t dim = getDim();
  if (in.getElementType() != out.getElementType() || in.getRank() != out.getRank())
    return emitOpError("input and result differ in element type or rank");
  if (dim < 0 || dim >= in.getRank())
    return emitOpError("dim ") << dim << " is out of range for rank " << in.getRank();
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (d != dim && in.getDimSize(d) != out.getDimSize(d))
      return emitOpError("input and result differ in dim ") << d << ", which is not `dim`";
  int64_t n = groupSizeOf(*this, getAxes());
  if (n ? in.getDimSize(dim) != out.getDimSize(dim) * n
        : out.getDimSize(dim) == 0 || in.getDimSize(dim) % out.getDimSize(dim) != 0)
    return emitOpError("dim ") << dim << " must shrink from " << in.getDimSize(dim)
                               << " by the group size" << (n ? " " : "")
                               << (n ? std::to_string(n) : std::string()) << ", not to "
                               << out.getDimSize(dim);
  return success();
}

LogicalResult ShardSliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                           SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<AllGatherOp>(getLoc(), getInput().getType(), dys[0], getAxes(),
                                   getDimAttr())
                 .getResult()});
  return success();
}

LogicalResult CollectivePermuteOp::verify() { return verifyMeshAxes(*this, getAxes()); }

LogicalResult CollectivePermuteOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                                  SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<CollectivePermuteOp>(getLoc(), dys[0].getType(), dys[0], getAxes(),
                                           b.getI64IntegerAttr(-getShift()))
                 .getResult()});
  return success();
}

LogicalResult AllGatherOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<ReduceScatterOp>(getLoc(), getInput().getType(), dys[0], getAxes(),
                                       int64_t(getDim()), ReduceKind::sum)
                 .getResult()});
  return success();
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel embedding and cross-entropy
//===----------------------------------------------------------------------===//

LogicalResult VocabShardEmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &types) {
  auto table = tensorOf(adaptor.getTable()), ids = tensorOf(adaptor.getIndices());
  if (table.getRank() != 2 || tensorOf(adaptor.getFirst()).getNumElements() != 1)
    return emitOptionalError(loc, "loom.vocab_shard_embedding: table must be [Vl, D] and "
                                  "first a one-element offset");
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult VocabShardEmbeddingOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                                    SmallVectorImpl<Value> &dx) {
  int64_t rows = tensorOf(getTable()).getDimSize(0);
  dx.assign({b.create<VocabShardEmbeddingGradOp>(getLoc(), dys[0], getIndices(), getFirst(),
                                                 rows),
             Value(), Value()});
  return success();
}

LogicalResult VocabShardEmbeddingGradOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> loc,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  auto dy = tensorOf(adaptor.getOutputGrad()), ids = tensorOf(adaptor.getIndices());
  if (dy.getRank() != ids.getRank() + 1 || dy.getShape().drop_back() != ids.getShape() ||
      tensorOf(adaptor.getFirst()).getNumElements() != 1)
    return emitOptionalError(loc, "loom.vocab_shard_embedding_grad: the gradient must be "
                                  "[ids..., D] and first a one-element offset");
  types.push_back(RankedTensorType::get({int64_t(adaptor.getNumRows()), dy.getShape().back()},
                                        dy.getElementType()));
  return success();
}

LogicalResult VocabShardCrossEntropyOp::inferReturnTypes(MLIRContext *,
                                                         std::optional<Location> loc,
                                                         Adaptor adaptor,
                                                         SmallVectorImpl<Type> &types) {
  auto logits = tensorOf(adaptor.getLogits()), targets = tensorOf(adaptor.getTargets()),
       shift = tensorOf(adaptor.getShift());
  if (logits.getRank() != 2 || targets.getRank() != 1 || shift.getRank() != 1 ||
      targets.getDimSize(0) != logits.getDimSize(0) ||
      shift.getDimSize(0) != logits.getDimSize(0) ||
      tensorOf(adaptor.getFirst()).getNumElements() != 1)
    return emitOptionalError(loc, "loom.vocab_shard_cross_entropy: logits, targets and shift "
                                  "must be [N, Vl], [N] and [N], first a one-element offset");
  auto row = RankedTensorType::get({logits.getDimSize(0)}, shift.getElementType());
  types.append({row, row});
  return success();
}

LogicalResult VocabShardCrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                                       SmallVectorImpl<Value> &dx) {
  // A result nothing differentiates through contributes no gradient.
  auto zeros = [&](Value like) -> Value {
    auto t = tensorOf(like);
    return b.create<ConstantOp>(getLoc(),
                                DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)),
                                StringAttr(), ParamAttr());
  };
  Value dSum = dys[0] ? dys[0] : zeros(getSumexp());
  Value dTarget = dys[1] ? dys[1] : zeros(getTarget());
  dx.assign({b.create<VocabShardCrossEntropyGradOp>(getLoc(), getLogits(), getTargets(),
                                                    getFirst(), getShift(), dSum, dTarget)
                 .getResult(),
             Value(), Value(), Value()});
  return success();
}

LogicalResult VocabShardCrossEntropyGradOp::inferReturnTypes(MLIRContext *,
                                                             std::optional<Location> loc,
                                                             Adaptor adaptor,
                                                             SmallVectorImpl<Type> &types) {
  auto logits = tensorOf(adaptor.getLogits());
  int64_t n = logits.getRank() == 2 ? logits.getDimSize(0) : -1;
  for (Value row : {adaptor.getShift(), adaptor.getSumexpGrad(), adaptor.getTargetGrad(),
                    adaptor.getTargets()})
    if (tensorOf(row).getRank() != 1 || tensorOf(row).getDimSize(0) != n)
      return emitOptionalError(loc, "loom.vocab_shard_cross_entropy_grad: logits must be "
                                    "[N, Vl] and targets, shift and the row gradients [N]");
  types.push_back(logits);
  return success();
}

//===----------------------------------------------------------------------===//
// Context-parallel attention
//===----------------------------------------------------------------------===//

LogicalResult ContextAttentionOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  // The local rows obey loom.attention's shape rules.
  AttentionOp::Adaptor local(adaptor.getOperands(), adaptor.getAttributes());
  return AttentionOp::inferReturnTypes(ctx, loc, local, types);
}

LogicalResult ContextAttentionOp::verify() {
  if (failed(verifyMeshAxes(*this, getAxes())))
    return failure();
  if (!getCausal())
    return emitOpError("is causal attention (the load-balanced chunks serve a causal mask)");
  int64_t rows = tensorOf(getQuery()).getDimSize(2);
  if (rows % 2 || tensorOf(getKey()).getDimSize(2) != rows)
    return emitOpError("needs the same even number of local query and key rows (two "
                       "load-balanced chunks), not ")
           << rows << " and " << tensorOf(getKey()).getDimSize(2);
  return success();
}

LogicalResult ContextAttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                                 SmallVectorImpl<Value> &dx) {
  if (dys.size() > 1 && dys[1])
    return emitOpError("has a gradient for its lse result, which context_attention_grad does "
                       "not take");
  auto op = b.create<ContextAttentionGradOp>(
      getLoc(), getQuery(), getKey(), getValue(), attentionOutputAsRead(getOutput()), getLse(),
      dys[0], getAxes(), getScaleAttr(), getCausalAttr(), getRotateAttr());
  dx.assign({op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()});
  return success();
}

LogicalResult ContextAttentionGradOp::inferReturnTypes(MLIRContext *,
                                                       std::optional<Location>,
                                                       Adaptor adaptor,
                                                       SmallVectorImpl<Type> &types) {
  // The operand types match by the op's traits (the verifier checks them).
  types.append({adaptor.getQuery().getType(), adaptor.getKey().getType(),
                adaptor.getValue().getType()});
  return success();
}

} // namespace loom
