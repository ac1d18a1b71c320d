//===- ShapeRules.h - ONNX shape arithmetic shared by folding and import --===//
//
// Part of loom, under the Apache License v2.0.
//
// The ONNX spec's rules for the ops whose output shape comes from an
// attribute or a constant input. The constant folder and the importer both
// use them, so a folded value and an imported op agree by construction.
// Each returns an empty string on success, else a one-line reason.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_SHAPERULES_H
#define LOOM_FRONTENDS_ONNX_SHAPERULES_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::onnx_import {

using Shape = std::vector<int64_t>;

/// Normalizes a possibly negative axis for `rank`; false when out of range.
bool normalizeAxis(int64_t &axis, int64_t rank);

/// Reshape: `target` may hold one -1 (inferred) and 0 (copy the input dim,
/// unless allowzero).
std::string reshapeShape(const Shape &in, const std::vector<int64_t> &target,
                         bool allowZero, Shape &out);
std::string unsqueezeShape(const Shape &in, std::vector<int64_t> axes, Shape &out);
/// Squeeze with no axes removes every 1.
std::string squeezeShape(const Shape &in, std::vector<int64_t> axes, Shape &out);
/// NumPy broadcast of two shapes (Expand and elementwise ops).
std::string broadcastShape(const Shape &a, const Shape &b, Shape &out);

/// One dim of an ONNX Slice after clamping: the first index, the count and
/// the step.
struct SliceDim {
  int64_t start = 0, count = 0, step = 1;
};
/// Resolves Slice's starts/ends/axes/steps inputs against `in` into one
/// SliceDim per dim (untouched dims take the whole range).
std::string sliceDims(const Shape &in, const std::vector<int64_t> &starts,
                      const std::vector<int64_t> &ends,
                      const std::vector<int64_t> &axes,
                      const std::vector<int64_t> &steps,
                      std::vector<SliceDim> &out);

/// Checked product of dims: false on a negative dim or int64 overflow.
bool checkedNumElements(const Shape &shape, int64_t &n);

std::string shapeToString(const Shape &shape);

} // namespace loom::onnx_import

#endif
