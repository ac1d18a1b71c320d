//===- Strided.h - Loops over strided and broadcast operands ----*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Broadcasting, transposes, slices and expands are all the same loop: walk
// the output in row-major order while every operand advances by its own
// strides (0 on a stretched dim, a permuted stride for a transpose, step *
// stride for a slice). StridedLoop first collapses adjacent dims that every
// operand walks contiguously, e.g. [8, 16, 32] + [32] becomes [128, 32] with
// strides {32, 1} and {0, 1}, so the inner loop is as long as possible.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_CPU_STRIDED_H
#define LOOM_RUNTIME_CPU_STRIDED_H

#include "cpu/ThreadPool.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace loom::rt {

using Shape = std::vector<int64_t>;

/// Row-major element strides of a contiguous tensor of `shape`.
inline Shape contiguousStrides(const Shape &shape) {
  Shape s(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = step;
    step *= shape[d];
  }
  return s;
}

/// Element strides that read a contiguous tensor of shape `in` as if it had
/// been broadcast to `out` (right-aligned; 0 on stretched or missing dims).
inline Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape s(out.size(), 0), own = contiguousStrides(in);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] != 1)
      s[lead + d] = own[d];
  return s;
}

/// Flat element offset of row-major position `index` of `shape` in an
/// operand with the given strides.
inline int64_t offsetOf(int64_t index, const Shape &shape, const Shape &strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return off;
}

/// A reduction's view of a contiguous input: the kept dims (they index the
/// output, in order) and the reduced dims (walked per output element), each
/// with its element strides. Adjacent reduced dims are collapsed into one;
/// with no reduced dim the reduction is of one element ({1}, stride 0).
struct ReduceAxes {
  Shape keptShape, keptStrides, redShape, redStrides;
  int64_t count = 1; // elements reduced into each output

  ReduceAxes(const Shape &shape, const std::vector<bool> &reduced) {
    Shape strides = contiguousStrides(shape);
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!reduced[d]) {
        keptShape.push_back(shape[d]);
        keptStrides.push_back(strides[d]);
        continue;
      }
      count *= shape[d];
      if (!redShape.empty() && reduced[d - 1]) { // contiguous with the previous reduced dim
        redShape.back() *= shape[d];
        redStrides.back() = strides[d];
      } else {
        redShape.push_back(shape[d]);
        redStrides.push_back(strides[d]);
      }
    }
    if (redShape.empty()) {
      redShape = {1};
      redStrides = {0};
    }
  }
};

/// An output shape and, per operand, its strides over that shape, collapsed
/// to the fewest dims. The last dim is the inner loop; the others form rows.
class StridedLoop {
public:
  StridedLoop(const Shape &shape, const std::vector<Shape> &strides) {
    strides_.resize(strides.size());
    bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
    for (size_t d = 0; d < shape.size() && !empty; ++d) {
      if (shape[d] == 1)
        continue; // a size-1 dim never moves any operand
      // Dim d folds into the previous kept dim when, for every operand,
      // stepping the previous dim once equals stepping d shape[d] times.
      bool merge = !shape_.empty();
      for (size_t k = 0; merge && k < strides.size(); ++k)
        merge = strides_[k].back() == strides[k][d] * shape[d];
      if (!merge)
        shape_.push_back(shape[d]);
      else
        shape_.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) {
        if (!merge)
          strides_[k].push_back(0);
        strides_[k].back() = strides[k][d];
      }
    }
    if (shape_.empty()) { // no elements, a scalar, or all dims of size 1
      shape_ = {empty ? 0 : 1};
      strides_.assign(strides.size(), Shape{0});
    }
    rowShape_.assign(shape_.begin(), shape_.end() - 1);
    for (const Shape &s : strides_) {
      rowStrides_.emplace_back(s.begin(), s.end() - 1);
      inner_.push_back(s.back());
    }
  }

  int64_t rows() const {
    int64_t n = 1;
    for (int64_t d : rowShape_) n *= d;
    return shape_.back() == 0 ? 0 : n; // an empty tensor has no rows
  }
  int64_t innerSize() const { return shape_.back(); }
  /// The collapsed shape and operand k's strides over it (the CUDA backend
  /// walks these directly instead of rows).
  const Shape &shape() const { return shape_; }
  const Shape &strides(size_t k) const { return strides_[k]; }
  /// Stride of operand k along the inner dim.
  int64_t innerStride(size_t k) const { return inner_[k]; }
  /// Offset of operand k at the first element of `row`.
  int64_t rowOffset(size_t k, int64_t row) const {
    return offsetOf(row, rowShape_, rowStrides_[k]);
  }

  /// Runs body(row) for every row, spread over the pool so that each task
  /// covers at least ~16K elements.
  template <typename Body> void forEachRow(ThreadPool &pool, const Body &body) const {
    int64_t grain = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, innerSize()));
    pool.parallelFor(rows(), grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) body(r);
    });
  }

private:
  Shape shape_, rowShape_, inner_;
  std::vector<Shape> strides_, rowStrides_;
};

} // namespace loom::rt

#endif
