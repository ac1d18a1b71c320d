//===- OpShapes.cpp - Per-opcode arity, shape and dtype rules -------------===//
//
// Part of loom, under the Apache License v2.0.
//
// One check per opcode family, mirroring the comments in Program.h. Kernels
// rely on these: after validate() they index memory without re-checking.
//===----------------------------------------------------------------------===//
#include "lib/OpShapes.h"
#include "loom/runtime/AttentionLayout.h"
#include "loom/runtime/Fp8Amax.h"
#include "loom/runtime/RoundedCopies.h"
#include "lib/Diagnostics.h"

#include <algorithm>
#include <deque>

namespace loom::rt {

bool broadcastShapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                     std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    // Right-aligned: dim i of out is dim i - (rank - a.size()) of a.
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

namespace {

using Shape = std::vector<int64_t>;

bool isFloat(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::BF16; }
bool isIndex(DType t) { return t == DType::I64 || t == DType::I32; }

/// The operands of one instruction, with the checks every rule needs. A
/// bf16 buffer in a slot that may hold bf16 storage of an f32 computation
/// (bf16StorageAllowed) is seen as f32, so the rules below then insist that
/// the instruction's other operands are f32.
class OpView {
public:
  OpView(const Program &p, const Instr &I) : I_(I) {
    auto view = [&](uint32_t id, bool output, size_t k) {
      const BufferDesc *b = &p.buffers[id];
      if (b->dtype == DType::BF16 && bf16StorageAllowed(I.op, output, k)) {
        widened_.push_back(*b);
        widened_.back().dtype = DType::F32;
        b = &widened_.back();
      }
      return b;
    };
    for (size_t k = 0; k < I.in.size(); ++k) ins_.push_back(view(I.in[k], false, k));
    for (size_t k = 0; k < I.out.size(); ++k) outs_.push_back(view(I.out[k], true, k));
  }

  const BufferDesc &in(size_t k) const { return *ins_[k]; }
  size_t numIn() const { return ins_.size(); }
  const BufferDesc &out(size_t k = 0) const { return *outs_[k]; }
  size_t numOut() const { return outs_.size(); }

  /// Counts of inputs, outputs, ints and floats. kAny accepts any count.
  static constexpr size_t kAny = SIZE_MAX;
  std::string arity(size_t minIn, size_t maxIn, size_t minOut, size_t maxOut,
                    size_t ints, size_t floats) const {
    if (I_.in.size() < minIn || I_.in.size() > maxIn)
      return cat("takes ", range(minIn, maxIn), " inputs, got ", I_.in.size());
    if (I_.out.size() < minOut || I_.out.size() > maxOut)
      return cat("takes ", range(minOut, maxOut), " outputs, got ", I_.out.size());
    if (ints != kAny && I_.ints.size() != ints)
      return cat("takes ", ints, " int attributes, got ", I_.ints.size());
    if (floats != kAny && I_.floats.size() != floats)
      return cat("takes ", floats, " float attributes, got ", I_.floats.size());
    return "";
  }

  /// The instruction has between lo and hi int attributes.
  std::string intCount(size_t lo, size_t hi) const {
    if (I_.ints.size() >= lo && I_.ints.size() <= hi)
      return "";
    return cat("takes ", range(lo, hi), " int attributes, got ", I_.ints.size());
  }

  /// Every listed buffer has the dtype of the first.
  std::string sameDType(std::initializer_list<const BufferDesc *> bs) const {
    DType t = (*bs.begin())->dtype;
    for (const BufferDesc *b : bs)
      if (b->dtype != t)
        return cat("dtypes differ: ", dtypeName(t), " and ", dtypeName(b->dtype));
    return "";
  }

  std::string floatDType(const BufferDesc &b, const char *what) const {
    return isFloat(b.dtype) ? "" : cat(what, " must be a float type, got ", dtypeName(b.dtype));
  }

  std::string outShape(const Shape &expected, size_t k = 0) const {
    if (out(k).shape == expected)
      return "";
    return cat("output ", k, " has shape ", shapeStr(out(k).shape), ", expected ",
               shapeStr(expected));
  }

  std::string axisInRange(int64_t axis, size_t rank) const {
    if (axis < 0 || axis >= int64_t(rank))
      return cat("axis ", axis, " out of range for rank ", rank);
    return "";
  }

private:
  static std::string range(size_t lo, size_t hi) {
    if (lo == hi)
      return std::to_string(lo);
    return hi == kAny ? cat(lo, " or more") : cat(lo, " to ", hi);
  }
  const Instr &I_;
  std::deque<BufferDesc> widened_; // stable addresses for ins_/outs_
  std::vector<const BufferDesc *> ins_, outs_;
};

// Each check returns "" or the first problem; `first` chains them.
template <typename... Checks> std::string first(const Checks &...checks) {
  std::string e;
  ((e.empty() ? (void)(e = checks()) : (void)0), ...);
  return e;
}

constexpr size_t kAny = OpView::kAny;

std::string checkEmbedding(const OpView &v) {
  if (std::string e = v.arity(2, 2, 1, 1, 0, 0); !e.empty())
    return e;
  const BufferDesc &table = v.in(0), &ids = v.in(1);
  if (table.shape.size() != 2)
    return cat("table must be [V, D], got ", shapeStr(table.shape));
  if (!isIndex(ids.dtype))
    return cat("ids must be i64 or i32, got ", dtypeName(ids.dtype));
  Shape expected = ids.shape;
  expected.push_back(table.shape[1]);
  return first([&] { return v.sameDType({&table, &v.out()}); },
               [&] { return v.outShape(expected); });
}

std::string checkMatMul(const OpView &v, const Instr &I) {
  if (std::string e = v.arity(2, 3, 1, 2, kAny, 0); !e.empty())
    return e;
  if (I.ints.size() != 2 && I.ints.size() != 3)
    return cat("takes 2 or 3 int attributes (transA, transB[, 1]), got ", I.ints.size());
  if ((I.ints.size() == 3) != (I.out.size() == 2) || (I.ints.size() == 3 && I.ints[2] != 1))
    return "a second output (B's column sums) comes with ints [transA, transB, 1], and only with it";
  if (I.out.size() == 2) {
    const BufferDesc &a = v.in(0), &b = v.in(1), &y = v.out(0), &sums = v.out(1);
    if (I.in.size() != 2 || a.dtype != DType::BF16 || b.dtype != DType::BF16 ||
        y.dtype != DType::BF16 || a.shape.size() != 2 || b.shape.size() != 2 || I.ints[1] != 0)
      return "B's column sums need bf16 rank-2 operands, an untransposed B, a bf16 result and no "
             "third input";
    if (sums.dtype != DType::BF16 || sums.numElements() != b.shape[1])
      return cat("B's column sums must be ", b.shape[1], " bf16 values, got ",
                 shapeStr(sums.shape), " ", dtypeName(sums.dtype));
  }
  if (I.in.size() == 3 && isMatMulAddend(v.in(2).shape)) { // beta = 1
    const BufferDesc &addend = v.in(2), &out = v.out();
    if (addend.shape != out.shape || addend.dtype != out.dtype)
      return cat("addend ", shapeStr(addend.shape), " ", dtypeName(addend.dtype),
                 " must have the result's shape and dtype ", shapeStr(out.shape), " ",
                 dtypeName(out.dtype));
    if (out.dtype == DType::BF16)
      return "an addend needs an f32 or f64 result, not bf16";
  } else if (I.in.size() == 3) {
    const BufferDesc &bias = v.in(2), &out = v.out();
    if (bias.shape.size() != 1 || out.shape.empty() || bias.shape[0] != out.shape.back())
      return cat("bias ", shapeStr(bias.shape), " must be a vector over the result's last dim ",
                 shapeStr(out.shape));
    if (bias.dtype != out.dtype)
      return cat("bias must have the result's dtype ", dtypeName(out.dtype), ", got ",
                 dtypeName(bias.dtype));
  }
  const BufferDesc &a = v.in(0), &b = v.in(1);
  if (a.shape.size() < 2 || b.shape.size() < 2)
    return cat("operands must have rank >= 2, got ", shapeStr(a.shape), " and ",
               shapeStr(b.shape));
  // bf16 operands may give an f32 result (accumulated in f32, not rounded).
  bool widening = a.dtype == DType::BF16 && b.dtype == DType::BF16 && v.out().dtype == DType::F32;
  if (std::string e = first([&] { return widening ? "" : v.sameDType({&a, &b, &v.out()}); },
                            [&] { return v.floatDType(a, "operands"); });
      !e.empty())
    return e;
  bool ta = I.ints[0] != 0, tb = I.ints[1] != 0;
  size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t ka = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  if (ka != kb)
    return cat("inner dims differ: a ", shapeStr(a.shape), " b ", shapeStr(b.shape),
               " (transA ", ta, ", transB ", tb, ")");
  Shape batch;
  if (!broadcastShapes(Shape(a.shape.begin(), a.shape.end() - 2),
                       Shape(b.shape.begin(), b.shape.end() - 2), batch))
    return cat("batch dims of ", shapeStr(a.shape), " and ", shapeStr(b.shape),
               " do not broadcast");
  batch.push_back(m);
  batch.push_back(n);
  return v.outShape(batch);
}

std::string checkBinary(const OpView &v) {
  if (std::string e = v.arity(2, 2, 1, 1, 0, 0); !e.empty())
    return e;
  Shape s;
  if (!broadcastShapes(v.in(0).shape, v.in(1).shape, s))
    return cat("shapes ", shapeStr(v.in(0).shape), " and ", shapeStr(v.in(1).shape),
               " do not broadcast");
  return first([&] { return v.sameDType({&v.in(0), &v.in(1), &v.out()}); },
               [&] { return v.outShape(s); });
}

std::string checkWhere(const OpView &v) {
  if (std::string e = v.arity(3, 3, 1, 1, 0, 0); !e.empty())
    return e;
  if (v.in(0).dtype != DType::Bool)
    return cat("condition must be bool, got ", dtypeName(v.in(0).dtype));
  Shape ab, s;
  if (!broadcastShapes(v.in(1).shape, v.in(2).shape, ab) ||
      !broadcastShapes(v.in(0).shape, ab, s))
    return cat("shapes ", shapeStr(v.in(0).shape), ", ", shapeStr(v.in(1).shape), " and ",
               shapeStr(v.in(2).shape), " do not broadcast");
  return first([&] { return v.sameDType({&v.in(1), &v.in(2), &v.out()}); },
               [&] { return v.outShape(s); });
}

std::string checkUnary(const OpView &v) {
  return first([&] { return v.arity(1, 1, 1, 1, 0, 0); },
               [&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.floatDType(v.in(0), "operand"); },
               [&] { return v.outShape(v.in(0).shape); });
}

std::string checkCast(const OpView &v) {
  if (std::string e = v.arity(1, 1, 1, 1, 0, 0); !e.empty())
    return e;
  if (v.in(0).numElements() != v.out().numElements())
    return cat("element counts differ: ", shapeStr(v.in(0).shape), " and ",
               shapeStr(v.out().shape));
  // fp8 values mean nothing without their scale: converting goes through
  // Fp8Cast (and ScaledMatMul's dequantization), copying is fine.
  if (v.in(0).dtype != v.out().dtype && (isFp8(v.in(0).dtype) || isFp8(v.out().dtype)))
    return cat("cannot cast ", dtypeName(v.in(0).dtype), " to ", dtypeName(v.out().dtype),
               ": fp8 conversions need a scale (fp8_cast)");
  return "";
}

std::string checkReduce(const OpView &v, const Instr &I) {
  if (std::string e = v.arity(1, 1, 1, 1, kAny, 0); !e.empty())
    return e;
  if (I.ints.empty() || I.ints[0] < 0 || I.ints[0] > 2)
    return "ints[0] must be the kind (0 sum, 1 mean, 2 max)";
  const Shape &x = v.in(0).shape;
  std::vector<bool> reduced(x.size(), false);
  for (size_t k = 1; k < I.ints.size(); ++k) {
    if (std::string e = v.axisInRange(I.ints[k], x.size()); !e.empty())
      return e;
    if (k > 1 && I.ints[k] <= I.ints[k - 1])
      return "axes must be strictly increasing";
    reduced[I.ints[k]] = true;
  }
  Shape keep, drop;
  for (size_t d = 0; d < x.size(); ++d) {
    keep.push_back(reduced[d] ? 1 : x[d]);
    if (!reduced[d])
      drop.push_back(x[d]);
  }
  if (v.out().shape != keep && v.out().shape != drop)
    return cat("output has shape ", shapeStr(v.out().shape), ", expected ", shapeStr(keep),
               " or ", shapeStr(drop));
  return first([&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.floatDType(v.in(0), "operand"); });
}

std::string checkSumSquares(const OpView &v) {
  return first([&] { return v.arity(1, 1, 1, 1, 0, 0); },
               [&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] {
                 DType t = v.in(0).dtype;
                 return t == DType::F32 || t == DType::F64
                            ? ""
                            : cat("operand must be f32 or f64, got ", dtypeName(t));
               },
               [&] { return v.outShape({}); });
}

std::string checkGlobalSumSquares(const OpView &v) {
  if (std::string e = v.arity(1, OpView::kAny, 1, 1, 0, 0); !e.empty())
    return e;
  DType t = v.out().dtype;
  if (t != DType::F32 && t != DType::F64)
    return cat("output must be f32 or f64, got ", dtypeName(t));
  for (size_t k = 0; k < v.numIn(); ++k)
    if (v.in(k).dtype != t)
      return cat("input ", k, " is ", dtypeName(v.in(k).dtype), ", the sum ", dtypeName(t));
  return v.outShape({});
}

std::string checkSoftmax(const OpView &v, const Instr &I) {
  return first([&] { return v.arity(1, 1, 1, 1, 1, 0); },
               [&] { return v.axisInRange(I.ints[0], v.in(0).shape.size()); },
               [&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.floatDType(v.in(0), "operand"); },
               [&] { return v.outShape(v.in(0).shape); });
}

/// RmsNorm and LayerNorm: x[..., D] with weight (and bias) [D].
std::string checkNorm(const OpView &v, size_t maxIn, const Instr &I) {
  if (std::string e = v.arity(2, maxIn, 1, 1, 0, 1); !e.empty())
    return e;
  const Shape &x = v.in(0).shape;
  if (x.empty())
    return "input must have rank >= 1";
  for (size_t k = 1; k < I.in.size(); ++k)
    if (v.in(k).shape != Shape{x.back()})
      return cat("input ", k, " has shape ", shapeStr(v.in(k).shape), ", expected [",
                 x.back(), "]");
  for (size_t k = 1; k < I.in.size(); ++k)
    if (std::string e = v.sameDType({&v.in(0), &v.in(k)}); !e.empty())
      return e;
  return first([&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.floatDType(v.in(0), "operand"); },
               [&] { return v.outShape(x); });
}

/// AddRmsNorm: a, b of one shape [..., D], w [D] -> the sum and the norm,
/// both of a's shape, every operand of one float dtype (after bf16 storage).
std::string checkAddRmsNorm(const OpView &v) {
  if (std::string e = v.arity(3, 3, 2, 2, 0, 1); !e.empty())
    return e;
  const Shape &a = v.in(0).shape;
  if (a.empty())
    return "input must have rank >= 1";
  if (v.in(1).shape != a)
    return cat("input 1 has shape ", shapeStr(v.in(1).shape), ", expected ", shapeStr(a));
  if (v.in(2).shape != Shape{a.back()})
    return cat("input 2 has shape ", shapeStr(v.in(2).shape), ", expected [", a.back(), "]");
  return first([&] { return v.sameDType({&v.in(0), &v.in(1), &v.in(2), &v.out(0), &v.out(1)}); },
               [&] { return v.floatDType(v.in(0), "operand"); },
               [&] { return v.outShape(a, 0); }, [&] { return v.outShape(a, 1); });
}

std::string checkRotary(const OpView &v) {
  if (std::string e = v.arity(3, 3, 1, 1, 0, 0); !e.empty())
    return e;
  const Shape &x = v.in(0).shape;
  if (x.empty() || x.back() % 2 != 0)
    return cat("last dim of ", shapeStr(x), " must be even");
  for (size_t k = 1; k < 3; ++k) {
    Shape s;
    if (!broadcastShapes(x, v.in(k).shape, s) || s != x)
      return cat("table ", shapeStr(v.in(k).shape), " does not broadcast to ", shapeStr(x));
  }
  return first([&] { return v.sameDType({&v.in(0), &v.in(1), &v.in(2), &v.out()}); },
               [&] { return v.floatDType(v.in(0), "operand"); },
               [&] { return v.outShape(x); });
}

/// The shapes q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] that
/// Attention and AttentionGrad share (heads-major dims: AttentionLayout.h).
std::string checkAttentionOperands(const Shape &q, const Shape &k, const Shape &val) {
  if (q.size() != 4 || k.size() != 4 || val.size() != 4)
    return "q, k, v must be [B, H, T, D] (or [B, T, H, D] tokens-major)";
  if (k[0] != q[0] || val[0] != q[0] || k[1] != val[1] || k[2] != val[2] || k[3] != q[3])
    return cat("shapes q ", shapeStr(q), " k ", shapeStr(k), " v ", shapeStr(val),
               " do not fit");
  if (k[1] == 0 || q[1] % k[1] != 0)
    return cat(q[1], " query heads are not a multiple of ", k[1], " kv heads");
  return "";
}

/// lse is never bf16 storage: it has the computation's dtype (f32, or f64),
/// which `q` shows once bf16 storage is seen as f32.
std::string checkLseDType(const BufferDesc &lse, const BufferDesc &q) {
  if (lse.dtype == q.dtype)
    return "";
  return cat("lse must be ", dtypeName(q.dtype), " (the computation's dtype), got ",
             dtypeName(lse.dtype));
}

/// Attention's and AttentionGrad's shared rules: arity, the [causal(,
/// bf16_operands(, window(, layout)))] ints, one float, and q, k, v's shapes.
std::string checkAttentionCall(const OpView &v, const Instr &I, size_t inputs, size_t outputs) {
  if (std::string e = v.arity(inputs, inputs, outputs, outputs, OpView::kAny, OpView::kAny);
      !e.empty())
    return e;
  if (std::string e = v.intCount(1, 4); !e.empty())
    return e;
  if (I.floats.empty() || I.floats.size() > 2)
    return cat("takes 1 to 2 float attributes (scale, softcap), got ", I.floats.size());
  if (I.ints.size() >= 3 && (I.ints[2] < 0 || (I.ints[2] > 0 && I.ints[0] == 0)))
    return cat("window ", I.ints[2], " must be 0, or positive with causal");
  if (I.ints.size() == 4 && I.ints[3] != 0 && I.ints[3] != 1)
    return cat("layout ", I.ints[3], " must be 0 (heads-major) or 1 (tokens-major)");
  if (I.floats.size() == 2 && !(I.floats[1] >= 0))
    return cat("softcap ", I.floats[1], " must be 0 (off) or positive");
  AttentionLayout l = attentionLayout(I);
  return checkAttentionOperands(headsMajorDims(v.in(0).shape, l), headsMajorDims(v.in(1).shape, l),
                                headsMajorDims(v.in(2).shape, l));
}

/// o's stored shape: q's with v's head dim (the same in either layout).
Shape attentionOutputShape(const OpView &v) {
  Shape o = v.in(0).shape;
  o[3] = v.in(2).shape[3];
  return o;
}

/// lse's shape [B, Hq, T], whatever the operands' layout.
Shape attentionLseShape(const OpView &v, const Instr &I) {
  Shape q = headsMajorDims(v.in(0).shape, attentionLayout(I));
  return {q[0], q[1], q[2]};
}

std::string checkAttention(const OpView &v, const Instr &I) {
  if (std::string e = checkAttentionCall(v, I, 3, 2); !e.empty())
    return e;
  return first([&] { return v.sameDType({&v.in(0), &v.in(1), &v.in(2), &v.out(0)}); },
               [&] { return v.floatDType(v.in(0), "operands"); },
               [&] { return v.outShape(attentionOutputShape(v), 0); },
               [&] { return v.outShape(attentionLseShape(v, I), 1); },
               [&] { return checkLseDType(v.out(1), v.in(0)); });
}

std::string checkTranspose(const OpView &v, const Instr &I) {
  if (std::string e = v.arity(1, 1, 1, 1, kAny, 0); !e.empty())
    return e;
  const Shape &x = v.in(0).shape;
  if (I.ints.size() != x.size())
    return cat("takes ", x.size(), " int attributes (a permutation), got ", I.ints.size());
  std::vector<bool> seen(x.size(), false);
  Shape expected;
  for (int64_t d : I.ints) {
    if (d < 0 || d >= int64_t(x.size()) || seen[d])
      return cat("ints are not a permutation of ", x.size(), " dims");
    seen[d] = true;
    expected.push_back(x[d]);
  }
  return first([&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.outShape(expected); });
}

/// Slice and SliceGrad: `window` is the strided window of `whole` that
/// ints [start_0, step_0, start_1, step_1, ...] select, one pair per dim.
std::string checkWindow(const Instr &I, const Shape &whole, const Shape &window,
                        const char *wholeName, const char *windowName) {
  if (I.ints.size() != 2 * whole.size())
    return cat("takes ", 2 * whole.size(), " int attributes (start, step per dim), got ",
               I.ints.size());
  if (window.size() != whole.size())
    return cat(windowName, " rank ", window.size(), " differs from ", wholeName, " rank ",
               whole.size());
  for (size_t d = 0; d < whole.size(); ++d) {
    int64_t start = I.ints[2 * d], step = I.ints[2 * d + 1], count = window[d];
    if (step == 0)
      return cat("dim ", d, " has step 0");
    if (count == 0)
      continue;
    // Element i of the window is whole index start + i * step; both ends of
    // the window must lie in [0, whole[d]).
    int64_t last = start + (count - 1) * step;
    if (start < 0 || start >= whole[d] || last < 0 || last >= whole[d])
      return cat("dim ", d, " window (start ", start, ", count ", count, ", step ", step,
                 ") leaves [0, ", whole[d], ")");
  }
  return "";
}

std::string checkSlice(const OpView &v, const Instr &I) {
  return first([&] { return v.arity(1, 1, 1, 1, kAny, 0); },
               [&] { return checkWindow(I, v.in(0).shape, v.out().shape, "input", "output"); },
               [&] { return v.sameDType({&v.in(0), &v.out()}); });
}

std::string checkConcat(const OpView &v, const Instr &I) {
  if (std::string e = v.arity(1, kAny, 1, 1, 1, 0); !e.empty())
    return e;
  Shape expected = v.in(0).shape;
  if (std::string e = v.axisInRange(I.ints[0], expected.size()); !e.empty())
    return e;
  size_t axis = size_t(I.ints[0]);
  expected[axis] = 0;
  for (size_t k = 0; k < I.in.size(); ++k) {
    const Shape &s = v.in(k).shape;
    for (size_t d = 0; d < expected.size(); ++d)
      if (s.size() != expected.size() || (d != axis && s[d] != expected[d]))
        return cat("input ", k, " ", shapeStr(s), " does not fit ", shapeStr(v.in(0).shape),
                   " along axis ", axis);
    expected[axis] += s[axis];
    if (std::string e = v.sameDType({&v.in(0), &v.in(k)}); !e.empty())
      return e;
  }
  return first([&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.outShape(expected); });
}

std::string checkSplit(const OpView &v, const Instr &I) {
  if (std::string e = v.arity(1, 1, 1, kAny, 1, 0); !e.empty())
    return e;
  const Shape &x = v.in(0).shape;
  if (std::string e = v.axisInRange(I.ints[0], x.size()); !e.empty())
    return e;
  size_t axis = size_t(I.ints[0]);
  int64_t total = 0;
  for (size_t k = 0; k < I.out.size(); ++k) {
    const Shape &s = v.out(k).shape;
    for (size_t d = 0; d < x.size(); ++d)
      if (s.size() != x.size() || (d != axis && s[d] != x[d]))
        return cat("output ", k, " ", shapeStr(s), " does not fit ", shapeStr(x),
                   " along axis ", axis);
    total += s[axis];
    if (std::string e = v.sameDType({&v.in(0), &v.out(k)}); !e.empty())
      return e;
  }
  if (total != x[axis])
    return cat("output sizes along axis ", axis, " add up to ", total, ", not ", x[axis]);
  return "";
}

std::string checkExpand(const OpView &v) {
  if (std::string e = v.arity(1, 1, 1, 1, 0, 0); !e.empty())
    return e;
  Shape s;
  if (!broadcastShapes(v.in(0).shape, v.out().shape, s) || s != v.out().shape)
    return cat(shapeStr(v.in(0).shape), " does not broadcast to ", shapeStr(v.out().shape));
  return v.sameDType({&v.in(0), &v.out()});
}

/// CrossEntropy's and its gradient's first two operands: [N, V] logits
/// (N, V > 0) and [N] integer targets.
std::string checkLogitsAndTargets(const OpView &v) {
  const Shape &logits = v.in(0).shape, &targets = v.in(1).shape;
  if (logits.size() != 2 || targets.size() != 1 || targets[0] != logits[0])
    return cat("logits ", shapeStr(logits), " and targets ", shapeStr(targets),
               " must be [N, V] and [N]");
  if (logits[0] == 0 || logits[1] == 0)
    return cat("logits ", shapeStr(logits), " must have N > 0 rows of V > 0 classes");
  if (!isIndex(v.in(1).dtype))
    return cat("targets must be i64 or i32, got ", dtypeName(v.in(1).dtype));
  return "";
}

/// A loss output (`what` names it): f32, or f64 for f64 logits.
std::string checkLossDType(const OpView &v, const BufferDesc &loss, const char *what) {
  if (loss.dtype == DType::F32 || (loss.dtype == DType::F64 && v.in(0).dtype == DType::F64))
    return "";
  return cat(what, " must be f32 (or f64 with f64 logits), got ", dtypeName(loss.dtype));
}

std::string checkCrossEntropy(const OpView &v) {
  if (std::string e = v.arity(2, 2, 1, 1, 0, 0); !e.empty())
    return e;
  if (std::string e = checkLogitsAndTargets(v); !e.empty())
    return e;
  // The loss is f32 (whatever the logits' precision), or f64 for f64 logits.
  if (std::string e = checkLossDType(v, v.out(), "output"); !e.empty())
    return e;
  return first([&] { return v.floatDType(v.in(0), "logits"); },
               [&] { return v.outShape({}); });
}

//===--- Training ---------------------------------------------------------===//

/// `b` has shape `expected`; `what` names it in the message.
std::string hasShape(const BufferDesc &b, const Shape &expected, const std::string &what) {
  if (b.shape == expected)
    return "";
  return cat(what, " has shape ", shapeStr(b.shape), ", expected ", shapeStr(expected));
}

/// EmbeddingGrad: in dy[..., D], ids (dy's shape but D), optionally an
/// addend ([V, D], the output's dtype) summed into the table's gradient.
std::string checkEmbeddingGrad(const OpView &v) {
  if (std::string e = v.arity(2, 3, 1, 1, 0, 0); !e.empty())
    return e;
  if (v.numIn() == 3)
    if (std::string e = first([&] { return hasShape(v.in(2), v.out().shape, "addend"); },
                              [&] { return v.sameDType({&v.out(), &v.in(2)}); });
        !e.empty())
      return e;
  const BufferDesc &dy = v.in(0), &ids = v.in(1), &out = v.out();
  if (!isIndex(ids.dtype))
    return cat("ids must be i64 or i32, got ", dtypeName(ids.dtype));
  if (dy.shape.size() != ids.shape.size() + 1 ||
      !std::equal(ids.shape.begin(), ids.shape.end(), dy.shape.begin()))
    return cat("gradient ", shapeStr(dy.shape), " must be the ids' shape ", shapeStr(ids.shape),
               " plus one dim");
  if (out.shape.size() != 2 || out.shape[1] != dy.shape.back())
    return cat("output has shape ", shapeStr(out.shape), ", expected [V, ", dy.shape.back(), "]");
  return first([&] { return v.sameDType({&dy, &out}); },
               [&] { return v.floatDType(dy, "gradient"); });
}

/// RmsNormGrad (dx, dw) and LayerNormGrad (dx, dw, db):
/// in x[..., D], w[D], dy (x's shape), optionally an addend (x's shape and
/// dtype) summed into dx, floats [eps]; with ints [1] one more output, dx's
/// rounded copy (storesRoundedDx: x's shape, bf16).
std::string checkNormGrad(const Program &p, const OpView &v, const Instr &I, size_t outs) {
  bool copy = !I.ints.empty();
  if (std::string e = v.arity(3, 4, outs + copy, outs + copy, copy ? 1 : 0, 1); !e.empty())
    return e;
  if (copy) {
    if (I.ints[0] != 1)
      return cat("int attribute must be 1 (dx's rounded copy), got ", I.ints[0]);
    if (std::string e = hasShape(v.out(outs), v.in(0).shape, "rounded copy"); !e.empty())
      return e;
    if (DType t = p.buffers[I.out[outs]].dtype; t != DType::BF16)
      return cat("rounded copy must be bf16, got ", dtypeName(t));
  }
  if (v.numIn() == 4)
    if (std::string e = first([&] { return hasShape(v.in(3), v.in(0).shape, "addend"); },
                              [&] { return v.sameDType({&v.in(0), &v.in(3)}); });
        !e.empty())
      return e;
  const BufferDesc &x = v.in(0), &w = v.in(1), &dy = v.in(2);
  if (x.shape.empty())
    return "input must have rank >= 1";
  Shape d = {x.shape.back()};
  if (std::string e = first([&] { return hasShape(w, d, "weight"); },
                            [&] { return hasShape(dy, x.shape, "gradient"); },
                            [&] { return v.outShape(x.shape, 0); });
      !e.empty())
    return e;
  for (size_t k = 1; k < outs; ++k)
    if (std::string e = v.outShape(d, k); !e.empty())
      return e;
  for (const BufferDesc *b : {&w, &dy})
    if (std::string e = v.sameDType({&x, b}); !e.empty())
      return e;
  for (size_t k = 0; k < outs + copy; ++k) // the copy is seen as f32 (bf16 storage)
    if (std::string e = v.sameDType({&x, &v.out(k)}); !e.empty())
      return e;
  return v.floatDType(x, "operands");
}

std::string checkAttentionGrad(const OpView &v, const Instr &I) {
  if (std::string e = checkAttentionCall(v, I, 6, 3); !e.empty())
    return e;
  const Shape &q = v.in(0).shape, &k = v.in(1).shape, &val = v.in(2).shape;
  Shape rows = attentionLseShape(v, I), o = attentionOutputShape(v);
  return first(
      [&] { return hasShape(v.in(3), o, "output"); },
      [&] { return hasShape(v.in(4), rows, "lse"); },
      [&] { return hasShape(v.in(5), o, "output gradient"); },
      [&] { return v.outShape(q, 0); }, [&] { return v.outShape(k, 1); },
      [&] { return v.outShape(val, 2); },
      [&] {
        return v.sameDType({&v.in(0), &v.in(1), &v.in(2), &v.in(3), &v.in(5), &v.out(0),
                            &v.out(1), &v.out(2)});
      },
      [&] { return v.floatDType(v.in(0), "operands"); },
      [&] { return checkLseDType(v.in(4), v.in(0)); });
}

std::string checkActivationGrad(const OpView &v, const Instr &I) {
  if (std::string e = v.arity(2, 2, 1, 1, 1, 0); !e.empty())
    return e;
  if (I.ints[0] < 0 || I.ints[0] > 3)
    return cat("ints[0] must be the kind (0 silu, 1 gelu erf, 2 gelu tanh, 3 relu), got ",
               I.ints[0]);
  return first([&] { return hasShape(v.in(1), v.in(0).shape, "gradient"); },
               [&] { return v.sameDType({&v.in(0), &v.in(1), &v.out()}); },
               [&] { return v.floatDType(v.in(0), "operands"); },
               [&] { return v.outShape(v.in(0).shape); });
}

/// SwiGlu (2 -> 1) and SwiGluGrad (3 -> 2): operands of one shape and dtype.
std::string checkSwiGlu(const OpView &v, size_t inputs, size_t outputs) {
  if (std::string e = v.arity(inputs, inputs, outputs, outputs, 0, 0); !e.empty())
    return e;
  DType t = v.in(0).dtype;
  for (size_t k = 1; k < inputs; ++k) {
    if (std::string e = hasShape(v.in(k), v.in(0).shape, k == 1 ? "up" : "gradient"); !e.empty())
      return e;
    if (v.in(k).dtype != t)
      return cat("dtypes differ: ", dtypeName(t), " and ", dtypeName(v.in(k).dtype));
  }
  for (size_t k = 0; k < outputs; ++k) {
    if (std::string e = v.outShape(v.in(0).shape, k); !e.empty())
      return e;
    if (v.out(k).dtype != t)
      return cat("dtypes differ: ", dtypeName(t), " and ", dtypeName(v.out(k).dtype));
  }
  return v.floatDType(v.in(0), "operands");
}

std::string checkSoftmaxGrad(const OpView &v, const Instr &I) {
  return first([&] { return v.arity(2, 2, 1, 1, 1, 0); },
               [&] { return v.axisInRange(I.ints[0], v.in(0).shape.size()); },
               [&] { return hasShape(v.in(1), v.in(0).shape, "gradient"); },
               [&] { return v.sameDType({&v.in(0), &v.in(1), &v.out()}); },
               [&] { return v.floatDType(v.in(0), "operands"); },
               [&] { return v.outShape(v.in(0).shape); });
}

std::string checkCrossEntropyGrad(const OpView &v) {
  if (std::string e = v.arity(3, 3, 1, 2, 0, 0); !e.empty())
    return e;
  if (std::string e = checkLogitsAndTargets(v); !e.empty())
    return e;
  if (v.numOut() == 2) { // the fused loss: CrossEntropy's output
    if (std::string e = checkLossDType(v, v.out(1), "loss output"); !e.empty())
      return e;
    if (std::string e = hasShape(v.out(1), {}, "loss output"); !e.empty())
      return e;
  }
  return first([&] { return hasShape(v.in(2), {}, "loss gradient"); },
               [&] { return v.floatDType(v.in(2), "loss gradient"); },
               [&] { return v.floatDType(v.in(0), "logits"); },
               [&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.outShape(v.in(0).shape); });
}

std::string checkSliceGrad(const OpView &v, const Instr &I) {
  return first([&] { return v.arity(1, 1, 1, 1, kAny, 0); },
               [&] { return checkWindow(I, v.out().shape, v.in(0).shape, "output", "gradient"); },
               [&] { return v.sameDType({&v.in(0), &v.out()}); });
}

/// The collectives: the mesh in ints (see Program.h), the group from the
/// axis mask, and the gathered/scattered dim scaled by the group size.
std::string checkCollective(const OpView &v, const Instr &I) {
  if (std::string e = v.arity(1, 1, 1, 1, kCollectiveInts, 0); !e.empty())
    return e;
  int64_t kind = I.ints[0], dim = I.ints[1], mask = I.ints[2 + kMeshAxes];
  if (I.op != OpCode::AllGather && I.op != OpCode::AllToAll && kind != 0 && kind != 1)
    return cat("reduction kind ", kind, " is neither 0 (sum) nor 1 (mean)");
  int64_t group = 1;
  for (int a = 0; a < kMeshAxes; ++a) {
    int64_t size = I.ints[2 + a];
    if (size < 1)
      return cat("mesh axis ", a, " has size ", size);
    if (mask & (int64_t(1) << a))
      group *= size;
  }
  if (mask <= 0 || mask >= (int64_t(1) << kMeshAxes))
    return cat("axis mask ", mask, " names no mesh axis or an unknown one");
  const BufferDesc &x = v.in(0), &y = v.out();
  if (x.dtype != DType::F32 || y.dtype != DType::F32)
    return cat("collectives move f32, got ", dtypeName(x.dtype), " -> ", dtypeName(y.dtype));
  if (I.op == OpCode::AllReduce)
    return dim == -1 ? v.outShape(x.shape) : cat("all_reduce takes dim -1, got ", dim);
  if (I.op == OpCode::AllToAll) {
    if (std::string e = v.axisInRange(dim, x.shape.size()); !e.empty())
      return e;
    if (x.shape[dim] % group)
      return cat("all_to_all dim ", dim, " of size ", x.shape[dim], " does not divide by the group size ",
                 group);
    return v.outShape(x.shape);
  }
  const Shape &small = I.op == OpCode::AllGather ? x.shape : y.shape;
  const Shape &big = I.op == OpCode::AllGather ? y.shape : x.shape;
  if (std::string e = v.axisInRange(dim, small.size()); !e.empty())
    return e;
  Shape expected = small;
  expected[dim] *= group;
  if (big != expected)
    return cat(I.op == OpCode::AllGather ? "output" : "input", " has shape ", shapeStr(big),
               ", expected ", shapeStr(expected), " (dim ", dim, " times the group size ", group,
               ")");
  return "";
}

std::string checkAdamW(const Program &prog, const OpView &v, const Instr &I) {
  // Optional outputs (RoundedCopies.h): the new parameter stored again,
  // and with ints = [1] its amax, last.
  if (!I.ints.empty() && !adamwKeepsAmax(I))
    return cat("ints must be empty or [1] (an amax output), got ", I.ints.size(),
               " values starting with ", I.ints[0]);
  bool amax = adamwKeepsAmax(I);
  if (std::string e = v.arity(6, 7, amax ? 4 : 3, amax ? 5 : 4, I.ints.size(), 4); !e.empty())
    return e;
  if (amax) {
    const BufferDesc &a = prog.buffers[I.out.back()]; // its own dtype: never bf16 storage
    if (a.shape != Shape{1, 1} || a.dtype != DType::F32)
      return cat("the amax output must be [1, 1] f32, got ", shapeStr(a.shape), " ",
                 dtypeName(a.dtype));
  }
  const Shape &p = v.in(0).shape;
  static const char *names[] = {"param", "grad", "exp_avg", "exp_avg_sq", "lr", "step",
                                "grad_scale"};
  for (size_t k = 0; k < v.numIn(); ++k) {
    if (std::string e = hasShape(v.in(k), k < 4 ? p : Shape{}, names[k]); !e.empty())
      return e;
    if (v.in(k).dtype != DType::F32)
      return cat(names[k], " must be f32, got ", dtypeName(v.in(k).dtype));
  }
  for (size_t k = 0; k < v.numOut() - (amax ? 1 : 0); ++k) {
    if (std::string e = v.outShape(p, k); !e.empty())
      return e;
    if (v.out(k).dtype != DType::F32)
      return cat("output ", k, " must be f32, got ", dtypeName(v.out(k).dtype));
  }
  return "";
}

/// The group size of a collective-layout instruction (ints[2..7]), after
/// checking the mesh sizes and the axis mask; 0 with `err` on a problem.
int64_t meshGroup(const Instr &I, std::string &err) {
  int64_t group = 1, mask = I.ints[2 + kMeshAxes];
  for (int a = 0; a < kMeshAxes; ++a) {
    if (I.ints[2 + a] < 1) {
      err = cat("mesh axis ", a, " has size ", I.ints[2 + a]);
      return 0;
    }
    if (mask & (int64_t(1) << a))
      group *= I.ints[2 + a];
  }
  if (mask <= 0 || mask >= (int64_t(1) << kMeshAxes)) {
    err = cat("axis mask ", mask, " names no mesh axis or an unknown one");
    return 0;
  }
  return group;
}

std::string checkCollectivePermute(const OpView &v, const Instr &I) {
  std::string e = v.arity(1, 1, 1, 1, kCollectiveInts, 0);
  if (e.empty())
    meshGroup(I, e);
  if (!e.empty())
    return e;
  if (v.in(0).dtype != DType::F32 || v.out().dtype != DType::F32)
    return cat("collectives move f32, got ", dtypeName(v.in(0).dtype), " -> ",
               dtypeName(v.out().dtype));
  return v.outShape(v.in(0).shape);
}

std::string checkShardSlice(const OpView &v, const Instr &I) {
  std::string e = v.arity(1, 1, 1, 1, kCollectiveInts, 0);
  int64_t group = e.empty() ? meshGroup(I, e) : 0;
  if (!e.empty())
    return e;
  const Shape &x = v.in(0).shape;
  int64_t dim = I.ints[1];
  if (std::string r = v.axisInRange(dim, x.size()); !r.empty())
    return r;
  if (x[dim] % group)
    return cat("shard_slice dim ", dim, " of size ", x[dim], " does not divide by the group size ",
               group);
  Shape expected = x;
  expected[dim] /= group;
  return first([&] { return v.sameDType({&v.in(0), &v.out()}); },
               [&] { return v.outShape(expected); });
}

/// `first` of the vocabulary-shard ops: one integer element.
std::string checkOffset(const BufferDesc &first) {
  if (!isIndex(first.dtype) || first.numElements() != 1)
    return cat("first must be one i64 or i32 element, got ", shapeStr(first.shape), " ",
               dtypeName(first.dtype));
  return "";
}

std::string checkVocabShardEmbedding(const OpView &v, const Instr &I, bool grad) {
  if (std::string e = v.arity(3, 3, 1, 1, grad ? 0 : 1, 0); !e.empty())
    return e;
  if (!grad && I.ints[0] < v.in(0).shape.at(0))
    return cat("the vocabulary ", I.ints[0], " is smaller than the shard's ", v.in(0).shape.at(0),
               " rows");
  const BufferDesc &ids = v.in(1);
  const BufferDesc &table = grad ? v.out() : v.in(0);
  const BufferDesc &rows = grad ? v.in(0) : v.out();
  if (table.shape.size() != 2)
    return cat("table must be [Vl, D], got ", shapeStr(table.shape));
  if (!isIndex(ids.dtype))
    return cat("ids must be i64 or i32, got ", dtypeName(ids.dtype));
  Shape expected = ids.shape;
  expected.push_back(table.shape[1]);
  if (rows.shape != expected)
    return cat(grad ? "gradient" : "output", " has shape ", shapeStr(rows.shape), ", expected ",
               shapeStr(expected));
  return first([&] { return checkOffset(v.in(2)); },
               [&] { return v.sameDType({&table, &rows}); },
               [&] { return v.floatDType(table, "table"); });
}

std::string checkVocabShardCrossEntropy(const OpView &v, const Instr &I, bool grad) {
  if (std::string e = grad ? v.arity(6, 6, 1, 1, 0, 0) : v.arity(4, 4, 2, 2, 1, 0); !e.empty())
    return e;
  const Shape &logits = v.in(0).shape;
  if (logits.size() != 2 || logits[0] == 0 || logits[1] == 0)
    return cat("logits ", shapeStr(logits), " must be [N, Vl] with N, Vl > 0");
  if (!grad && I.ints[0] < logits[1])
    return cat("the vocabulary ", I.ints[0], " is smaller than the shard's ", logits[1],
               " columns");
  if (!isIndex(v.in(1).dtype) || v.in(1).shape != Shape{logits[0]})
    return cat("targets must be [", logits[0], "] i64 or i32, got ", shapeStr(v.in(1).shape), " ",
               dtypeName(v.in(1).dtype));
  if (std::string e = checkOffset(v.in(2)); !e.empty())
    return e;
  const Shape row = {logits[0]};
  std::vector<const BufferDesc *> rows = {&v.in(3)};
  if (grad)
    rows.insert(rows.end(), {&v.in(4), &v.in(5)});
  else
    rows.insert(rows.end(), {&v.out(0), &v.out(1)});
  for (const BufferDesc *b : rows) {
    if (b->shape != row)
      return cat("row tensors must be [", logits[0], "], got ", shapeStr(b->shape));
    if (b->dtype != v.in(0).dtype)
      return cat("dtypes differ: ", dtypeName(v.in(0).dtype), " and ", dtypeName(b->dtype));
  }
  return first([&] { return v.floatDType(v.in(0), "logits"); },
               [&] { return grad ? v.outShape(logits) : std::string(); },
               [&] { return grad ? v.sameDType({&v.in(0), &v.out()}) : std::string(); });
}

} // namespace

bool bf16StorageAllowed(OpCode op, bool output, size_t slot) {
  switch (op) {
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::Pow: case OpCode::Max: case OpCode::Min:
    return output ? slot == 0 : slot < 2;
  case OpCode::Neg: case OpCode::Sqrt: case OpCode::Rsqrt: case OpCode::Reciprocal:
  case OpCode::Exp: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Silu:
  case OpCode::GeluTanh: case OpCode::GeluErf: case OpCode::Cos: case OpCode::Sin:
  case OpCode::Log: case OpCode::Transpose: case OpCode::Rotary: case OpCode::RotaryGrad:
  case OpCode::Relu: case OpCode::Erf: case OpCode::Softplus:
  case OpCode::RmsNorm: case OpCode::LayerNorm:
    return slot == 0;
  case OpCode::ActivationGrad: return output ? slot == 0 : slot < 2;
  case OpCode::SwiGlu: case OpCode::SwiGluGrad: return true;
  // x (a bf16 product's output under per-head q/k norms) and dy; dx and
  // its rounded copy (storesRoundedDx). The weight and the weight
  // gradients stay f32.
  case OpCode::RmsNormGrad: return output ? slot == 0 || slot == 2 : slot == 0 || slot == 2;
  case OpCode::LayerNormGrad: return output ? slot == 0 || slot == 3 : slot == 0 || slot == 2;
  // a and b (the residual and the sublayer's output); y. The sum the norm
  // reads stays f32.
  case OpCode::AddRmsNorm: return output ? slot == 1 : slot < 2;
  case OpCode::SumSquares: return !output && slot == 0;
  case OpCode::GlobalSumSquares: return !output;
  case OpCode::Reduce: return !output && slot == 0; // a bias gradient's bf16 dy
  // The gradient; the rounded copy of the new parameter (RoundedCopies.h).
  case OpCode::AdamW: return output ? slot == 3 : slot == 1;
  // Never lse (output 1 of Attention, input 4 of AttentionGrad): P =
  // exp(s - lse) moves by lse's absolute error, and an lse near log S = 7
  // rounded to bf16 is off by up to 2^-6, which is 1.6% of every P.
  case OpCode::Attention: return output ? slot == 0 : slot < 3; // q, k, v -> o
  case OpCode::AttentionGrad: // q, k, v, o, dy -> dq, dk, dv
    return output ? slot < 3 : slot < 6 && slot != 4;
  case OpCode::CrossEntropy: return !output && slot == 0;   // the logits
  case OpCode::CrossEntropyGrad: return slot == 0;          // logits; their gradient
  case OpCode::EmbeddingGrad: return !output && slot == 2;  // a tied head's bf16 gradient
  default: return false;
  }
}

bool matMulAccumulates(const Program &p, const Instr &I) {
  return I.op == OpCode::MatMul && I.in.size() == 3 && isMatMulAddend(p.buffers[I.in[2]].shape);
}

const char *matMulThirdInput(const Program &p, const Instr &I) {
  if (I.op != OpCode::MatMul || I.in.size() < 3)
    return "";
  return matMulAccumulates(p, I) ? "addend" : "bias";
}

bool storesRoundedDx(const Instr &I) {
  // Any int attribute claims the extra output (validate() insists on [1]),
  // so that a malformed flag is reported as such, not as a bad amax.
  return (I.op == OpCode::RmsNormGrad || I.op == OpCode::LayerNormGrad) && !I.ints.empty();
}

bool usesBf16Storage(const Program &p, const Instr &I) {
  for (size_t k = 0; k < I.in.size(); ++k)
    if (p.buffers[I.in[k]].dtype == DType::BF16 && bf16StorageAllowed(I.op, false, k))
      return true;
  for (size_t k = 0; k < I.out.size(); ++k)
    if (p.buffers[I.out[k]].dtype == DType::BF16 && bf16StorageAllowed(I.op, true, k))
      return true;
  return false;
}

std::string checkOpShapes(const Program &p, const Instr &I) {
  // Fused amax outputs (Fp8Amax.h): checked on their own, then the rest as usual.
  if (fusedAmaxCount(I)) {
    if (std::string e = checkFusedAmax(p, I); !e.empty())
      return e;
    return checkOpShapes(p, withoutFusedAmax(I));
  }
  OpView v(p, I);
  // Arity comes first in every check, so operands can be indexed after it.
  switch (I.op) {
  case OpCode::Embedding: return checkEmbedding(v);
  case OpCode::MatMul: return checkMatMul(v, I);
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::Pow: case OpCode::Max: case OpCode::Min:
    return checkBinary(v);
  case OpCode::Where: return checkWhere(v);
  case OpCode::Neg: case OpCode::Sqrt: case OpCode::Rsqrt: case OpCode::Reciprocal:
  case OpCode::Exp: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Silu:
  case OpCode::GeluTanh: case OpCode::GeluErf: case OpCode::Cos: case OpCode::Sin:
  case OpCode::Log: case OpCode::Relu: case OpCode::Erf: case OpCode::Softplus:
    return checkUnary(v);
  case OpCode::Cast: return checkCast(v);
  case OpCode::Reduce: return checkReduce(v, I);
  case OpCode::Softmax: return checkSoftmax(v, I);
  case OpCode::RmsNorm: return checkNorm(v, 2, I);
  case OpCode::AddRmsNorm: return checkAddRmsNorm(v);
  case OpCode::LayerNorm: return checkNorm(v, 3, I);
  case OpCode::Rotary: return checkRotary(v);
  case OpCode::Attention: return checkAttention(v, I);
  case OpCode::SumSquares: return checkSumSquares(v);
  case OpCode::GlobalSumSquares: return checkGlobalSumSquares(v);
  case OpCode::Transpose: return checkTranspose(v, I);
  case OpCode::Slice: return checkSlice(v, I);
  case OpCode::Concat: return checkConcat(v, I);
  case OpCode::Split: return checkSplit(v, I);
  case OpCode::Expand: return checkExpand(v);
  case OpCode::CrossEntropy: return checkCrossEntropy(v);
  case OpCode::EmbeddingGrad: return checkEmbeddingGrad(v);
  case OpCode::RmsNormGrad: return checkNormGrad(p, v, I, 2);
  case OpCode::LayerNormGrad: return checkNormGrad(p, v, I, 3);
  case OpCode::AttentionGrad: return checkAttentionGrad(v, I);
  case OpCode::RotaryGrad: return checkRotary(v); // same operands as Rotary
  case OpCode::ActivationGrad: return checkActivationGrad(v, I);
  case OpCode::SwiGlu: return checkSwiGlu(v, 2, 1);
  case OpCode::SwiGluGrad: return checkSwiGlu(v, 3, 2);
  case OpCode::SoftmaxGrad: return checkSoftmaxGrad(v, I);
  case OpCode::CrossEntropyGrad: return checkCrossEntropyGrad(v);
  case OpCode::SliceGrad: return checkSliceGrad(v, I);
  case OpCode::AdamW: return checkAdamW(p, v, I);
  case OpCode::AllReduce: case OpCode::AllGather: case OpCode::ReduceScatter:
  case OpCode::AllToAll:
    return checkCollective(v, I);
  case OpCode::CollectivePermute: return checkCollectivePermute(v, I);
  case OpCode::ShardSlice: return checkShardSlice(v, I);
  case OpCode::VocabShardEmbedding: return checkVocabShardEmbedding(v, I, false);
  case OpCode::VocabShardEmbeddingGrad: return checkVocabShardEmbedding(v, I, true);
  case OpCode::VocabShardCrossEntropy: return checkVocabShardCrossEntropy(v, I, false);
  case OpCode::VocabShardCrossEntropyGrad: return checkVocabShardCrossEntropy(v, I, true);
  case OpCode::Fp8Scale: case OpCode::Fp8Cast: case OpCode::ScaledMatMul:
  case OpCode::Fp8Amax:
    return checkFp8OpShapes(p, I);
  }
  return cat("unknown opcode ", int(I.op));
}

} // namespace loom::rt
