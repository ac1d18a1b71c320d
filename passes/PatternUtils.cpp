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

mlir::GreedyRewriteConfig rewriteConfig() {
  mlir::GreedyRewriteConfig config;
  config.enableConstantCSE(false);
  return config;
}

} // namespace loom
