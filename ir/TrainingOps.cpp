//===- TrainingOps.cpp - Shapes of gradient and optimizer ops -------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ir/LoomOps.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace loom;

static RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

LogicalResult EmbeddingGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                EmbeddingGradOp::Adaptor a,
                                                SmallVectorImpl<Type> &types) {
  auto dy = tensorOf(a.getOutputGrad());
  auto ids = tensorOf(a.getIndices());
  if (dy.getRank() != ids.getRank() + 1 || dy.getShape().drop_back() != ids.getShape())
    return emitOptionalError(loc, "loom.embedding_grad: gradient does not match the ids");
  types.push_back(RankedTensorType::get(
      {a.getNumEmbeddingsAttr() ? a.getNumEmbeddingsAttr().getInt() : 0, dy.getShape().back()},
      dy.getElementType()));
  return success();
}

/// An embedding gradient's addend, when it has one, is a gradient of the
/// table.
LogicalResult EmbeddingGradOp::verify() {
  if (Value a = getAddend(); a && a.getType() != getType())
    return emitOpError("addend ") << a.getType() << " must have the result's type " << getType();
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                              RmsNormGradOp::Adaptor a,
                                              SmallVectorImpl<Type> &types) {
  types.push_back(a.getInput().getType());
  types.push_back(a.getWeight().getType());
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                                LayerNormGradOp::Adaptor a,
                                                SmallVectorImpl<Type> &types) {
  types.push_back(a.getInput().getType());
  types.push_back(a.getWeight().getType());
  types.push_back(a.getWeight().getType());
  return success();
}

/// A norm gradient's addend, when it has one, is a gradient of the input.
static LogicalResult verifyNormGradAddend(Operation *op, Value input, Value addend) {
  if (addend && addend.getType() != input.getType())
    return op->emitOpError("addend ") << addend.getType() << " must have the input's type "
                                      << input.getType();
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  return verifyNormGradAddend(*this, getInput(), getAddend());
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGradAddend(*this, getInput(), getAddend());
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                                AttentionGradOp::Adaptor a,
                                                SmallVectorImpl<Type> &types) {
  types.push_back(a.getQuery().getType());
  types.push_back(a.getKey().getType());
  types.push_back(a.getValue().getType());
  return success();
}

LogicalResult AttentionGradOp::verify() {
  auto q = cast<RankedTensorType>(getQuery().getType());
  if (getLse().getType() != attentionLseType(q, getLayout()))
    return emitOpError("lse ") << getLse().getType() << " is not the logsumexp per query row of "
                               << q;
  return success();
}

#define LOOM_SAME_AS(OP, GETTER)                                                               \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location>, OP::Adaptor a,   \
                                     SmallVectorImpl<Type> &types) {                          \
    types.push_back(a.GETTER().getType());                                                    \
    return success();                                                                          \
  }
LOOM_SAME_AS(RotaryGradOp, getOutputGrad)
LOOM_SAME_AS(ActivationGradOp, getInput)
LOOM_SAME_AS(SoftmaxGradOp, getOutput)
LOOM_SAME_AS(CrossEntropyGradOp, getLogits)
#undef LOOM_SAME_AS

LogicalResult SwiGluGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                             SwiGluGradOp::Adaptor a,
                                             SmallVectorImpl<Type> &types) {
  types.append(2, a.getGate().getType());
  return success();
}

LogicalResult SliceGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            SliceGradOp::Adaptor a, SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get(a.getInputShape(),
                                        tensorOf(a.getOutputGrad()).getElementType()));
  return success();
}

LogicalResult AdamWOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        AdamWOp::Adaptor a, SmallVectorImpl<Type> &types) {
  Type p = a.getParam().getType();
  if (a.getGrad().getType() != p || a.getExpAvg().getType() != p || a.getExpAvgSq().getType() != p)
    return emitOptionalError(loc, "loom.adamw: parameter, gradient and moments differ in type");
  types.append(3, p);
  return success();
}
