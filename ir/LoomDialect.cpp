//===- LoomDialect.cpp - The loom dialect ---------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;

#include "ir/LoomDialect.cpp.inc"
#include "ir/LoomEnums.cpp.inc"
#include "ir/LoomInterfaces.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/LoomAttrs.cpp.inc"

void LoomDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/LoomAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/LoomOps.cpp.inc"
      >();
}

Attribute ParamAttr::parse(AsmParser &parser, Type) {
  std::string name;
  bool transposed = false;
  if (parser.parseLess() || parser.parseString(&name))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("transposed"))
      return {};
    transposed = true;
  }
  if (parser.parseGreater())
    return {};
  return ParamAttr::get(parser.getContext(), name, transposed);
}

void ParamAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printString(getName());
  if (getTransposed())
    printer << ", transposed";
  printer << ">";
}

Operation *LoomDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements, StringAttr(), ParamAttr());
}
