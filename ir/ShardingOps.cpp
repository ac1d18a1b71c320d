//===- ShardingOps.cpp - Mesh, placement and collective verification ------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ir/Sharding.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;

namespace loom {

MeshAttr lookupMesh(Operation *op) {
  for (Operation *p = op; p; p = p->getParentOp())
    if (auto m = dyn_cast<ModuleOp>(p))
      if (auto mesh = m->getAttrOfType<MeshAttr>(kMeshAttrName))
        return mesh;
  return {};
}

ArrayAttr meshAxes(MLIRContext *ctx, ArrayRef<MeshAxis> axes) {
  SmallVector<Attribute> attrs;
  for (MeshAxis a : axes) attrs.push_back(MeshAxisAttr::get(ctx, a));
  return ArrayAttr::get(ctx, attrs);
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t pp,
                               int64_t dpReplicate, int64_t dpShard, int64_t cp, int64_t tp) {
  if (pp < 1 || dpReplicate < 1 || dpShard < 1 || cp < 1 || tp < 1)
    return emitError() << "every mesh axis needs a size of at least 1";
  return success();
}

int64_t MeshAttr::size(MeshAxis axis) const {
  switch (axis) {
  case MeshAxis::pp: return getPp();
  case MeshAxis::dp_replicate: return getDpReplicate();
  case MeshAxis::dp_shard: return getDpShard();
  case MeshAxis::cp: return getCp();
  case MeshAxis::tp: return getTp();
  }
  return 1;
}

int64_t MeshAttr::groupSize(ArrayAttr axes) const {
  int64_t n = 1;
  for (auto a : axes.getAsRange<MeshAxisAttr>()) n *= size(a.getValue());
  return n;
}

Attribute PlacementAttr::parse(AsmParser &parser, Type) {
  std::string axisName, kindName;
  if (parser.parseLess() || parser.parseKeywordOrString(&axisName) || parser.parseComma() ||
      parser.parseKeywordOrString(&kindName))
    return {};
  auto axis = symbolizeMeshAxis(axisName);
  auto kind = symbolizePlacementKind(kindName);
  if (!axis)
    return parser.emitError(parser.getNameLoc(), "unknown mesh axis '") << axisName << "'", Attribute();
  if (!kind)
    return parser.emitError(parser.getNameLoc(), "unknown placement '") << kindName << "'", Attribute();
  int64_t dim = -1, blocks = 1;
  ReduceKind reduction = ReduceKind::sum;
  if (*kind == PlacementKind::shard) {
    if (parser.parseLParen() || parser.parseInteger(dim))
      return {};
    if (succeeded(parser.parseOptionalComma()) &&
        (parser.parseKeyword("blocks") || parser.parseEqual() || parser.parseInteger(blocks)))
      return {};
    if (parser.parseRParen())
      return {};
  } else if (*kind == PlacementKind::partial) {
    std::string r;
    if (parser.parseLParen() || parser.parseKeywordOrString(&r) || parser.parseRParen())
      return {};
    auto rk = symbolizeReduceKind(r);
    if (!rk)
      return parser.emitError(parser.getNameLoc(), "unknown reduction '") << r << "'", Attribute();
    reduction = *rk;
  }
  if (parser.parseGreater())
    return {};
  return PlacementAttr::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                                   parser.getContext(), *axis, *kind, dim, reduction, blocks);
}

void PlacementAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyMeshAxis(getAxis()) << ", " << stringifyPlacementKind(getKind());
  if (getKind() == PlacementKind::shard && getBlocks() != 1)
    printer << "(" << getDim() << ", blocks = " << getBlocks() << ")";
  else if (getKind() == PlacementKind::shard)
    printer << "(" << getDim() << ")";
  else if (getKind() == PlacementKind::partial)
    printer << "(" << stringifyReduceKind(getReduction()) << ")";
  printer << ">";
}

LogicalResult PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError, MeshAxis,
                                    PlacementKind kind, int64_t dim, ReduceKind reduction,
                                    int64_t blocks) {
  if (blocks < 1 || (blocks > 1 && kind != PlacementKind::shard))
    return emitError() << "blocks must be 1, or more for a shard placement";
  if (kind == PlacementKind::shard && dim < 0)
    return emitError() << "shard placement needs a non-negative dim";
  if (kind != PlacementKind::shard && dim != -1)
    return emitError() << "only a shard placement has a dim";
  if (kind == PlacementKind::partial && reduction == ReduceKind::max)
    return emitError() << "partial placements are sums or means";
  return success();
}

PlacementAttr ShardingAttr::along(MeshAxis axis) const {
  for (PlacementAttr p : getPlacements())
    if (p.getAxis() == axis)
      return p;
  return {};
}

LogicalResult verifyMeshAxes(Operation *op, ArrayAttr axes) {
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  uint32_t seen = 0;
  for (auto a : axes.getAsRange<MeshAxisAttr>()) {
    uint32_t bit = 1u << uint32_t(a.getValue());
    if (seen & bit)
      return op->emitOpError("names mesh axis ") << stringifyMeshAxis(a.getValue()) << " twice";
    seen |= bit;
  }
  return success();
}

namespace {

LogicalResult verifyReduction(Operation *op, ReduceKind kind) {
  if (kind == ReduceKind::max)
    return op->emitOpError("reduces by sum or mean, not max");
  return success();
}

/// `big` is `small` with `dim` multiplied by the group size (known only
/// when the module has a mesh; otherwise `dim` must be a multiple).
LogicalResult verifyGathered(Operation *op, ArrayAttr axes, int64_t dim, RankedTensorType small,
                             RankedTensorType big) {
  if (small.getElementType() != big.getElementType() || small.getRank() != big.getRank())
    return op->emitOpError("input and result differ in element type or rank");
  if (dim < 0 || dim >= small.getRank())
    return op->emitOpError("dim ") << dim << " is out of range for rank " << small.getRank();
  for (int64_t d = 0; d < small.getRank(); ++d) {
    if (d == dim)
      continue;
    if (small.getDimSize(d) != big.getDimSize(d))
      return op->emitOpError("input and result differ in dim ") << d << ", which is not `dim`";
  }
  int64_t factor = 0;
  if (MeshAttr mesh = lookupMesh(op))
    factor = mesh.groupSize(axes);
  if (factor ? big.getDimSize(dim) != small.getDimSize(dim) * factor
             : big.getDimSize(dim) % small.getDimSize(dim) != 0)
    return op->emitOpError("dim ") << dim << " must grow from " << small.getDimSize(dim)
                                   << " by the group size" << (factor ? " " : "")
                                   << (factor ? std::to_string(factor) : std::string())
                                   << ", not to " << big.getDimSize(dim);
  return success();
}

} // namespace

LogicalResult AllReduceOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &dx) {
  Value dy = dys[0];
  if (getKind() == ReduceKind::mean) {
    MeshAttr mesh = lookupMesh(*this);
    if (!mesh)
      return emitOpError("needs a loom.mesh to differentiate a mean");
    auto t = cast<RankedTensorType>(dy.getType());
    auto scalarType = RankedTensorType::get({}, t.getElementType());
    Value n = b.create<ConstantOp>(
        getLoc(),
        DenseElementsAttr::get(scalarType,
                               b.getFloatAttr(t.getElementType(), 1.0 / double(mesh.groupSize(getAxes())))),
        StringAttr(), ParamAttr());
    dy = b.create<MulOp>(getLoc(), dy, n);
  }
  dx.assign({dy});
  return success();
}

LogicalResult ReduceScatterOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                              SmallVectorImpl<Value> &dx) {
  Value g = b.create<AllGatherOp>(getLoc(), getInput().getType(), dys[0], getAxes(),
                                  b.getI64IntegerAttr(int64_t(getDim())));
  if (getKind() == ReduceKind::mean) {
    MeshAttr mesh = lookupMesh(*this);
    if (!mesh)
      return emitOpError("needs a loom.mesh to differentiate a mean");
    auto t = cast<RankedTensorType>(g.getType());
    auto scalarType = RankedTensorType::get({}, t.getElementType());
    Value n = b.create<ConstantOp>(
        getLoc(),
        DenseElementsAttr::get(scalarType, b.getFloatAttr(t.getElementType(),
                                                          1.0 / double(mesh.groupSize(getAxes())))),
        StringAttr(), ParamAttr());
    g = b.create<MulOp>(getLoc(), g, n);
  }
  dx.assign({g});
  return success();
}

LogicalResult CopyToParallelOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                               SmallVectorImpl<Value> &dx) {
  dx.assign({b.create<AllReduceOp>(getLoc(), dys[0].getType(), dys[0], getAxes(), ReduceKind::sum)
                 .getResult()});
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyMeshAxes(*this, getAxes())))
    return failure();
  return verifyReduction(*this, getKind());
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyMeshAxes(*this, getAxes())))
    return failure();
  return verifyGathered(*this, getAxes(), getDim(), getInput().getType(), getResult().getType());
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyMeshAxes(*this, getAxes())) || failed(verifyReduction(*this, getKind())))
    return failure();
  return verifyGathered(*this, getAxes(), getDim(), getResult().getType(), getInput().getType());
}

} // namespace loom
