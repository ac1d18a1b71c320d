//===- LoomOps.cpp - loom op shape inference, verifiers, folders ----------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace loom;

namespace {
RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}
} // namespace

FailureOr<SmallVector<int64_t>> loom::broadcastShapes(ArrayRef<int64_t> a,
                                                      ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Constants and casts
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("changes the shape ")
           << shapeStr(getInput().getType().getShape()) << " -> "
           << shapeStr(getResult().getType().getShape());
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define LOOM_SAME_TYPE_AS_INPUT(OP)                                            \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location>,   \
                                     OP::Adaptor adaptor,                      \
                                     SmallVectorImpl<Type> &types) {           \
    types.push_back(adaptor.getInput().getType());                             \
    return success();                                                          \
  }
LOOM_SAME_TYPE_AS_INPUT(NegOp)
LOOM_SAME_TYPE_AS_INPUT(SqrtOp)
LOOM_SAME_TYPE_AS_INPUT(RsqrtOp)
LOOM_SAME_TYPE_AS_INPUT(ReciprocalOp)
LOOM_SAME_TYPE_AS_INPUT(ExpOp)
LOOM_SAME_TYPE_AS_INPUT(LogOp)
LOOM_SAME_TYPE_AS_INPUT(TanhOp)
LOOM_SAME_TYPE_AS_INPUT(SigmoidOp)
LOOM_SAME_TYPE_AS_INPUT(SiluOp)
LOOM_SAME_TYPE_AS_INPUT(CosOp)
LOOM_SAME_TYPE_AS_INPUT(SinOp)
LOOM_SAME_TYPE_AS_INPUT(ReluOp)
LOOM_SAME_TYPE_AS_INPUT(ErfOp)
LOOM_SAME_TYPE_AS_INPUT(SoftplusOp)
LOOM_SAME_TYPE_AS_INPUT(GeluOp)
LOOM_SAME_TYPE_AS_INPUT(SoftmaxOp)
#undef LOOM_SAME_TYPE_AS_INPUT

static LogicalResult inferBroadcast(std::optional<Location> loc, StringRef op,
                                    ArrayRef<Value> operands,
                                    SmallVectorImpl<Type> &types) {
  Type elem = tensorOf(operands.back()).getElementType();
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    auto t = tensorOf(v);
    auto b = broadcastShapes(shape, t.getShape());
    if (failed(b))
      return emitOptionalError(loc, "loom.", op, ": shapes ", shapeStr(shape),
                               " and ", shapeStr(t.getShape()),
                               " do not broadcast");
    shape = *b;
  }
  types.push_back(RankedTensorType::get(shape, elem));
  return success();
}

#define LOOM_BROADCAST_BINARY(OP, NAME)                                        \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     OP::Adaptor adaptor,                      \
                                     SmallVectorImpl<Type> &types) {           \
    if (tensorOf(adaptor.getLhs()).getElementType() !=                         \
        tensorOf(adaptor.getRhs()).getElementType())                           \
      return emitOptionalError(loc, "loom." NAME ": element types differ");    \
    return inferBroadcast(loc, NAME, {adaptor.getLhs(), adaptor.getRhs()},     \
                          types);                                              \
  }
LOOM_BROADCAST_BINARY(AddOp, "add")
LOOM_BROADCAST_BINARY(SubOp, "sub")
LOOM_BROADCAST_BINARY(MulOp, "mul")
LOOM_BROADCAST_BINARY(DivOp, "div")
LOOM_BROADCAST_BINARY(PowOp, "pow")
LOOM_BROADCAST_BINARY(MaxOp, "max")
LOOM_BROADCAST_BINARY(MinOp, "min")
#undef LOOM_BROADCAST_BINARY

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        WhereOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  if (tensorOf(adaptor.getLhs()).getElementType() !=
      tensorOf(adaptor.getRhs()).getElementType())
    return emitOptionalError(loc, "loom.where: element types differ");
  return inferBroadcast(
      loc, "where", {adaptor.getCondition(), adaptor.getLhs(), adaptor.getRhs()},
      types);
}

//===----------------------------------------------------------------------===//
// Linear algebra, reductions, normalization
//===----------------------------------------------------------------------===//

/// The result type of op(lhs) op(rhs), shared by matmul and matmul_bias.
static LogicalResult inferMatmulType(std::optional<Location> loc, Value lhsValue,
                                     Value rhsValue, BoolAttr transposeLhs,
                                     BoolAttr transposeRhs, SmallVectorImpl<Type> &types) {
  auto lhs = tensorOf(lhsValue), rhs = tensorOf(rhsValue);
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "loom.matmul: operands need rank >= 2");
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "loom.matmul: element types differ");
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  // Read the flags null-safely: while parsing, defaulted attributes that
  // were not spelled out are absent from the adaptor's dictionary.
  auto flag = [](BoolAttr a) { return a && a.getValue(); };
  int64_t m = ls[ls.size() - 2], k = ls.back();
  if (flag(transposeLhs))
    std::swap(m, k);
  int64_t k2 = rs[rs.size() - 2], n = rs.back();
  if (flag(transposeRhs))
    std::swap(k2, n);
  if (k != k2)
    return emitOptionalError(loc, "loom.matmul: contracting dims differ (",
                             k, " vs ", k2, ") for ", shapeStr(ls), " x ",
                             shapeStr(rs));
  auto batch = broadcastShapes(ls.drop_back(2), rs.drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "loom.matmul: batch dims do not broadcast");
  SmallVector<int64_t> shape = *batch;
  shape.push_back(m);
  shape.push_back(n);
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         MatmulOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferMatmulType(loc, adaptor.getLhs(), adaptor.getRhs(), adaptor.getTransposeLhsAttr(),
                         adaptor.getTransposeRhsAttr(), types);
}

LogicalResult MatmulBiasOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             MatmulBiasOp::Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  if (failed(inferMatmulType(loc, adaptor.getLhs(), adaptor.getRhs(),
                             adaptor.getTransposeLhsAttr(), adaptor.getTransposeRhsAttr(), types)))
    return failure();
  auto out = cast<RankedTensorType>(types.back());
  auto bias = tensorOf(adaptor.getBias());
  if (bias.getRank() != 1 || bias.getDimSize(0) != out.getShape().back() ||
      bias.getElementType() != out.getElementType())
    return emitOptionalError(loc, "loom.matmul_bias: bias ", bias,
                             " must be a vector of the result's last dim and element type (",
                             out, ")");
  return success();
}

LogicalResult MatmulAccumulateOp::inferReturnTypes(MLIRContext *,
                                                   std::optional<Location> loc,
                                                   MatmulAccumulateOp::Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  if (failed(inferMatmulType(loc, adaptor.getLhs(), adaptor.getRhs(),
                             adaptor.getTransposeLhsAttr(), adaptor.getTransposeRhsAttr(), types)))
    return failure();
  auto out = cast<RankedTensorType>(types.back());
  if (tensorOf(adaptor.getAddend()) != out)
    return emitOptionalError(loc, "loom.matmul_accumulate: addend ", tensorOf(adaptor.getAddend()),
                             " must have the product's type ", out);
  return success();
}

namespace {
/// matmul(a, transpose(b)) where the transpose swaps only the last two dims
/// becomes matmul(a, b) with the operand's transpose flag flipped: the
/// kernels read either layout, so the copy is wasted work.
struct FoldTransposeIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  static bool swapsLastTwo(TransposeOp t) {
    ArrayRef<int64_t> p = t.getPermutation();
    int64_t r = int64_t(p.size());
    for (int64_t i = 0; i < r - 2; ++i)
      if (p[i] != i)
        return false;
    return r >= 2 && p[r - 2] == r - 1 && p[r - 1] == r - 2;
  }
  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rewriter) const override {
    auto lt = op.getLhs().getDefiningOp<TransposeOp>();
    auto rt = op.getRhs().getDefiningOp<TransposeOp>();
    bool foldL = lt && swapsLastTwo(lt), foldR = rt && swapsLastTwo(rt);
    if (!foldL && !foldR)
      return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(
        op, foldL ? lt.getInput() : op.getLhs(), foldR ? rt.getInput() : op.getRhs(),
        rewriter.getBoolAttr(op.getTransposeLhs() != foldL),
        rewriter.getBoolAttr(op.getTransposeRhs() != foldR));
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldTransposeIntoMatmul>(context);
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         ReduceOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  SmallVector<bool> reduced(in.getRank(), false);
  for (int64_t a : adaptor.getAxes()) {
    if (a < 0 || a >= in.getRank())
      return emitOptionalError(loc, "loom.reduce: axis ", a,
                               " out of range for rank ", in.getRank());
    reduced[a] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (!reduced[i])
      shape.push_back(in.getDimSize(i));
    else if (!adaptor.getKeepdimAttr() || adaptor.getKeepdimAttr().getValue())
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult SumSquaresOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                             SumSquaresOp::Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get({}, tensorOf(adaptor.getInput()).getElementType()));
  return success();
}

LogicalResult GlobalSumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  Type element = getResult().getType().getElementType();
  for (auto [k, v] : llvm::enumerate(getInputs()))
    if (tensorOf(v).getElementType() != element)
      return emitOpError("input ") << k << " has element type " << tensorOf(v).getElementType()
                                   << ", the result " << element;
  return success();
}

static LogicalResult checkNormWeight(std::optional<Location> loc, StringRef op,
                                     RankedTensorType in, Value weight) {
  if (!weight)
    return success();
  auto w = tensorOf(weight);
  if (in.getRank() < 1 || w.getRank() != 1 || w.getDimSize(0) != in.getShape().back())
    return emitOptionalError(loc, "loom.", op, ": weight ", shapeStr(w.getShape()),
                             " does not match the last dim of ",
                             shapeStr(in.getShape()));
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          RmsNormOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  if (failed(checkNormWeight(loc, "rms_norm", in, adaptor.getWeight())))
    return failure();
  types.push_back(in);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            LayerNormOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  if (failed(checkNormWeight(loc, "layer_norm", in, adaptor.getWeight())) ||
      failed(checkNormWeight(loc, "layer_norm", in, adaptor.getBias())))
    return failure();
  types.push_back(in);
  return success();
}

//===----------------------------------------------------------------------===//
// Transformer blocks
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            EmbeddingOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto table = tensorOf(adaptor.getTable());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "loom.embedding: table must be [V, D], got ",
                             shapeStr(table.getShape()));
  SmallVector<int64_t> shape(tensorOf(adaptor.getIndices()).getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         RotaryOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  if (in.getRank() < 1 || in.getShape().back() % 2 != 0)
    return emitOptionalError(loc, "loom.rotary: last dim must be even");
  for (Value table : {adaptor.getCos(), adaptor.getSin()}) {
    auto b = broadcastShapes(in.getShape(), tensorOf(table).getShape());
    if (failed(b) || ArrayRef<int64_t>(*b) != in.getShape())
      return emitOptionalError(loc, "loom.rotary: table ",
                               shapeStr(tensorOf(table).getShape()),
                               " does not broadcast to ",
                               shapeStr(in.getShape()));
  }
  types.push_back(in);
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            AttentionOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto q = tensorOf(adaptor.getQuery()), k = tensorOf(adaptor.getKey()),
       v = tensorOf(adaptor.getValue());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return emitOptionalError(loc, "loom.attention: q, k, v must be [B, H, T, D]");
  // The checks in heads-major terms; the output keeps q's layout.
  // (Absent while the parser infers the types: the default, heads-major.)
  AttentionLayout layout =
      adaptor.getLayoutAttr() ? adaptor.getLayoutAttr().getValue() : AttentionLayout::heads_major;
  SmallVector<int64_t, 4> qs = attentionHeadsMajorDims(q.getShape(), layout),
                          ks = attentionHeadsMajorDims(k.getShape(), layout),
                          vs = attentionHeadsMajorDims(v.getShape(), layout);
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[1] != vs[1] || ks[2] != vs[2] ||
      ks[3] != qs[3])
    return emitOptionalError(loc, "loom.attention: shapes q ", shapeStr(qs),
                             " k ", shapeStr(ks), " v ", shapeStr(vs),
                             " do not fit");
  if (ks[1] == 0 || qs[1] % ks[1] != 0)
    return emitOptionalError(loc, "loom.attention: ", qs[1],
                             " query heads are not a multiple of ", ks[1],
                             " kv heads");
  SmallVector<int64_t, 4> os(q.getShape());
  os[3] = vs[3];
  types.push_back(RankedTensorType::get(os, q.getElementType()));
  types.push_back(attentionLseType(q, layout));
  return success();
}

LogicalResult AttentionOp::verify() {
  if (getWindow() < 0 || (getWindow() > 0 && !getCausal()))
    return emitOpError("window ") << getWindow() << " must be 0, or positive with causal";
  if (getSoftcap().convertToDouble() < 0)
    return emitOpError("softcap must be 0 (off) or positive");
  return success();
}

RankedTensorType loom::attentionLseType(RankedTensorType query, AttentionLayout layout) {
  SmallVector<int64_t, 4> shape(query.getShape());
  if (shape.size() == 4)
    shape = attentionHeadsMajorDims(shape, layout);
  Type f = query.getElementType().isF64() ? Type(Float64Type::get(query.getContext()))
                                           : Type(Float32Type::get(query.getContext()));
  if (!shape.empty())
    shape.pop_back();
  return RankedTensorType::get(shape, f);
}

SmallVector<int64_t, 4> loom::attentionHeadsMajorDims(ArrayRef<int64_t> shape,
                                                      AttentionLayout layout) {
  SmallVector<int64_t, 4> d(shape);
  if (layout == AttentionLayout::tokens_major && d.size() == 4)
    std::swap(d[1], d[2]);
  return d;
}

/// The loss ops' operands: [N, V] logits and [N] targets, or `op`'s error.
static LogicalResult checkLogitsAndTargets(std::optional<Location> loc, StringRef op,
                                           RankedTensorType logits, RankedTensorType targets) {
  if (logits.getRank() == 2 && targets.getRank() == 1 &&
      targets.getDimSize(0) == logits.getDimSize(0))
    return success();
  return emitOptionalError(loc, op, ": logits ", shapeStr(logits.getShape()), " and targets ",
                           shapeStr(targets.getShape()), " must be [N, V] and [N]");
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               CrossEntropyOp::Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  auto logits = tensorOf(adaptor.getLogits());
  if (failed(checkLogitsAndTargets(loc, "loom.cross_entropy", logits,
                                   tensorOf(adaptor.getTargets()))))
    return failure();
  types.push_back(RankedTensorType::get({}, Float32Type::get(logits.getContext())));
  return success();
}

LogicalResult AddRmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                             AddRmsNormOp::Adaptor a,
                                             SmallVectorImpl<Type> &types) {
  types.push_back(a.getLhs().getType()); // the sum
  types.push_back(a.getLhs().getType()); // its norm
  return success();
}

LogicalResult CrossEntropyWithGradOp::inferReturnTypes(MLIRContext *ctx,
                                                      std::optional<Location> loc,
                                                      CrossEntropyWithGradOp::Adaptor a,
                                                      SmallVectorImpl<Type> &types) {
  auto logits = tensorOf(a.getLogits());
  if (failed(checkLogitsAndTargets(loc, "loom.cross_entropy_with_grad", logits,
                                   tensorOf(a.getTargets()))))
    return failure();
  types.push_back(logits);
  types.push_back(RankedTensorType::get({}, Float32Type::get(ctx))); // as cross_entropy's
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ") << shapeStr(in.getShape()) << " ("
           << in.getNumElements() << " elements) to " << shapeStr(out.getShape());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

LogicalResult ExpandOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  auto b = broadcastShapes(in.getShape(), out.getShape());
  if (in.getRank() > out.getRank() || failed(b) ||
      ArrayRef<int64_t>(*b) != out.getShape())
    return emitOpError("cannot broadcast ") << shapeStr(in.getShape())
           << " to " << shapeStr(out.getShape());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            TransposeOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if ((int64_t)perm.size() != in.getRank())
    return emitOptionalError(loc, "loom.transpose: permutation size ",
                             perm.size(), " != rank ", in.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOptionalError(loc, "loom.transpose: not a permutation");
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if ((int64_t)i != p)
      return {};
  return getInput();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        SliceOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), sizes = adaptor.getSizes(),
                    steps = adaptor.getSteps();
  if ((int64_t)starts.size() != in.getRank() || sizes.size() != starts.size() ||
      steps.size() != starts.size())
    return emitOptionalError(loc, "loom.slice: starts, sizes and steps need one "
                             "entry per dim");
  for (int64_t i = 0; i < in.getRank(); ++i) {
    int64_t last = starts[i] + (sizes[i] - 1) * steps[i];
    if (steps[i] == 0 || sizes[i] < 0 ||
        (sizes[i] > 0 && (starts[i] < 0 || starts[i] >= in.getDimSize(i) ||
                          last < 0 || last >= in.getDimSize(i))))
      return emitOptionalError(loc, "loom.slice: dim ", i, " window (start ",
                               starts[i], ", size ", sizes[i], ", step ",
                               steps[i], ") leaves [0, ", in.getDimSize(i), ")");
  }
  types.push_back(RankedTensorType::get(sizes, in.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() != getResult().getType())
    return {};
  for (auto [start, step] : llvm::zip(getStarts(), getSteps()))
    if (start != 0 || step != 1)
      return {};
  return getInput();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         ConcatOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "loom.concat: needs inputs");
  auto first = tensorOf(adaptor.getInputs().front());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "loom.concat: axis ", axis, " out of range");
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto t = tensorOf(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "loom.concat: inputs differ in rank or type");
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != axis && t.getDimSize(i) != first.getDimSize(i))
        return emitOptionalError(loc, "loom.concat: dim ", i, " differs (",
                                 t.getDimSize(i), " vs ", first.getDimSize(i),
                                 ")");
    shape[axis] += t.getDimSize(axis);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        SplitOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto in = tensorOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis(), total = 0;
  if (axis < 0 || axis >= in.getRank())
    return emitOptionalError(loc, "loom.split: axis ", axis, " out of range");
  for (int64_t size : adaptor.getSizes()) {
    SmallVector<int64_t> shape(in.getShape());
    shape[axis] = size;
    total += size;
    types.push_back(RankedTensorType::get(shape, in.getElementType()));
  }
  if (total != in.getDimSize(axis))
    return emitOptionalError(loc, "loom.split: sizes add up to ", total,
                             ", not ", in.getDimSize(axis));
  return success();
}

#define GET_OP_CLASSES
#include "ir/LoomOps.cpp.inc"
