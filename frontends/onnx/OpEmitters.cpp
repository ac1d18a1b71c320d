//===- OpEmitters.cpp - ONNX ops that become loom ops ---------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// One emitter per ONNX op that survives folding. Each maps the op's spec
// onto loom ops one-to-one where possible; fused forms (rms_norm,
// attention, rotary, silu, gelu) are recovered later by passes, so the
// importer stays a faithful translation.
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/NodeAttributes.h"
#include "frontends/onnx/ShapeRules.h"
#include "ir/LoomOps.h"

#include <functional>
#include <map>

using namespace mlir;

namespace loom::onnx_import {
namespace {

using Emitter = std::function<void(GraphImporter &)>;

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Input `k` as an SSA value of element type `elem` (known values are
/// converted before materializing, so `x ** 2` with an integer 2 works).
Value inputAs(GraphImporter &g, size_t k, Type elem) {
  if (const HostTensor *h = g.known(k)) {
    ElemType want = elem.isF32() ? ElemType::Float
                    : elem.isF64() ? ElemType::Double
                    : elem.isBF16() ? ElemType::BFloat16
                    : elem.isInteger(1) ? ElemType::Bool
                    : elem.isInteger(32) ? ElemType::Int32 : ElemType::Int64;
    if (h->type != want)
      return g.convertedConstant(h, want);
  }
  return g.input(k);
}

/// The element type the node computes in: that of its first input that is
/// not a known value, else of input 0.
Type computeType(GraphImporter &g, size_t first, size_t count) {
  for (size_t k = first; k < first + count; ++k)
    if (g.hasInput(k) && !g.known(k))
      return typeOf(g.input(k)).getElementType();
  return typeOf(g.input(first)).getElementType();
}

std::vector<int64_t> knownInts(GraphImporter &g, size_t k, const char *what) {
  const HostTensor *h = g.known(k);
  if (!h)
    g.fail(std::string(what) + " is not a constant after specializing shapes "
           "(pass --batch and --seq for dynamic models)");
  return h->toInts();
}

/// A known float scalar as a constant of element type `elem`.
Value inputAsConst(GraphImporter &g, const HostTensor &t, Type elem) {
  ElemType want = elem.isF64() ? ElemType::Double
                  : elem.isBF16() ? ElemType::BFloat16 : ElemType::Float;
  return g.constant(t.castTo(want));
}

Emitter binary(StringRef opName) {
  return [opName](GraphImporter &g) {
    Type elem = computeType(g, 0, 2);
    Value lhs = inputAs(g, 0, elem), rhs = inputAs(g, 1, elem);
    g.setOutput(0, g.create(opName, {lhs, rhs})->getResult(0));
  };
}

Emitter unary(StringRef opName) {
  return [opName](GraphImporter &g) {
    g.setOutput(0, g.create(opName, {g.input(0)})->getResult(0));
  };
}

Value reshapeTo(GraphImporter &g, Value v, ArrayRef<int64_t> shape) {
  auto t = typeOf(v);
  if (t.getShape() == shape)
    return v;
  return g.createTyped(ReshapeOp::getOperationName(), v,
                       RankedTensorType::get(shape, t.getElementType()));
}

void emitMatMul(GraphImporter &g) {
  Value a = g.input(0), b = g.input(1);
  if (typeOf(a).getRank() < 2 || typeOf(b).getRank() < 2)
    g.fail("MatMul with a rank-1 operand is not supported");
  g.setOutput(0, g.create(MatmulOp::getOperationName(), {a, b})->getResult(0));
}

void emitGemm(GraphImporter &g) {
  Value a = g.input(0), b = g.input(1);
  const onnx::NodeProto &n = g.node();
  SmallVector<NamedAttribute> attrs = {
      g.b.getNamedAttr("transpose_lhs", g.b.getBoolAttr(attrInt(n, "transA", 0))),
      g.b.getNamedAttr("transpose_rhs", g.b.getBoolAttr(attrInt(n, "transB", 0)))};
  Value y = g.create(MatmulOp::getOperationName(), {a, b}, attrs)->getResult(0);
  Type elem = typeOf(y).getElementType();
  auto scalar = [&](double v) {
    HostTensor t = HostTensor::zeros(ElemType::Float, {});
    t.f[0] = v;
    return inputAsConst(g, t, elem);
  };
  float alpha = attrFloat(n, "alpha", 1.0f), beta = attrFloat(n, "beta", 1.0f);
  if (alpha != 1.0f)
    y = g.create(MulOp::getOperationName(), {y, scalar(alpha)})->getResult(0);
  if (g.hasInput(2)) {
    Value c = inputAs(g, 2, elem);
    if (beta != 1.0f)
      c = g.create(MulOp::getOperationName(), {c, scalar(beta)})->getResult(0);
    y = g.create(AddOp::getOperationName(), {y, c})->getResult(0);
  } else {
    // torch's optimizer drops addmm's bias when its initial value is zero;
    // it is still a parameter, so it comes back (as zeros) for training.
    for (const std::string &p : g.torchInfo.paramArgs(n))
      if (p.size() > 5 && p.compare(p.size() - 5, 5, ".bias") == 0) {
        Value bias = g.zeroParam(p, {typeOf(y).getShape().back()}, elem);
        y = g.create(AddOp::getOperationName(), {y, bias})->getResult(0);
      }
  }
  g.setOutput(0, y);
}

void emitSoftmax(GraphImporter &g) {
  Value x = g.input(0);
  int64_t axis = attrInt(g.node(), "axis", -1);
  if (!normalizeAxis(axis, typeOf(x).getRank()))
    g.fail("softmax axis out of range");
  g.setOutput(0, g.create(SoftmaxOp::getOperationName(), {x},
                          {g.b.getNamedAttr("axis", g.b.getI64IntegerAttr(axis))})
                     ->getResult(0));
}

Emitter reduce(ReduceKind kind) {
  return [kind](GraphImporter &g) {
    Value x = g.input(0);
    int64_t rank = typeOf(x).getRank();
    std::vector<int64_t> axes = g.hasInput(1) ? knownInts(g, 1, "reduction axes")
                                              : attrInts(g.node(), "axes");
    if (axes.empty()) {
      if (attrInt(g.node(), "noop_with_empty_axes", 0)) {
        g.setOutput(0, x);
        return;
      }
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    for (int64_t &a : axes)
      if (!normalizeAxis(a, rank))
        g.fail("reduction axis out of range");
    std::sort(axes.begin(), axes.end());
    bool keep = attrInt(g.node(), "keepdims", 1);
    g.setOutput(0, g.create(ReduceOp::getOperationName(), {x},
                            {g.b.getNamedAttr("kind", ReduceKindAttr::get(g.b.getContext(), kind)),
                             g.b.getNamedAttr("axes", g.b.getDenseI64ArrayAttr(axes)),
                             g.b.getNamedAttr("keepdim", g.b.getBoolAttr(keep))})
                       ->getResult(0));
  };
}

void emitLayerNorm(GraphImporter &g) {
  Value x = g.input(0), w = g.input(1);
  int64_t axis = attrInt(g.node(), "axis", -1);
  if (!normalizeAxis(axis, typeOf(x).getRank()) || axis != typeOf(x).getRank() - 1)
    g.fail("LayerNormalization over more than the last dim is not supported");
  for (int k = 1; k < g.node().output_size(); ++k)
    if (!g.node().output(k).empty())
      g.fail("LayerNormalization's mean/inv-std outputs are not supported");
  SmallVector<Value> operands = {x, w};
  bool hasBias = g.hasInput(2);
  if (hasBias)
    operands.push_back(g.input(2));
  auto eps = g.b.getF64FloatAttr(attrFloat(g.node(), "epsilon", 1e-5f));
  g.setOutput(0, g.create(LayerNormOp::getOperationName(), operands,
                          {g.b.getNamedAttr("epsilon", eps)})
                     ->getResult(0));
}

void emitGather(GraphImporter &g) {
  Value data = g.input(0);
  int64_t axis = attrInt(g.node(), "axis", 0);
  if (axis != 0 || typeOf(data).getRank() != 2)
    g.fail("Gather is supported as an embedding lookup (axis 0 of a 2-D table)");
  Value ids = g.input(1);
  g.setOutput(0, g.create(EmbeddingOp::getOperationName(), {data, ids})->getResult(0));
}

void emitTranspose(GraphImporter &g) {
  Value x = g.input(0);
  std::vector<int64_t> perm = attrInts(g.node(), "perm");
  if (perm.empty())
    for (int64_t d = typeOf(x).getRank() - 1; d >= 0; --d) perm.push_back(d);
  g.setOutput(0, g.create(TransposeOp::getOperationName(), {x},
                          {g.b.getNamedAttr("permutation", g.b.getDenseI64ArrayAttr(perm))})
                     ->getResult(0));
}

void emitReshape(GraphImporter &g) {
  Value x = g.input(0);
  Shape out;
  std::string err = reshapeShape(Shape(typeOf(x).getShape()), knownInts(g, 1, "Reshape's shape"),
                                 attrInt(g.node(), "allowzero", 0), out);
  if (!err.empty())
    g.fail(err);
  g.setOutput(0, reshapeTo(g, x, out));
}

void emitUnsqueezeOrSqueeze(GraphImporter &g, bool unsqueeze) {
  Value x = g.input(0);
  std::vector<int64_t> axes = g.hasInput(1) ? knownInts(g, 1, "axes")
                                            : attrInts(g.node(), "axes");
  Shape out, in(typeOf(x).getShape());
  std::string err = unsqueeze ? unsqueezeShape(in, axes, out) : squeezeShape(in, axes, out);
  if (!err.empty())
    g.fail(err);
  g.setOutput(0, reshapeTo(g, x, out));
}

void emitExpand(GraphImporter &g) {
  Value x = g.input(0);
  Shape out;
  std::string err = broadcastShape(Shape(typeOf(x).getShape()),
                                   knownInts(g, 1, "Expand's shape"), out);
  if (!err.empty())
    g.fail(err);
  if (ArrayRef<int64_t>(out) == typeOf(x).getShape()) {
    g.setOutput(0, x);
    return;
  }
  g.setOutput(0, g.createTyped(ExpandOp::getOperationName(), x,
                               RankedTensorType::get(out, typeOf(x).getElementType())));
}

Value slice(GraphImporter &g, Value x, const std::vector<SliceDim> &dims) {
  SmallVector<int64_t> starts, sizes, steps;
  for (const SliceDim &d : dims) {
    starts.push_back(d.count ? d.start : 0);
    sizes.push_back(d.count);
    steps.push_back(d.step);
  }
  return g.create(SliceOp::getOperationName(), {x},
                  {g.b.getNamedAttr("starts", g.b.getDenseI64ArrayAttr(starts)),
                   g.b.getNamedAttr("sizes", g.b.getDenseI64ArrayAttr(sizes)),
                   g.b.getNamedAttr("steps", g.b.getDenseI64ArrayAttr(steps))})
      ->getResult(0);
}

void emitSlice(GraphImporter &g) {
  Value x = g.input(0);
  std::vector<SliceDim> dims;
  std::string err = sliceDims(
      Shape(typeOf(x).getShape()), knownInts(g, 1, "Slice starts"),
      knownInts(g, 2, "Slice ends"),
      g.hasInput(3) ? knownInts(g, 3, "Slice axes") : std::vector<int64_t>{},
      g.hasInput(4) ? knownInts(g, 4, "Slice steps") : std::vector<int64_t>{}, dims);
  if (!err.empty())
    g.fail(err);
  g.setOutput(0, slice(g, x, dims));
}

void emitConcat(GraphImporter &g) {
  Type elem = computeType(g, 0, g.node().input_size());
  SmallVector<Value> inputs;
  for (int k = 0; k < g.node().input_size(); ++k)
    inputs.push_back(inputAs(g, k, elem));
  int64_t axis = attrInt(g.node(), "axis", 0);
  if (!normalizeAxis(axis, typeOf(inputs[0]).getRank()))
    g.fail("concat axis out of range");
  g.setOutput(0, g.create(ConcatOp::getOperationName(), inputs,
                          {g.b.getNamedAttr("axis", g.b.getI64IntegerAttr(axis))})
                     ->getResult(0));
}

/// Sizes for Split/SplitToSequence: explicit, or `parts` near-equal pieces.
std::vector<int64_t> splitSizes(GraphImporter &g, Value x, int64_t axis,
                                size_t splitInput, int64_t parts) {
  std::vector<int64_t> sizes;
  if (g.hasInput(splitInput)) {
    sizes = knownInts(g, splitInput, "split sizes");
    if (sizes.size() == 1 && parts != 1) { // scalar split: chunks of that size
      int64_t chunk = sizes[0], dim = typeOf(x).getDimSize(axis);
      sizes.clear();
      for (int64_t at = 0; at < dim; at += chunk) sizes.push_back(std::min(chunk, dim - at));
    }
  } else {
    sizes = attrInts(g.node(), "split");
  }
  if (sizes.empty()) {
    int64_t dim = typeOf(x).getDimSize(axis), each = (dim + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p) sizes.push_back(std::min(each, dim - p * each));
  }
  return sizes;
}

std::vector<Value> split(GraphImporter &g, Value x, int64_t axis,
                         const std::vector<int64_t> &sizes) {
  Operation *op = g.create(SplitOp::getOperationName(), {x},
                           {g.b.getNamedAttr("axis", g.b.getI64IntegerAttr(axis)),
                            g.b.getNamedAttr("sizes", g.b.getDenseI64ArrayAttr(sizes))},
                           sizes.size());
  return std::vector<Value>(op->result_begin(), op->result_end());
}

void emitSplit(GraphImporter &g) {
  Value x = g.input(0);
  int64_t axis = attrInt(g.node(), "axis", 0);
  if (!normalizeAxis(axis, typeOf(x).getRank()))
    g.fail("split axis out of range");
  auto parts = split(g, x, axis, splitSizes(g, x, axis, 1, g.node().output_size()));
  for (size_t k = 0; k < parts.size(); ++k) g.setOutput(k, parts[k]);
}

void emitSplitToSequence(GraphImporter &g) {
  Value x = g.input(0);
  int64_t axis = attrInt(g.node(), "axis", 0);
  if (!normalizeAxis(axis, typeOf(x).getRank()))
    g.fail("split axis out of range");
  bool explicitSplit = g.hasInput(1);
  std::vector<int64_t> sizes =
      splitSizes(g, x, axis, 1, explicitSplit ? 0 : typeOf(x).getDimSize(axis));
  std::vector<Value> parts = split(g, x, axis, sizes);
  if (!explicitSplit && !attrInt(g.node(), "keepdims", 1))
    for (Value &p : parts) {
      Shape s(typeOf(p).getShape());
      s.erase(s.begin() + axis);
      p = reshapeTo(g, p, s);
    }
  g.setSequenceOutput(0, parts);
}

void emitSequenceAt(GraphImporter &g) {
  const std::vector<Value> &seq = g.sequenceInput(0);
  std::vector<int64_t> position = knownInts(g, 1, "SequenceAt position");
  if (position.size() != 1)
    g.fail("SequenceAt position must hold one value");
  int64_t pos = position[0];
  if (pos < 0) pos += int64_t(seq.size());
  if (pos < 0 || pos >= int64_t(seq.size()))
    g.fail("SequenceAt position out of range");
  g.setOutput(0, seq[pos]);
}

void emitCastTo(GraphImporter &g, Type elem) {
  Value x = g.input(0);
  if (typeOf(x).getElementType() == elem) {
    g.setOutput(0, x);
    return;
  }
  g.setOutput(0, g.createTyped(CastOp::getOperationName(), x,
                               RankedTensorType::get(typeOf(x).getShape(), elem)));
}

/// Gelu (opset 20): `approximate` is "none" (erf) or "tanh".
void emitGelu(GraphImporter &g) {
  std::string approx = "none";
  if (const auto *a = findAttr(g.node(), "approximate"))
    approx = a->s();
  GeluApproximation kind;
  if (approx == "none")
    kind = GeluApproximation::erf;
  else if (approx == "tanh")
    kind = GeluApproximation::tanh;
  else
    g.fail("Gelu approximate='" + approx + "' is not 'none' or 'tanh'");
  g.setOutput(0, g.create(GeluOp::getOperationName(), {g.input(0)},
                          {g.b.getNamedAttr("approximation",
                                            GeluApproximationAttr::get(g.b.getContext(), kind))})
                     ->getResult(0));
}

/// Max, Min (one or more inputs): a single input is itself; more combine
/// left to right, each pair with broadcasting.
Emitter variadic(StringRef opName) {
  return [opName](GraphImporter &g) {
    int n = g.node().input_size();
    Type elem = computeType(g, 0, size_t(n));
    Value acc = inputAs(g, 0, elem);
    for (int k = 1; k < n; ++k)
      acc = g.create(opName, {acc, inputAs(g, size_t(k), elem)})->getResult(0);
    g.setOutput(0, acc);
  };
}

/// Tile with known repeats: each repeated dim d becomes [r, n] by an
/// expand of [1, n], then r * n by a reshape (out[i] = x[i mod n]).
void emitTile(GraphImporter &g) {
  Value x = g.input(0);
  std::vector<int64_t> repeats = knownInts(g, 1, "Tile repeats");
  Shape shape(typeOf(x).getShape());
  if (repeats.size() != shape.size())
    g.fail("Tile repeats has " + std::to_string(repeats.size()) + " entries for rank " +
           std::to_string(shape.size()));
  for (size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 1)
      g.fail("Tile repeat " + std::to_string(repeats[d]) + " is not positive");
    if (repeats[d] == 1)
      continue;
    Shape split = shape;
    split.insert(split.begin() + d, 1);
    Value v = reshapeTo(g, x, split);
    split[d] = repeats[d];
    v = g.createTyped(ExpandOp::getOperationName(), v,
                      RankedTensorType::get(split, typeOf(x).getElementType()));
    shape[d] *= repeats[d];
    x = reshapeTo(g, v, shape);
  }
  g.setOutput(0, x);
}

/// GatherND (batch_dims 0) with known indices, as exporters emit for
/// indexing by a constant list (Falcon's fused_qkv[..., [-2], :] after a
/// transpose): each index tuple picks a slice of the data, and the slices
/// are stacked in the indices' order.
void emitGatherND(GraphImporter &g) {
  Value data = g.input(0);
  if (attrInt(g.node(), "batch_dims", 0) != 0)
    g.fail("GatherND with batch_dims != 0 is not supported");
  const HostTensor *h = g.known(1);
  if (!h)
    g.fail("GatherND indices are not a constant after specializing shapes");
  Shape ds(typeOf(data).getShape());
  if (h->shape.empty() || h->shape.back() > int64_t(ds.size()))
    g.fail("GatherND index depth exceeds data rank");
  int64_t depth = h->shape.back(), tuples = h->numElements() / std::max<int64_t>(depth, 1);
  std::vector<int64_t> ids = h->toInts();
  Shape rest(ds.begin() + depth, ds.end()), piece = rest;
  piece.insert(piece.begin(), 1);
  SmallVector<Value> parts;
  for (int64_t t = 0; t < tuples; ++t) {
    std::vector<SliceDim> dims;
    for (int64_t d = 0; d < int64_t(ds.size()); ++d) {
      SliceDim sd{0, ds[d], 1};
      if (d < depth) {
        int64_t id = ids[t * depth + d];
        if (id < 0) id += ds[d];
        if (id < 0 || id >= ds[d])
          g.fail("GatherND index " + std::to_string(ids[t * depth + d]) +
                 " out of range for dim " + std::to_string(ds[d]));
        sd = SliceDim{id, 1, 1};
      }
      dims.push_back(sd);
    }
    parts.push_back(reshapeTo(g, slice(g, data, dims), piece));
  }
  Value stacked = parts.size() == 1
                      ? parts[0]
                      : g.create(ConcatOp::getOperationName(), parts,
                                 {g.b.getNamedAttr("axis", g.b.getI64IntegerAttr(0))})
                            ->getResult(0);
  Shape out(h->shape.begin(), h->shape.end() - 1);
  out.insert(out.end(), rest.begin(), rest.end());
  g.setOutput(0, reshapeTo(g, stacked, out));
}

void emitWhere(GraphImporter &g) {
  Type elem = computeType(g, 1, 2);
  Value c = g.input(0), a = inputAs(g, 1, elem), b = inputAs(g, 2, elem);
  g.setOutput(0, g.create(WhereOp::getOperationName(), {c, a, b})->getResult(0));
}

const std::map<std::string, Emitter> &emitters() {
  static const std::map<std::string, Emitter> table = {
      {"MatMul", emitMatMul},
      {"Gemm", emitGemm},
      {"Add", binary(AddOp::getOperationName())},
      {"Sub", binary(SubOp::getOperationName())},
      {"Mul", binary(MulOp::getOperationName())},
      {"Div", binary(DivOp::getOperationName())},
      {"Pow", binary(PowOp::getOperationName())},
      {"Max", variadic(MaxOp::getOperationName())},
      {"Min", variadic(MinOp::getOperationName())},
      {"Where", emitWhere},
      {"Neg", unary(NegOp::getOperationName())},
      {"Sqrt", unary(SqrtOp::getOperationName())},
      {"Reciprocal", unary(ReciprocalOp::getOperationName())},
      {"Exp", unary(ExpOp::getOperationName())},
      {"Log", unary(LogOp::getOperationName())},
      {"Tanh", unary(TanhOp::getOperationName())},
      {"Sigmoid", unary(SigmoidOp::getOperationName())},
      {"Cos", unary(CosOp::getOperationName())},
      {"Sin", unary(SinOp::getOperationName())},
      {"Relu", unary(ReluOp::getOperationName())},
      {"Erf", unary(ErfOp::getOperationName())},
      {"Softplus", unary(SoftplusOp::getOperationName())},
      {"Gelu", emitGelu},
      {"Softmax", emitSoftmax},
      {"ReduceMean", reduce(ReduceKind::mean)},
      {"ReduceSum", reduce(ReduceKind::sum)},
      {"ReduceMax", reduce(ReduceKind::max)},
      {"LayerNormalization", emitLayerNorm},
      {"Gather", emitGather},
      {"Transpose", emitTranspose},
      {"Reshape", emitReshape},
      {"Unsqueeze", [](GraphImporter &g) { emitUnsqueezeOrSqueeze(g, true); }},
      {"Squeeze", [](GraphImporter &g) { emitUnsqueezeOrSqueeze(g, false); }},
      {"Expand", emitExpand},
      {"Tile", emitTile},
      {"GatherND", emitGatherND},
      {"Slice", emitSlice},
      {"Concat", emitConcat},
      {"Split", emitSplit},
      {"SplitToSequence", emitSplitToSequence},
      {"SequenceAt", emitSequenceAt},
      {"Identity", [](GraphImporter &g) { g.setOutput(0, g.input(0)); }},
      {"Cast", [](GraphImporter &g) {
         Type elem = g.elementType(int32_t(attrInt(g.node(), "to", 1)));
         if (!elem)
           g.fail("Cast to an unsupported element type");
         emitCastTo(g, elem);
       }},
      {"CastLike", [](GraphImporter &g) {
         emitCastTo(g, typeOf(g.input(1)).getElementType());
       }},
  };
  return table;
}

} // namespace

std::vector<std::string> emitterOps() {
  std::vector<std::string> ops;
  for (const auto &[op, emitter] : emitters()) ops.push_back(op);
  return ops;
}

bool emitNode(GraphImporter &g, const onnx::NodeProto &node) {
  auto it = emitters().find(node.op_type());
  if (it == emitters().end())
    return false;
  it->second(g);
  return true;
}

} // namespace loom::onnx_import
