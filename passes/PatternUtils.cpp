//===- PatternUtils.cpp ---------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;

namespace loom {

std::optional<double> splatValue(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  if (dense.isSplat())
    return dense.getSplatValue<APFloat>().convertToDouble();
  std::optional<double> first;
  for (APFloat f : dense.getValues<APFloat>()) {
    double d = f.convertToDouble();
    if (first && *first != d)
      return std::nullopt;
    first = d;
  }
  return first;
}

bool isConstantNear(Value v, double expected, double tol) {
  std::optional<double> s = splatValue(v);
  return s && std::fabs(*s - expected) <= tol * std::max(1.0, std::fabs(expected));
}

bool matchMulByConstant(Value v, double c, Value &x) {
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  return matchEitherOrder(mul, [&](Value a, Value b) {
    if (!isConstantNear(b, c))
      return false;
    x = a;
    return true;
  });
}

bool isSameTypeWideSum(AddOp add) {
  mlir::Type sum = add.getType();
  mlir::Type element = mlir::cast<mlir::RankedTensorType>(sum).getElementType();
  return mlir::isa<mlir::FloatType>(element) && !element.isBF16() &&
         add.getLhs().getType() == sum && add.getRhs().getType() == sum;
}

bool availableAt(mlir::Value v, mlir::Operation *op) {
  if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  mlir::Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

void foldAddsIntoProducers(mlir::func::FuncOp f,
                           llvm::function_ref<mlir::Operation *(mlir::Value)> producerOf,
                           llvm::function_ref<void(mlir::Operation *, mlir::Value)> fold) {
  if (!f.getBody().hasOneBlock())
    return;
  llvm::SmallVector<AddOp> adds;
  f.getBody().front().walk([&](AddOp add) { adds.push_back(add); });
  for (AddOp add : adds) {
    if (!isSameTypeWideSum(add))
      continue;
    for (auto [product, other] : {std::pair(add.getRhs(), add.getLhs()),
                                  std::pair(add.getLhs(), add.getRhs())}) {
      mlir::Operation *op = producerOf(product);
      if (!op || !availableAt(other, op))
        continue;
      fold(op, other);
      add.getResult().replaceAllUsesWith(product);
      add.erase();
      break;
    }
  }
}

mlir::GreedyRewriteConfig rewriteConfig() {
  mlir::GreedyRewriteConfig config;
  config.enableConstantCSE(false);
  return config;
}

RankedTensorType shardType(RankedTensorType t, int64_t d, int64_t n) {
  SmallVector<int64_t> shape(t.getShape());
  shape[d] /= n;
  return RankedTensorType::get(shape, t.getElementType());
}

DenseElementsAttr firstShardOf(ConstantOp c, int64_t d, int64_t n, int64_t blocks) {
  auto t = cast<RankedTensorType>(c.getType());
  RankedTensorType local = shardType(t, d, n);
  auto full = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!full || !t.getElementType().isF32())
    return DenseElementsAttr::get(local, FloatAttr::get(t.getElementType(), 0.0));
  if (full.isSplat())
    return DenseElementsAttr::get(local, full.getSplatValue<Attribute>());
  auto all = llvm::to_vector(full.getValues<float>());
  std::vector<float> values;
  int64_t rows = t.getDimSize(0), cols = t.getRank() == 2 ? t.getDimSize(1) : 1;
  int64_t size = d == 0 ? rows : cols, block = size / blocks;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      int64_t k = d == 0 ? i : j;
      if (k % block < block / n)
        values.push_back(all[size_t(i * cols + j)]);
    }
  return DenseElementsAttr::get(local, ArrayRef<float>(values));
}

} // namespace loom
