//===- Sharding.h - Helpers for the SPMD level of the IR --------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_SHARDING_H
#define LOOM_IR_SHARDING_H

#include "ir/LoomOps.h"

namespace loom {

/// Name of the module attribute holding the #loom.mesh.
inline constexpr llvm::StringLiteral kMeshAttrName = "loom.mesh";
/// Name of the argument/result attribute holding a #loom.sharding.
inline constexpr llvm::StringLiteral kShardingAttrName = "loom.sharding";

/// The mesh of the module enclosing `op`, or null when it has none.
MeshAttr lookupMesh(mlir::Operation *op);

/// [#loom.mesh_axis<a>, ...] for building collectives.
mlir::ArrayAttr meshAxes(mlir::MLIRContext *ctx, llvm::ArrayRef<MeshAxis> axes);

/// At least one axis, none twice; an error on `op` otherwise.
mlir::LogicalResult verifyMeshAxes(mlir::Operation *op, mlir::ArrayAttr axes);

/// `old` (or a mesh of ones) with `axis` set to `size`.
MeshAttr meshWithAxis(mlir::MLIRContext *ctx, MeshAttr old, MeshAxis axis, int64_t size);

} // namespace loom

#endif
