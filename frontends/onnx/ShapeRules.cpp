//===- ShapeRules.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ShapeRules.h"

#include <algorithm>
#include <limits>

namespace loom::onnx_import {

bool normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < 0)
    axis += rank;
  return axis >= 0 && axis < rank;
}

std::string shapeToString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

bool checkedNumElements(const Shape &shape, int64_t &n) {
  n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return false;
    n *= d;
  }
  return true;
}

std::string reshapeShape(const Shape &in, const std::vector<int64_t> &target,
                         bool allowZero, Shape &out) {
  int64_t total;
  if (!checkedNumElements(in, total))
    return "input dims overflow";
  out.clear();
  int64_t known = 1, inferAt = -1;
  for (size_t k = 0; k < target.size(); ++k) {
    int64_t d = target[k];
    if (d == 0 && !allowZero) {
      if (k >= in.size())
        return "shape entry 0 at position " + std::to_string(k) +
               " has no input dim to copy";
      d = in[k];
    }
    if (d == -1) {
      if (inferAt >= 0)
        return "shape has more than one -1";
      inferAt = int64_t(k);
      out.push_back(1);
      continue;
    }
    if (d < 0)
      return "negative dim " + std::to_string(d) + " in shape";
    if (d != 0 && known > std::numeric_limits<int64_t>::max() / d)
      return "dims overflow";
    known *= d;
    out.push_back(d);
  }
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0)
      return "cannot infer -1 for " + shapeToString(in) + " -> " +
             shapeToString(target);
    out[inferAt] = total / known;
  } else if (known != total) {
    return "cannot reshape " + shapeToString(in) + " (" + std::to_string(total) +
           " elements) to " + shapeToString(out);
  }
  return "";
}

std::string unsqueezeShape(const Shape &in, std::vector<int64_t> axes,
                           Shape &out) {
  int64_t rank = int64_t(in.size() + axes.size());
  for (int64_t &a : axes)
    if (!normalizeAxis(a, rank))
      return "unsqueeze axis out of range";
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return "repeated unsqueeze axis";
  out.clear();
  size_t src = 0, next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (next < axes.size() && axes[next] == d) {
      out.push_back(1);
      ++next;
    } else {
      out.push_back(in[src++]);
    }
  }
  return "";
}

std::string squeezeShape(const Shape &in, std::vector<int64_t> axes,
                         Shape &out) {
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < in.size(); ++d)
      drop[d] = in[d] == 1;
  }
  for (int64_t a : axes) {
    if (!normalizeAxis(a, int64_t(in.size())))
      return "squeeze axis out of range";
    if (in[a] != 1)
      return "squeeze of dim " + std::to_string(a) + " of size " +
             std::to_string(in[a]);
    drop[a] = true;
  }
  out.clear();
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d])
      out.push_back(in[d]);
  return "";
}

std::string broadcastShape(const Shape &a, const Shape &b, Shape &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return "shapes " + shapeToString(a) + " and " + shapeToString(b) +
             " do not broadcast";
    out[k] = da == 1 ? db : da;
  }
  return "";
}

std::string sliceDims(const Shape &in, const std::vector<int64_t> &starts,
                      const std::vector<int64_t> &ends,
                      const std::vector<int64_t> &axesIn,
                      const std::vector<int64_t> &stepsIn,
                      std::vector<SliceDim> &out) {
  int64_t rank = int64_t(in.size());
  out.assign(rank, SliceDim{});
  for (int64_t d = 0; d < rank; ++d)
    out[d] = SliceDim{0, in[d], 1};
  if (starts.size() != ends.size())
    return "starts and ends differ in length";
  std::vector<int64_t> axes = axesIn;
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k)
      axes.push_back(int64_t(k));
  if (axes.size() != starts.size() ||
      (!stepsIn.empty() && stepsIn.size() != starts.size()))
    return "axes or steps differ in length from starts";
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = axes[k];
    if (!normalizeAxis(axis, rank))
      return "slice axis " + std::to_string(axes[k]) + " out of range";
    int64_t dim = in[axis];
    int64_t step = stepsIn.empty() ? 1 : stepsIn[k];
    if (step == 0)
      return "slice step 0";
    // Clamp per the ONNX spec; INT64_MAX/MIN appear as "to the end".
    auto clamp = [](int64_t v, int64_t lo, int64_t hi) {
      return std::min(std::max(v, lo), hi);
    };
    int64_t start = starts[k], end = ends[k];
    if (start < 0) start = start < -dim ? -dim - 1 : start + dim;
    if (end < 0) end = end < -dim ? -dim - 1 : end + dim;
    if (step > 0) {
      start = clamp(start, 0, dim);
      end = clamp(end, 0, dim);
    } else {
      start = clamp(start, 0, dim - 1);
      end = clamp(end, -1, dim - 1);
    }
    int64_t count = step > 0 ? (end - start + step - 1) / step
                             : (start - end + (-step) - 1) / (-step);
    out[axis] = SliceDim{start, std::max<int64_t>(count, 0), step};
  }
  return "";
}

} // namespace loom::onnx_import
