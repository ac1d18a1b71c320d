//===- LoomOps.h - loom ops --------------------------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_LOOMOPS_H
#define LOOM_IR_LOOMOPS_H

#include "ir/LoomDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/LoomEnums.h.inc"
#include "ir/LoomInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/LoomAttrs.h.inc"

#define GET_OP_CLASSES
#include "ir/LoomOps.h.inc"

namespace loom {
/// The type of attention's logsumexp for a query of type `query` ([B, Hq,
/// T, D], or [B, T, Hq, D] tokens-major): [B, Hq, T], f64 for f64 queries
/// and f32 for every other float type (the statistics are never stored in
/// bf16).
mlir::RankedTensorType attentionLseType(mlir::RankedTensorType query,
                                        AttentionLayout layout = AttentionLayout::heads_major);

/// `shape` (an attention operand's, rank 4) as heads-major dims [B, H, T,
/// D]: tokens-major swaps dims 1 and 2.
llvm::SmallVector<int64_t, 4> attentionHeadsMajorDims(llvm::ArrayRef<int64_t> shape,
                                                       AttentionLayout layout);

/// An attention output `o` as the forward's readers see it, which the
/// backward's delta = <dy, o> must read: under autocast the rounded copy
/// (the cast pair right after the op), else `o` itself (GradientRules.cpp).
mlir::Value attentionOutputAsRead(mlir::Value o);

/// Module attribute the ONNX importer sets when parameters of the export
/// are held by no constant because the exporter folded them into other
/// initializers (a dictionary: parameter -> that initializer);
/// BuildTrainStep refuses to train such a graph.
inline constexpr llvm::StringLiteral kUnreadParamsAttrName = "loom.unread_params";

/// NumPy broadcast of two static shapes; failure when incompatible.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
} // namespace loom

#endif
