//===- LoomInterfaces.td - loom op interfaces ---------------*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_INTERFACES
#define LOOM_INTERFACES

include "mlir/IR/OpBase.td"

def Loom_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let description = [{
    An op that knows its vector-Jacobian product: given the gradients of its
    results (null where a result does not influence the loss), it builds the
    gradients of its operands (null where an operand gets none, such as
    integer indices or constant tables). The autodiff pass calls this in
    reverse program order; rules live in ir/GradientRules.cpp.
  }];
  let cppNamespace = "::loom";
  let methods = [
    InterfaceMethod<
      "Builds operand gradients at the builder's insertion point.",
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // LOOM_INTERFACES
