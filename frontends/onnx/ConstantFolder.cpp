//===- ConstantFolder.cpp - ONNX op semantics on known values -------------===//
//
// Part of loom, under the Apache License v2.0.
//
// One rule per ONNX op, written from the operator spec (opset 13-21 forms:
// axes and shapes as inputs). Values are small (shapes, masks, rotary
// tables), so clarity wins over speed here.
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ConstantFolder.h"
#include "frontends/onnx/NodeAttributes.h"
#include "frontends/onnx/ShapeRules.h"
#include "frontends/onnx/TensorData.h"

#include <cmath>
#include <functional>
#include <map>
#include <optional>

namespace loom::onnx_import {
namespace {

using Inputs = std::vector<const HostTensor *>;
using Rule = std::function<std::string(const onnx::NodeProto &, const Inputs &,
                                       std::vector<HostTensor> &)>;

const HostTensor &need(const Inputs &in, size_t k) {
  static const HostTensor empty;
  return k < in.size() && in[k] ? *in[k] : empty;
}
bool has(const Inputs &in, size_t k) { return k < in.size() && in[k]; }

/// Calls fn(outIndex, offsets per input) for every element of `outShape`,
/// with each input broadcast NumPy-style.
template <typename Fn>
void forEachBroadcast(const Shape &outShape, const std::vector<Shape> &ins, const Fn &fn) {
  size_t rank = outShape.size();
  std::vector<std::vector<int64_t>> bstrides;
  for (const Shape &s : ins) {
    std::vector<int64_t> st = stridesOf(s), b(rank, 0);
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] != 1)
        b[rank - s.size() + d] = st[d];
    bstrides.push_back(b);
  }
  int64_t n = 1;
  for (int64_t d : outShape) n *= d;
  // Offsets move with the index like an odometer: a step in dim d adds
  // that dim's stride, a wrap takes back the whole row it ran over.
  std::vector<int64_t> idx(rank, 0), offs(ins.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    fn(k, offs);
    for (int64_t d = int64_t(rank) - 1; d >= 0; --d) {
      if (++idx[d] < outShape[d]) {
        for (size_t j = 0; j < ins.size(); ++j) offs[j] += bstrides[j][d];
        break;
      }
      idx[d] = 0;
      for (size_t j = 0; j < ins.size(); ++j) offs[j] -= (outShape[d] - 1) * bstrides[j][d];
    }
  }
}

/// Elementwise rule over any number of inputs with broadcasting. The result
/// type is `resultType` or, when unset, the first input's type.
template <typename F>
std::string elementwise(const Inputs &in, std::vector<HostTensor> &out, const F &f,
                        std::optional<ElemType> resultType = std::nullopt) {
  Shape shape;
  std::vector<Shape> shapes;
  for (const HostTensor *t : in) {
    Shape b;
    if (std::string e = broadcastShape(shape, t->shape, b); !e.empty())
      return e;
    shape = b;
    shapes.push_back(t->shape);
  }
  ElemType type = resultType ? *resultType : in[0]->type;
  HostTensor r = HostTensor::zeros(type, shape);
  std::vector<double> args(in.size());
  forEachBroadcast(shape, shapes, [&](int64_t k, const std::vector<int64_t> &o) {
    for (size_t j = 0; j < in.size(); ++j) args[j] = in[j]->at(o[j]);
    double v = f(args);
    if (r.isFloat())
      r.f[k] = type == ElemType::Float ? double(float(v)) : v;
    else
      r.i[k] = int64_t(v);
  });
  out.push_back(std::move(r));
  return "";
}

/// Integer arithmetic must stay exact (shape values can exceed 2^53 as
/// INT64_MAX sentinels), so integer binaries get their own loop.
template <typename F>
std::string intBinary(const Inputs &in, std::vector<HostTensor> &out, const F &f) {
  Shape shape;
  if (std::string e = broadcastShape(in[0]->shape, in[1]->shape, shape); !e.empty())
    return e;
  HostTensor r = HostTensor::zeros(in[0]->type, shape);
  forEachBroadcast(shape, {in[0]->shape, in[1]->shape},
                   [&](int64_t k, const std::vector<int64_t> &o) {
                     r.i[k] = f(in[0]->i[o[0]], in[1]->i[o[1]]);
                   });
  out.push_back(std::move(r));
  return "";
}

Rule arith(std::function<double(double, double)> f,
           std::function<int64_t(int64_t, int64_t)> fi) {
  return [f, fi](const onnx::NodeProto &, const Inputs &in,
                 std::vector<HostTensor> &out) -> std::string {
    if (in.size() < 2)
      return "needs two inputs";
    if (!in[0]->isFloat() && !in[1]->isFloat() && fi)
      return intBinary(in, out, fi);
    return elementwise(in, out, [f](const std::vector<double> &a) {
      return f(a[0], a[1]);
    });
  };
}

/// Max, Min and Sum take one or more inputs (opset 8+): a single input is
/// itself, more are combined left to right with broadcasting.
Rule variadic(std::function<double(double, double)> f,
              std::function<int64_t(int64_t, int64_t)> fi) {
  Rule pair = arith(f, fi);
  return [pair](const onnx::NodeProto &node, const Inputs &in,
                std::vector<HostTensor> &out) -> std::string {
    if (in.empty())
      return "needs at least one input";
    HostTensor acc = *in[0];
    for (size_t k = 1; k < in.size(); ++k) {
      std::vector<HostTensor> step;
      if (std::string e = pair(node, {&acc, in[k]}, step); !e.empty())
        return e;
      acc = std::move(step[0]);
    }
    out.push_back(std::move(acc));
    return "";
  };
}

/// A comparison or logical op: `f` on doubles, `fi` on integers (and
/// bools). The functors are template parameters so the per-element call
/// inlines: a long sequence's causal mask compares T^2 elements.
template <typename F, typename FI>
Rule compare(F f, FI fi) {
  return [f, fi](const onnx::NodeProto &, const Inputs &in,
                 std::vector<HostTensor> &out) -> std::string {
    // Integers compare exactly: 2^53 + 1 and 2^53 are one double.
    if (in.size() == 2 && !in[0]->isFloat() && !in[1]->isFloat()) {
      std::string e = intBinary(in, out, [fi](int64_t a, int64_t b) {
        return int64_t(fi(a, b));
      });
      if (e.empty())
        out.back().type = ElemType::Bool;
      return e;
    }
    return elementwise(in, out, [f](const std::vector<double> &a) {
      return double(f(a[0], a[1]));
    }, ElemType::Bool);
  };
}

Rule unary(std::function<double(double)> f) {
  return [f](const onnx::NodeProto &, const Inputs &in,
             std::vector<HostTensor> &out) {
    return elementwise({in[0]}, out, [f](const std::vector<double> &a) {
      return f(a[0]);
    });
  };
}

/// Copies `src` elements picked by index map `pick(outIndex) -> srcIndex`.
HostTensor gatherBy(const HostTensor &src, Shape shape,
                    const std::function<int64_t(int64_t)> &pick) {
  HostTensor r = HostTensor::zeros(src.type, std::move(shape));
  int64_t n = r.numElements();
  for (int64_t k = 0; k < n; ++k) {
    int64_t s = pick(k);
    if (r.isFloat()) r.f[k] = src.f[s];
    else r.i[k] = src.i[s];
  }
  return r;
}

/// Decomposes a flat index into a multi-index of `shape`.
std::vector<int64_t> unflatten(int64_t k, const Shape &shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? k % shape[d] : 0;
    k = shape[d] ? k / shape[d] : 0;
  }
  return idx;
}

std::string foldReshape(const onnx::NodeProto &node, const Inputs &in,
                        std::vector<HostTensor> &out) {
  HostTensor r = need(in, 0);
  Shape shape;
  if (std::string e = reshapeShape(r.shape, need(in, 1).toInts(),
                                   attrInt(node, "allowzero", 0), shape);
      !e.empty())
    return e;
  r.shape = shape;
  out.push_back(std::move(r));
  return "";
}

std::string foldUnsqueeze(const onnx::NodeProto &node, const Inputs &in,
                          std::vector<HostTensor> &out) {
  HostTensor r = need(in, 0);
  std::vector<int64_t> axes = has(in, 1) ? in[1]->toInts() : attrInts(node, "axes");
  Shape shape;
  if (std::string e = unsqueezeShape(r.shape, axes, shape); !e.empty())
    return e;
  r.shape = shape;
  out.push_back(std::move(r));
  return "";
}

std::string foldSqueeze(const onnx::NodeProto &node, const Inputs &in,
                        std::vector<HostTensor> &out) {
  HostTensor r = need(in, 0);
  std::vector<int64_t> axes = has(in, 1) ? in[1]->toInts() : attrInts(node, "axes");
  Shape shape;
  if (std::string e = squeezeShape(r.shape, axes, shape); !e.empty())
    return e;
  r.shape = shape;
  out.push_back(std::move(r));
  return "";
}

std::string foldConcat(const onnx::NodeProto &node, const Inputs &in,
                       std::vector<HostTensor> &out) {
  const HostTensor &first = need(in, 0);
  int64_t axis = attrInt(node, "axis", 0);
  if (!normalizeAxis(axis, int64_t(first.shape.size())))
    return "concat axis out of range";
  Shape shape = first.shape;
  shape[axis] = 0;
  for (const HostTensor *t : in) {
    if (t->shape.size() != first.shape.size())
      return "concat inputs differ in rank";
    for (size_t d = 0; d < shape.size(); ++d)
      if (int64_t(d) != axis && t->shape[d] != first.shape[d])
        return "concat inputs differ in dim " + std::to_string(d);
    shape[axis] += t->shape[axis];
  }
  HostTensor r = HostTensor::zeros(first.type, shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  // Inputs of another type are converted once, not once per outer index.
  std::vector<HostTensor> converted(in.size());
  std::vector<const HostTensor *> src(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    src[k] = in[k];
    if (in[k]->type != first.type) {
      converted[k] = in[k]->castTo(first.type);
      src[k] = &converted[k];
    }
  }
  int64_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *c : src) {
      int64_t chunk = c->shape[axis] * inner;
      for (int64_t k = 0; k < chunk; ++k, ++pos) {
        if (r.isFloat()) r.f[pos] = c->f[o * chunk + k];
        else r.i[pos] = c->i[o * chunk + k];
      }
    }
  out.push_back(std::move(r));
  return "";
}

std::string foldSlice(const onnx::NodeProto &, const Inputs &in,
                      std::vector<HostTensor> &out) {
  const HostTensor &x = need(in, 0);
  std::vector<SliceDim> dims;
  if (std::string e = sliceDims(x.shape, need(in, 1).toInts(), need(in, 2).toInts(),
                                has(in, 3) ? in[3]->toInts() : std::vector<int64_t>{},
                                has(in, 4) ? in[4]->toInts() : std::vector<int64_t>{},
                                dims);
      !e.empty())
    return e;
  Shape shape;
  for (const SliceDim &d : dims) shape.push_back(d.count);
  std::vector<int64_t> st = stridesOf(x.shape);
  out.push_back(gatherBy(x, shape, [&](int64_t k) {
    std::vector<int64_t> idx = unflatten(k, shape);
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      s += (dims[d].start + idx[d] * dims[d].step) * st[d];
    return s;
  }));
  return "";
}

std::string foldGather(const onnx::NodeProto &node, const Inputs &in,
                       std::vector<HostTensor> &out) {
  const HostTensor &data = need(in, 0), &indices = need(in, 1);
  int64_t axis = attrInt(node, "axis", 0);
  if (!normalizeAxis(axis, int64_t(data.shape.size())))
    return "gather axis out of range";
  Shape shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  std::vector<int64_t> ids = indices.toInts();
  int64_t dim = data.shape[axis];
  for (int64_t &id : ids) {
    if (id < -dim || id >= dim)
      return "gather index " + std::to_string(id) + " out of range for dim " +
             std::to_string(dim);
    if (id < 0) id += dim;
  }
  int64_t inner = 1;
  for (size_t d = axis + 1; d < data.shape.size(); ++d) inner *= data.shape[d];
  int64_t nIdx = int64_t(ids.size());
  out.push_back(gatherBy(data, shape, [&](int64_t k) {
    int64_t i = k % inner, rest = k / inner;
    int64_t j = rest % nIdx, o = rest / nIdx;
    return (o * dim + ids[j]) * inner + i;
  }));
  return "";
}

std::string foldGatherND(const onnx::NodeProto &node, const Inputs &in,
                         std::vector<HostTensor> &out) {
  const HostTensor &data = need(in, 0), &indices = need(in, 1);
  if (attrInt(node, "batch_dims", 0) != 0)
    return "GatherND with batch_dims != 0 is not supported";
  if (indices.shape.empty())
    return "GatherND indices must have rank >= 1";
  int64_t depth = indices.shape.back();
  if (depth > int64_t(data.shape.size()))
    return "GatherND index depth exceeds data rank";
  Shape shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.insert(shape.end(), data.shape.begin() + depth, data.shape.end());
  int64_t inner = 1;
  for (size_t d = depth; d < data.shape.size(); ++d) inner *= data.shape[d];
  std::vector<int64_t> st = stridesOf(data.shape), ids = indices.toInts();
  std::string err;
  HostTensor r = gatherBy(data, shape, [&](int64_t k) {
    int64_t tuple = k / inner, s = k % inner;
    for (int64_t d = 0; d < depth; ++d) {
      int64_t id = ids[tuple * depth + d], dim = data.shape[d];
      if (id < 0) id += dim;
      if (id < 0 || id >= dim) { err = "GatherND index out of range"; return int64_t(0); }
      s += id * st[d];
    }
    return s;
  });
  if (!err.empty())
    return err;
  out.push_back(std::move(r));
  return "";
}

/// Tile: output dim d is input dim d times repeats[d], element
/// out[i] = x[i mod dims].
std::string foldTile(const onnx::NodeProto &, const Inputs &in,
                     std::vector<HostTensor> &out) {
  const HostTensor &x = need(in, 0);
  std::vector<int64_t> repeats = need(in, 1).toInts();
  if (repeats.size() != x.shape.size())
    return "Tile repeats has " + std::to_string(repeats.size()) + " entries for rank " +
           std::to_string(x.shape.size());
  Shape shape;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0)
      return "Tile repeat " + std::to_string(repeats[d]) + " is negative";
    shape.push_back(x.shape[d] * repeats[d]);
  }
  std::vector<int64_t> st = stridesOf(x.shape);
  out.push_back(gatherBy(x, shape, [&](int64_t k) {
    std::vector<int64_t> idx = unflatten(k, shape);
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d) s += (idx[d] % x.shape[d]) * st[d];
    return s;
  }));
  return "";
}

/// GatherElements: out has the indices' shape; out[i] = data[i with dim
/// `axis` replaced by indices[i]].
std::string foldGatherElements(const onnx::NodeProto &node, const Inputs &in,
                               std::vector<HostTensor> &out) {
  const HostTensor &data = need(in, 0), &indices = need(in, 1);
  int64_t rank = int64_t(data.shape.size());
  int64_t axis = attrInt(node, "axis", 0);
  if (!normalizeAxis(axis, rank))
    return "GatherElements axis out of range";
  if (int64_t(indices.shape.size()) != rank)
    return "GatherElements indices must have the data's rank";
  std::vector<int64_t> st = stridesOf(data.shape), ids = indices.toInts();
  std::string err;
  HostTensor r = gatherBy(data, indices.shape, [&](int64_t k) {
    std::vector<int64_t> idx = unflatten(k, indices.shape);
    int64_t dim = data.shape[axis], id = ids[k];
    if (id < 0) id += dim;
    if (id < 0 || id >= dim) {
      err = "GatherElements index " + std::to_string(ids[k]) + " out of range for dim " +
            std::to_string(dim);
      return int64_t(0);
    }
    idx[axis] = id;
    int64_t s = 0;
    for (int64_t d = 0; d < rank; ++d) s += idx[d] * st[d];
    return s;
  });
  if (!err.empty())
    return err;
  out.push_back(std::move(r));
  return "";
}

std::string foldExpand(const onnx::NodeProto &, const Inputs &in,
                       std::vector<HostTensor> &out) {
  const HostTensor &x = need(in, 0);
  Shape shape;
  if (std::string e = broadcastShape(x.shape, need(in, 1).toInts(), shape); !e.empty())
    return e;
  HostTensor r = HostTensor::zeros(x.type, shape);
  forEachBroadcast(shape, {x.shape}, [&](int64_t k, const std::vector<int64_t> &o) {
    if (r.isFloat()) r.f[k] = x.f[o[0]];
    else r.i[k] = x.i[o[0]];
  });
  out.push_back(std::move(r));
  return "";
}

std::string foldRange(const onnx::NodeProto &, const Inputs &in,
                      std::vector<HostTensor> &out) {
  const HostTensor &start = need(in, 0), &limit = need(in, 1), &delta = need(in, 2);
  if (start.numElements() != 1 || limit.numElements() != 1 || delta.numElements() != 1)
    return "Range needs scalar inputs";
  if (delta.at(0) == 0)
    return "Range delta is 0";
  double count = std::ceil((limit.at(0) - start.at(0)) / delta.at(0));
  int64_t n = std::max<int64_t>(int64_t(count), 0);
  HostTensor r = HostTensor::zeros(start.type, {n});
  for (int64_t k = 0; k < n; ++k) {
    if (r.isFloat()) r.f[k] = start.at(0) + double(k) * delta.at(0);
    else r.i[k] = start.intAt(0) + k * delta.intAt(0);
  }
  out.push_back(std::move(r));
  return "";
}

std::string foldCumSum(const onnx::NodeProto &node, const Inputs &in,
                       std::vector<HostTensor> &out) {
  HostTensor r = need(in, 0);
  if (need(in, 1).numElements() != 1)
    return "CumSum axis must hold one value";
  int64_t axis = need(in, 1).intAt(0);
  if (!normalizeAxis(axis, int64_t(r.shape.size())))
    return "CumSum axis out of range";
  bool exclusive = attrInt(node, "exclusive", 0), reverse = attrInt(node, "reverse", 0);
  int64_t dim = r.shape[axis], inner = 1, outer = 1;
  for (size_t d = axis + 1; d < r.shape.size(); ++d) inner *= r.shape[d];
  for (int64_t d = 0; d < axis; ++d) outer *= r.shape[d];
  const HostTensor &x = need(in, 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = 0;
      int64_t iacc = 0;
      for (int64_t s = 0; s < dim; ++s) {
        int64_t j = reverse ? dim - 1 - s : s;
        int64_t k = (o * dim + j) * inner + i;
        if (r.isFloat()) {
          double v = x.f[k];
          r.f[k] = exclusive ? acc : acc + v;
          acc += v;
        } else {
          int64_t v = x.i[k];
          r.i[k] = exclusive ? iacc : iacc + v;
          iacc += v;
        }
      }
    }
  out.push_back(std::move(r));
  return "";
}

std::string foldTranspose(const onnx::NodeProto &node, const Inputs &in,
                          std::vector<HostTensor> &out) {
  const HostTensor &x = need(in, 0);
  std::vector<int64_t> perm = attrInts(node, "perm");
  int64_t rank = int64_t(x.shape.size());
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  if (int64_t(perm.size()) != rank)
    return "perm size differs from rank";
  Shape shape;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank) return "perm entry out of range";
    if (seen[size_t(p)]) return "perm names dim " + std::to_string(p) + " twice";
    seen[size_t(p)] = true;
    shape.push_back(x.shape[p]);
  }
  std::vector<int64_t> st = stridesOf(x.shape);
  out.push_back(gatherBy(x, shape, [&](int64_t k) {
    std::vector<int64_t> idx = unflatten(k, shape);
    int64_t s = 0;
    for (int64_t d = 0; d < rank; ++d) s += idx[d] * st[perm[d]];
    return s;
  }));
  return "";
}

std::string foldMatMul(const onnx::NodeProto &, const Inputs &in,
                       std::vector<HostTensor> &out) {
  const HostTensor &a = need(in, 0), &b = need(in, 1);
  if (a.shape.size() < 2 || b.shape.size() < 2)
    return "MatMul folding needs rank >= 2 operands";
  int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
  int64_t k2 = b.shape[b.shape.size() - 2], n = b.shape.back();
  if (k != k2)
    return "MatMul contracting dims differ";
  Shape ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2), batch;
  if (std::string e = broadcastShape(ab, bb, batch); !e.empty())
    return e;
  Shape shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  HostTensor r = HostTensor::zeros(a.type, shape);
  HostTensor fa = a.castTo(ElemType::Double), fb = b.castTo(ElemType::Double);
  int64_t nb = 0;
  forEachBroadcast(batch, {ab, bb}, [&](int64_t bi, const std::vector<int64_t> &o) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += fa.f[(o[0] * m + i) * k + p] * fb.f[(o[1] * k + p) * n + j];
        int64_t idx = (bi * m + i) * n + j;
        if (r.isFloat()) r.f[idx] = a.type == ElemType::Float ? double(float(acc)) : acc;
        else r.i[idx] = int64_t(acc);
      }
    ++nb;
  });
  out.push_back(std::move(r));
  return "";
}

std::string foldSplit(const onnx::NodeProto &node, const Inputs &in,
                      std::vector<HostTensor> &out) {
  const HostTensor &x = need(in, 0);
  int64_t axis = attrInt(node, "axis", 0);
  if (!normalizeAxis(axis, int64_t(x.shape.size())))
    return "split axis out of range";
  std::vector<int64_t> sizes = has(in, 1) ? in[1]->toInts() : attrInts(node, "split");
  int64_t parts = node.output_size(), dim = x.shape[axis];
  if (sizes.empty()) {
    int64_t each = (dim + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::min(each, dim - p * each));
  }
  int64_t offset = 0;
  for (int64_t size : sizes) {
    std::vector<int64_t> starts(x.shape.size(), 0), ends = x.shape;
    starts[axis] = offset;
    ends[axis] = offset + size;
    HostTensor s = HostTensor::ints(starts), e = HostTensor::ints(ends);
    if (std::string err = foldSlice(node, {&x, &s, &e}, out); !err.empty())
      return err;
    offset += size;
  }
  return offset == dim ? "" : "split sizes do not add up to the dim";
}

std::string foldWhere(const onnx::NodeProto &, const Inputs &in,
                      std::vector<HostTensor> &out) {
  if (in.size() != 3)
    return "Where needs three inputs";
  // Where selects and never computes, so values are copied, not passed
  // through double: int64 sentinels such as INT64_MAX must stay exact.
  const HostTensor &a = *in[1];
  HostTensor b = in[2]->type == a.type ? *in[2] : in[2]->castTo(a.type);
  Shape ab, shape;
  if (std::string e = broadcastShape(a.shape, b.shape, ab); !e.empty())
    return e;
  if (std::string e = broadcastShape(in[0]->shape, ab, shape); !e.empty())
    return e;
  HostTensor r = HostTensor::zeros(a.type, shape);
  forEachBroadcast(shape, {in[0]->shape, a.shape, b.shape},
                   [&](int64_t k, const std::vector<int64_t> &o) {
                     bool pickA = in[0]->at(o[0]) != 0;
                     const HostTensor &src = pickA ? a : b;
                     int64_t at = pickA ? o[1] : o[2];
                     if (r.isFloat()) r.f[k] = src.f[at];
                     else r.i[k] = src.i[at];
                   });
  out.push_back(std::move(r));
  return "";
}

std::string foldCast(const onnx::NodeProto &node, const Inputs &in,
                     std::vector<HostTensor> &out) {
  int64_t to = attrInt(node, "to", 1);
  out.push_back(need(in, 0).castTo(ElemType(to)));
  return "";
}

std::string foldConstantOfShape(const onnx::NodeProto &node, const Inputs &in,
                                std::vector<HostTensor> &out) {
  HostTensor value = HostTensor::zeros(ElemType::Float, {1});
  if (const auto *a = findAttr(node, "value")) {
    std::string err;
    if (!tensorFromProto(a->t(), "", value, err))
      return err;
  }
  if (value.numElements() != 1 || int64_t(value.isFloat() ? value.f.size() : value.i.size()) != 1)
    return "ConstantOfShape value must hold one element";
  Shape shape = need(in, 0).toInts();
  int64_t n;
  if (!checkedNumElements(shape, n))
    return "ConstantOfShape dims overflow";
  HostTensor r = HostTensor::zeros(value.type, shape);
  for (int64_t k = 0; k < n; ++k) {
    if (r.isFloat()) r.f[k] = value.f[0];
    else r.i[k] = value.i[0];
  }
  out.push_back(std::move(r));
  return "";
}

const std::map<std::string, Rule> &rules() {
  static const std::map<std::string, Rule> table = {
      {"Add", arith([](double a, double b) { return a + b; },
                    [](int64_t a, int64_t b) { return a + b; })},
      {"Sub", arith([](double a, double b) { return a - b; },
                    [](int64_t a, int64_t b) { return a - b; })},
      {"Mul", arith([](double a, double b) { return a * b; },
                    [](int64_t a, int64_t b) { return a * b; })},
      {"Div", arith([](double a, double b) { return a / b; },
                    [](int64_t a, int64_t b) { return b ? a / b : 0; })},
      {"Pow", arith([](double a, double b) { return std::pow(a, b); }, nullptr)},
      {"Max", variadic([](double a, double b) { return std::max(a, b); },
                       [](int64_t a, int64_t b) { return std::max(a, b); })},
      {"Min", variadic([](double a, double b) { return std::min(a, b); },
                       [](int64_t a, int64_t b) { return std::min(a, b); })},
      {"Equal", compare([](double a, double b) { return a == b; },
                          [](int64_t a, int64_t b) { return a == b; })},
      {"Less", compare([](double a, double b) { return a < b; },
                          [](int64_t a, int64_t b) { return a < b; })},
      {"LessOrEqual", compare([](double a, double b) { return a <= b; },
                          [](int64_t a, int64_t b) { return a <= b; })},
      {"Greater", compare([](double a, double b) { return a > b; },
                          [](int64_t a, int64_t b) { return a > b; })},
      {"GreaterOrEqual", compare([](double a, double b) { return a >= b; },
                          [](int64_t a, int64_t b) { return a >= b; })},
      {"And", compare([](double a, double b) { return a != 0 && b != 0; },
                      [](int64_t a, int64_t b) { return a != 0 && b != 0; })},
      {"Or", compare([](double a, double b) { return a != 0 || b != 0; },
                     [](int64_t a, int64_t b) { return a != 0 || b != 0; })},
      {"Xor", compare([](double a, double b) { return (a != 0) != (b != 0); },
                      [](int64_t a, int64_t b) { return (a != 0) != (b != 0); })},
      {"Not", [](const onnx::NodeProto &, const Inputs &in, std::vector<HostTensor> &out) {
         return elementwise({in[0]}, out, [](const std::vector<double> &a) {
           return double(a[0] == 0);
         }, ElemType::Bool);
       }},
      {"Neg", unary([](double x) { return -x; })},
      {"Abs", unary([](double x) { return std::fabs(x); })},
      {"Sqrt", unary([](double x) { return std::sqrt(x); })},
      {"Reciprocal", unary([](double x) { return 1.0 / x; })},
      {"Exp", unary([](double x) { return std::exp(x); })},
      {"Log", unary([](double x) { return std::log(x); })},
      {"Cos", unary([](double x) { return std::cos(x); })},
      {"Sin", unary([](double x) { return std::sin(x); })},
      {"Tanh", unary([](double x) { return std::tanh(x); })},
      {"Sigmoid", unary([](double x) { return 1.0 / (1.0 + std::exp(-x)); })},
      {"Relu", unary([](double x) { return x > 0 ? x : 0.0; })},
      {"Erf", unary([](double x) { return std::erf(x); })},
      {"Softplus", unary([](double x) {
         return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
       })},
      {"Floor", unary([](double x) { return std::floor(x); })},
      {"Ceil", unary([](double x) { return std::ceil(x); })},
      {"Identity", [](const onnx::NodeProto &, const Inputs &in, std::vector<HostTensor> &out) {
         out.push_back(need(in, 0));
         return std::string();
       }},
      {"Cast", foldCast},
      {"CastLike", [](const onnx::NodeProto &, const Inputs &in, std::vector<HostTensor> &out) {
         out.push_back(need(in, 0).castTo(need(in, 1).type));
         return std::string();
       }},
      {"Reshape", foldReshape},
      {"Unsqueeze", foldUnsqueeze},
      {"Squeeze", foldSqueeze},
      {"Concat", foldConcat},
      {"Slice", foldSlice},
      {"Gather", foldGather},
      {"GatherND", foldGatherND},
      {"Expand", foldExpand},
      {"Tile", foldTile},
      {"GatherElements", foldGatherElements},
      {"Range", foldRange},
      {"CumSum", foldCumSum},
      {"Transpose", foldTranspose},
      {"MatMul", foldMatMul},
      {"Split", foldSplit},
      {"Where", foldWhere},
      {"ConstantOfShape", foldConstantOfShape},
  };
  return table;
}

} // namespace

bool hasFoldingRule(const std::string &opType) {
  return rules().count(opType) != 0;
}

/// How many leading inputs a rule or an emitter reads without checking (the op's
/// required inputs, as the ONNX operator specification lists them); the
/// rest are optional and read through has(). A node with fewer is an
/// error, not a read past the end.
size_t requiredOnnxInputs(const std::string &op) {
  if (op == "Constant")
    return 0;
  static const std::map<std::string, size_t> counts = {
      {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Pow", 2}, {"Mod", 2}, {"Max", 1},
      {"Min", 1}, {"Equal", 2}, {"Less", 2}, {"LessOrEqual", 2}, {"Greater", 2},
      {"GreaterOrEqual", 2}, {"And", 2}, {"Or", 2}, {"Xor", 2}, {"CastLike", 2},
      {"Reshape", 2}, {"Gather", 2}, {"GatherND", 2}, {"GatherElements", 2}, {"Expand", 2},
      {"Range", 3}, {"CumSum", 2}, {"MatMul", 2}, {"Where", 3}, {"Tile", 2}, {"Slice", 1}};
  auto it = counts.find(op);
  return it == counts.end() ? 1 : it->second;
}

std::vector<std::string> foldingRuleOps() {
  std::vector<std::string> ops;
  for (const auto &[op, rule] : rules()) ops.push_back(op);
  return ops;
}

FoldStatus foldNode(const onnx::NodeProto &node, const Inputs &inputs,
                    std::vector<HostTensor> &outputs, std::string &err) {
  auto it = rules().find(node.op_type());
  if (it == rules().end() || !node.domain().empty())
    return FoldStatus::NotFoldable;
  size_t required = requiredOnnxInputs(node.op_type());
  if (size_t(node.input_size()) < required) {
    err = "has " + std::to_string(node.input_size()) + " inputs, " + node.op_type() + " needs " +
          std::to_string(required);
    return FoldStatus::Error;
  }
  for (size_t k = 1; k < required && k < inputs.size(); ++k)
    if (!inputs[k] && node.input(int(k)).empty()) {
      err = "input " + std::to_string(k) + " is required but not given";
      return FoldStatus::Error;
    }
  for (size_t k = 0; k < inputs.size(); ++k)
    if (!inputs[k] && k == 0)
      return FoldStatus::NotFoldable;
  outputs.clear();
  err = it->second(node, inputs, outputs);
  return err.empty() ? FoldStatus::Folded : FoldStatus::Error;
}

} // namespace loom::onnx_import
