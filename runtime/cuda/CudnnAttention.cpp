//===- CudnnAttention.cpp - Causal attention through cuDNN's SDPA ---------===//
//
// Part of loom, under the Apache License v2.0.
//
// cuDNN has no single "attention" call in the versions the GPU machines
// carry (9.14): its fused flash-attention engines are found by the engine
// heuristics when an operation graph has the shape of attention. So this
// file writes that graph out of primitive operations (matmul, pointwise,
// reduction, reshape), with virtual tensors for everything that stays on
// chip, and lets cuDNN's heuristics pick the engine.
//
// Forward (S and P never reach memory):
//   S = Q K^T * scale;  S = causal ? S : -inf          (gen_index rows/cols, cmp_ge, select)
//   m = rowmax S;  E = exp(S - m);  l = rowsum E
//   lse = m + log l  (stored);  O = (E / l) V          (stored, bf16)
// Backward, from the forward's O and lse:
//   delta = rowsum(dO * O)          (f32, stored in the workspace)
//   P = exp(S - lse)  (S as above, masked)
//   dV = P^T dO;  dP = dO V^T;  dS = P (dP - delta) * scale
//   dK = dS^T Q;  dQ = dS K         (dQ accumulated in f32 in the workspace)
// With grouped-query heads the dK and dV products run per query head and
// a reduction over each group's heads gives the kv head's gradient.
// Tokens-major operands (SdpaShape::tokensMajor) keep the same dims and
// take [B, T, H, D] memory's strides, so the engines read and write them in
// place, as cudnn-frontend binds strided q, k, v; everything else (scores,
// lse, delta, the dQ accumulator) is contiguous in both layouts.
//
// The library is opened with dlopen, so a loom built here runs on machines
// without it; every entry point comes from the one handle.
//===----------------------------------------------------------------------===//
#include "cuda/CudnnAttention.h"
#include "cuda/CudaKernels.h"

#if __has_include(<cudnn_graph.h>)
#include <cudnn_graph.h>
#define LOOM_HAVE_CUDNN_HEADERS 1
#endif

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace loom::rt::cuda {

#ifndef LOOM_HAVE_CUDNN_HEADERS

std::unique_ptr<CudnnAttention> CudnnAttention::create(std::string &why) {
  why = "loom was built without cuDNN's headers";
  return nullptr;
}

size_t CudnnAttention::auxiliaryBytes(const SdpaShape &, bool) { return 0; }

#else

namespace {

/// The entry points loom calls, looked up once.
struct CudnnApi {
  decltype(&cudnnGetVersion) getVersion = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) setStream = nullptr;
  decltype(&cudnnGetErrorString) errorString = nullptr;
  decltype(&cudnnGetLastErrorString) lastError = nullptr;
  decltype(&cudnnBackendCreateDescriptor) createDescriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroyDescriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) setAttribute = nullptr;
  decltype(&cudnnBackendGetAttribute) getAttribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
  std::string error; // why the library is unusable, "" when it is
};

const CudnnApi &api() {
  static const CudnnApi a = [] {
    CudnnApi r;
    void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      r.error = std::string("cannot open libcudnn.so.9: ") + dlerror();
      return r;
    }
    bool missing = false;
    auto load = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && !missing) {
        missing = true;
        r.error = std::string("libcudnn.so.9 lacks ") + name;
      }
    };
    load(r.getVersion, "cudnnGetVersion");
    load(r.create, "cudnnCreate");
    load(r.destroy, "cudnnDestroy");
    load(r.setStream, "cudnnSetStream");
    load(r.errorString, "cudnnGetErrorString");
    load(r.lastError, "cudnnGetLastErrorString");
    load(r.createDescriptor, "cudnnBackendCreateDescriptor");
    load(r.destroyDescriptor, "cudnnBackendDestroyDescriptor");
    load(r.setAttribute, "cudnnBackendSetAttribute");
    load(r.getAttribute, "cudnnBackendGetAttribute");
    load(r.finalize, "cudnnBackendFinalize");
    load(r.execute, "cudnnBackendExecute");
    if (!missing && r.getVersion() < 90000)
      r.error = "libcudnn.so.9 reports version " + std::to_string(r.getVersion());
    return r;
  }();
  return a;
}

/// A failed cuDNN call: `what` and the library's own message.
[[noreturn]] void fail(const std::string &what, cudnnStatus_t s) {
  char detail[512] = "";
  api().lastError(detail, sizeof detail);
  std::string msg = what + ": " + api().errorString(s);
  if (*detail)
    msg += std::string(" (") + detail + ")";
  throw std::runtime_error(msg);
}

void check(cudnnStatus_t s, const char *what) {
  if (s != CUDNN_STATUS_SUCCESS)
    fail(what, s);
}

/// An owned backend descriptor.
class Desc {
public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check(api().createDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_)
      api().destroyDescriptor(d_);
  }
  Desc(const Desc &) = delete;
  Desc &operator=(const Desc &) = delete;
  Desc() = default;
  Desc(Desc &&o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc &operator=(Desc &&o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }

  cudnnBackendDescriptor_t get() const { return d_; }

  Desc &set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
            const void *values) {
    check(api().setAttribute(d_, name, type, n, values), "cudnnBackendSetAttribute");
    return *this;
  }
  Desc &set(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t d) {
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  Desc &setInt(cudnnBackendAttributeName_t name, int64_t v) {
    return set(name, CUDNN_TYPE_INT64, 1, &v);
  }
  Desc &setType(cudnnBackendAttributeName_t name, cudnnDataType_t t) {
    return set(name, CUDNN_TYPE_DATA_TYPE, 1, &t);
  }
  Desc &finalize(const char *what) {
    check(api().finalize(d_), what);
    return *this;
  }

private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Dims = std::vector<int64_t>;

/// Row-major strides of `dims`.
Dims contiguous(const Dims &dims) {
  Dims s(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) s[i - 1] = s[i] * dims[i];
  return s;
}

/// The strides of an operand of heads-major dims [B, H, T, D] (H = `heads`)
/// as `a` stores it: contiguous, or tokens-major ([B, T, H, D] memory).
Dims operandStrides(const SdpaShape &a, int64_t heads) {
  const int64_t T = a.T, D = a.D;
  return a.tokensMajor ? Dims{T * heads * D, D, heads * D, 1} : contiguous({a.B, heads, T, D});
}

/// The same operand's memory read as its transpose [B, H, D, T].
Dims transposedStrides(const SdpaShape &a, int64_t heads) {
  Dims s = operandStrides(a, heads);
  return {s[0], s[1], s[3], s[2]};
}

/// An operation graph under construction: tensors and operations in
/// creation (topological) order, all kept alive until the plan is built.
class GraphBuilder {
public:
  /// A tensor in memory (or, `byValue`, a host scalar) under a given uid.
  cudnnBackendDescriptor_t io(int64_t uid, const Dims &dims, const Dims &strides,
                              cudnnDataType_t type, bool byValue = false) {
    return tensor(uid, dims, strides, type, false, byValue);
  }
  /// A tensor that stays inside the fused kernel.
  cudnnBackendDescriptor_t virt(const Dims &dims, const Dims &strides, cudnnDataType_t type) {
    return tensor(nextVirtual_++, dims, strides, type, true, false);
  }

  /// y = mode(x[, b[, t]]) element-wise (b broadcast); `axis` for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b = nullptr, cudnnBackendDescriptor_t t = nullptr,
                 cudnnDataType_t math = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc &pw = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .setType(CUDNN_ATTR_POINTWISE_MATH_PREC, math);
    if (axis >= 0)
      pw.setInt(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize("pointwise descriptor");
    Desc &op = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    float one = 1.f;
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get())
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b)
      op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t)
      op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    addOp(op, "pointwise operation");
  }

  /// y = reduce(x) over the dims where y has extent 1 (or fewer heads).
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t y,
                 cudnnBackendDescriptor_t x) {
    Desc &red = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
        .setType(CUDNN_ATTR_REDUCTION_COMP_TYPE, f32)
        .finalize("reduction descriptor");
    Desc &op = keep(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red.get())
        .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    addOp(op, "reduction operation");
  }

  /// c = a b, batched over the leading dims, accumulated in f32.
  void matmul(cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t a,
              cudnnBackendDescriptor_t b) {
    Desc &mm = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    mm.setType(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).finalize("matmul descriptor");
    Desc &op = keep(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm.get());
    addOp(op, "matmul operation");
  }

  /// y = x viewed with y's dims and strides (a transpose, here).
  void reshape(cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t x) {
    Desc &op = keep(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    addOp(op, "reshape operation");
  }

  /// The finalized operation graph on `handle`.
  Desc graph(cudnnHandle_t handle) {
    Desc g(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    g.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops_.size()),
             ops_.data())
        .finalize("operation graph");
    return g;
  }

private:
  Desc &keep(cudnnBackendDescriptorType_t type) { return owned_.emplace_back(type); }
  void addOp(Desc &op, const char *what) {
    op.finalize(what);
    ops_.push_back(op.get());
  }
  cudnnBackendDescriptor_t tensor(int64_t uid, const Dims &dims, const Dims &strides,
                                  cudnnDataType_t type, bool isVirtual, bool byValue) {
    Desc &t = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.setType(CUDNN_ATTR_TENSOR_DATA_TYPE, type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, int64_t(dims.size()), dims.data())
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, int64_t(strides.size()), strides.data())
        .setInt(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .setInt(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual);
    if (byValue)
      t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValue);
    t.finalize("tensor descriptor");
    return t.get();
  }

  std::deque<Desc> owned_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t nextVirtual_ = 1000;
};

// Unique ids of the tensors a launch binds.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kLse, kScale, kNegInf, kOne, kDO, kDQ, kDK, kDV, kDelta, kDQAccum,
};

/// The attention scores' masked, scaled form: (q k^T) * scale with keys
/// after the query set to -inf. `s` is the raw product [B, Hq, T, T].
cudnnBackendDescriptor_t maskedScores(GraphBuilder &g, cudnnBackendDescriptor_t s,
                                      cudnnBackendDescriptor_t scale,
                                      cudnnBackendDescriptor_t negInf, const Dims &sd,
                                      const Dims &ss, bool subtractLse,
                                      cudnnBackendDescriptor_t lse) {
  auto scaled = g.virt(sd, ss, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, scaled, s, scale);
  if (subtractLse) {
    auto shifted = g.virt(sd, ss, CUDNN_DATA_FLOAT);
    g.pointwise(CUDNN_POINTWISE_SUB, shifted, scaled, lse);
    scaled = shifted;
  }
  auto row = g.virt(sd, ss, CUDNN_DATA_INT32), col = g.virt(sd, ss, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, row, scaled, nullptr, nullptr, CUDNN_DATA_FLOAT, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, col, scaled, nullptr, nullptr, CUDNN_DATA_FLOAT, 3);
  auto visible = g.virt(sd, ss, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, visible, row, col, nullptr, CUDNN_DATA_BOOLEAN);
  auto masked = g.virt(sd, ss, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, masked, scaled, negInf, visible);
  return masked;
}

/// Builds the forward graph of `a` (see the file comment).
void buildForward(GraphBuilder &g, const SdpaShape &a) {
  const int64_t B = a.B, H = a.Hq, G = a.Hkv, T = a.T, D = a.D;
  const Dims one{1, 1, 1, 1};
  auto bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  auto q = g.io(kQ, {B, H, T, D}, operandStrides(a, H), bf16);
  // K^T: k's memory read as [B, G, D, T].
  auto kt = g.io(kK, {B, G, D, T}, transposedStrides(a, G), bf16);
  auto v = g.io(kV, {B, G, T, D}, operandStrides(a, G), bf16);
  auto scale = g.io(kScale, one, one, f32, true);
  auto negInf = g.io(kNegInf, one, one, f32, true);
  const Dims sd{B, H, T, T}, ss = contiguous(sd), rd{B, H, T, 1}, rs = contiguous(rd);
  auto s = g.virt(sd, ss, f32);
  g.matmul(s, q, kt);
  auto masked = maskedScores(g, s, scale, negInf, sd, ss, false, nullptr);
  auto mx = g.virt(rd, rs, f32);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, mx, masked);
  auto shifted = g.virt(sd, ss, f32), e = g.virt(sd, ss, f32);
  g.pointwise(CUDNN_POINTWISE_SUB, shifted, masked, mx);
  g.pointwise(CUDNN_POINTWISE_EXP, e, shifted);
  auto sum = g.virt(rd, rs, f32), logSum = g.virt(rd, rs, f32);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, sum, e);
  g.pointwise(CUDNN_POINTWISE_LOG, logSum, sum);
  auto lse = g.io(kLse, rd, rs, f32);
  g.pointwise(CUDNN_POINTWISE_ADD, lse, mx, logSum);
  // The engines take the second product's operands in one type: P is
  // rounded to bf16 on chip, as FlashAttention does.
  auto p = g.virt(sd, ss, bf16);
  g.pointwise(CUDNN_POINTWISE_DIV, p, e, sum);
  auto o = g.io(kO, {B, H, T, D}, operandStrides(a, H), bf16);
  g.matmul(o, p, v);
}

/// out (a kv head's gradient, bf16) = lhs rhs per query head, summed over
/// each group of query heads when there are fewer kv heads (`full` is the
/// per-query-head product's shape and strides).
void groupedProduct(GraphBuilder &g, cudnnBackendDescriptor_t out, cudnnBackendDescriptor_t lhs,
                    cudnnBackendDescriptor_t rhs, bool grouped, const Dims &fullDims,
                    const Dims &fullStrides) {
  if (!grouped) {
    g.matmul(out, lhs, rhs);
    return;
  }
  auto full = g.virt(fullDims, fullStrides, CUDNN_DATA_BFLOAT16);
  g.matmul(full, lhs, rhs);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, out, full);
}

/// Builds the backward graph of `a` (see the file comment).
void buildBackward(GraphBuilder &g, const SdpaShape &a) {
  const int64_t B = a.B, H = a.Hq, G = a.Hkv, T = a.T, D = a.D;
  const Dims one{1, 1, 1, 1};
  auto bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  // Operands in memory take the layout's strides (qs, ks, kts); what stays
  // on chip, and delta and the dQ accumulator in the workspace, are
  // contiguous (qc).
  const Dims qd{B, H, T, D}, qs = operandStrides(a, H), qc = contiguous(qd), kd{B, G, T, D},
             ks = operandStrides(a, G);
  const Dims ktd{B, G, D, T}, kts = transposedStrides(a, G);
  auto q = g.io(kQ, qd, qs, bf16);
  auto kt = g.io(kK, ktd, kts, bf16);
  auto vt = g.io(kV, ktd, kts, bf16);
  auto o = g.io(kO, qd, qs, bf16);
  auto dO = g.io(kDO, qd, qs, bf16);
  auto scale = g.io(kScale, one, one, f32, true);
  auto negInf = g.io(kNegInf, one, one, f32, true);
  auto unit = g.io(kOne, one, one, f32, true);
  const Dims sd{B, H, T, T}, ss = contiguous(sd), rd{B, H, T, 1}, rs = contiguous(rd);
  // Transposed views of score-shaped tensors: [B, H, keys, queries].
  const Dims sts{H * T * T, T * T, 1, T};
  auto lse = g.io(kLse, rd, rs, f32);

  // delta = rowsum(dO * O), kept in the workspace for every key tile.
  auto dOO = g.virt(qd, qc, f32), rowDot = g.virt(rd, rs, f32);
  g.pointwise(CUDNN_POINTWISE_MUL, dOO, dO, o);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, rowDot, dOO);
  auto delta = g.io(kDelta, rd, rs, f32);
  g.pointwise(CUDNN_POINTWISE_MUL, delta, rowDot, unit);

  // P = exp(scale q k^T - lse), masked.
  auto s = g.virt(sd, ss, f32);
  g.matmul(s, q, kt);
  auto masked = maskedScores(g, s, scale, negInf, sd, ss, true, lse);
  auto p = g.virt(sd, ss, f32);
  g.pointwise(CUDNN_POINTWISE_EXP, p, masked);

  // dV = P^T dO (per query head, then summed over each group).
  auto pt = g.virt(sd, sts, bf16);
  g.reshape(pt, p);
  groupedProduct(g, g.io(kDV, kd, ks, bf16), pt, dO, H != G, qd, qc);

  // dS = P (dO V^T - delta) * scale.
  auto dP = g.virt(sd, ss, f32), centered = g.virt(sd, ss, f32), pdP = g.virt(sd, ss, f32);
  g.matmul(dP, dO, vt);
  g.pointwise(CUDNN_POINTWISE_SUB, centered, dP, delta);
  g.pointwise(CUDNN_POINTWISE_MUL, pdP, centered, p);
  auto dS = g.virt(sd, ss, f32);
  g.pointwise(CUDNN_POINTWISE_MUL, dS, pdP, scale);

  // dK = dS^T Q (per query head, then summed over each group).
  auto dSt = g.virt(sd, sts, bf16);
  g.reshape(dSt, dS);
  groupedProduct(g, g.io(kDK, kd, ks, bf16), dSt, q, H != G, qd, qc);

  // dQ = dS K, accumulated in f32 (workspace), then rounded to bf16.
  auto k = g.virt(kd, ks, f32);
  g.reshape(k, kt);
  auto dqAccum = g.io(kDQAccum, qd, qc, f32);
  g.matmul(dqAccum, dS, k);
  auto dq = g.io(kDQ, qd, qs, bf16);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq, dqAccum);
}

/// A built plan and what its launches bind.
struct Plan {
  SdpaShape shape;
  bool backward = false;
  Desc plan;           // null for a shape cuDNN refused
  std::string refused; // why, for a refused shape
  size_t workspaceBytes = 0;
};

/// The workspace ahead of the engine's own part: for the backward, delta
/// (one f32 per query row), then the f32 dQ accumulator; each 256-byte
/// aligned. `engine` is where the engine's part starts.
struct AuxLayout {
  size_t dqAccum = 0, dqAccumBytes = 0, engine = 0; // delta at 0
};

AuxLayout auxLayout(const SdpaShape &s, bool backward) {
  AuxLayout l;
  if (backward) {
    l.dqAccum = align256(size_t(s.B * s.Hq * s.T) * sizeof(float));
    l.dqAccumBytes = size_t(s.B * s.Hq * s.T * s.D) * sizeof(float);
    l.engine = l.dqAccum + align256(l.dqAccumBytes);
  }
  return l;
}

bool sameShape(const SdpaShape &a, const SdpaShape &b) {
  return a.B == b.B && a.Hq == b.Hq && a.Hkv == b.Hkv && a.T == b.T && a.D == b.D &&
         a.scale == b.scale && a.tokensMajor == b.tokensMajor;
}

class CudnnAttentionImpl final : public CudnnAttention {
public:
  explicit CudnnAttentionImpl(cudnnHandle_t h) : handle_(h) {}
  ~CudnnAttentionImpl() override {
    plans_.clear();
    api().destroy(handle_);
  }

  size_t version() const override { return api().getVersion(); }
  size_t workspaceBytes(int id) const override { return plans_.at(size_t(id)).workspaceBytes; }

  int plan(const SdpaShape &s, bool backward, size_t &workspaceBytes,
           std::string &why) override {
    // Every layer has the same shape: one plan (or one refusal) serves all.
    for (size_t i = 0; i < plans_.size(); ++i)
      if (plans_[i].backward == backward && sameShape(plans_[i].shape, s))
        return result(i, workspaceBytes, why);
    Plan &p = plans_.emplace_back();
    p.shape = s;
    p.backward = backward;
    if (s.Hkv <= 0 || s.Hq % s.Hkv != 0 || s.D % 8 != 0 || s.D > 128) {
      p.refused = "cuDNN's fused attention takes head dims of multiples of 8 up to 128";
      return result(plans_.size() - 1, workspaceBytes, why);
    }
    try {
      GraphBuilder g;
      if (backward)
        buildBackward(g, s);
      else
        buildForward(g, s);
      Desc graph = g.graph(handle_);
      Desc chosen;
      if (pickEngine(graph, chosen, backward, p.refused)) {
        int64_t engineBytes = 0;
        api().getAttribute(chosen.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                           CUDNN_TYPE_INT64, 1, nullptr, &engineBytes);
        p.workspaceBytes = auxLayout(s, backward).engine + align256(size_t(engineBytes));
        p.plan = std::move(chosen);
      }
    } catch (const std::exception &e) {
      p.refused = e.what();
    }
    return result(plans_.size() - 1, workspaceBytes, why);
  }

  bool forward(int id, const void *q, const void *k, const void *v, void *o, float *lse,
               void *workspace, cudaStream_t stream, std::string &err) override {
    const Plan &p = plans_.at(size_t(id));
    float scale = p.shape.scale, negInf = -INFINITY;
    std::vector<int64_t> uids{kQ, kK, kV, kO, kLse, kScale, kNegInf};
    std::vector<void *> ptrs{const_cast<void *>(q), const_cast<void *>(k), const_cast<void *>(v),
                             o, lse, &scale, &negInf};
    return run(p, uids, ptrs, workspace, stream, err);
  }

  bool backward(int id, const void *q, const void *k, const void *v, const void *o,
                const float *lse, const void *dy, void *dq, void *dk, void *dv, void *workspace,
                cudaStream_t stream, std::string &err) override {
    const Plan &p = plans_.at(size_t(id));
    float scale = p.shape.scale, negInf = -INFINITY, one = 1.f;
    auto *ws = static_cast<char *>(workspace);
    AuxLayout aux = auxLayout(p.shape, true);
    // Before 9.6 the engines expected a zeroed dQ accumulator.
    if (version() < 90600 &&
        cudaMemsetAsync(ws + aux.dqAccum, 0, aux.dqAccumBytes, stream) != cudaSuccess) {
      err = "cannot clear cuDNN's dQ accumulator";
      return false;
    }
    std::vector<int64_t> uids{kQ,  kK,  kV,  kO,     kLse,    kDO,     kDQ,
                              kDK, kDV, kScale, kNegInf, kOne, kDelta, kDQAccum};
    std::vector<void *> ptrs{const_cast<void *>(q),   const_cast<void *>(k),
                             const_cast<void *>(v),   const_cast<void *>(o),
                             const_cast<float *>(lse), const_cast<void *>(dy),
                             dq, dk, dv, &scale, &negInf, &one,
                             ws, ws + aux.dqAccum};
    return run(p, uids, ptrs, workspace, stream, err);
  }

private:
  /// plan()'s answer for plans_[i]: its id and workspace, or -1 and why.
  int result(size_t i, size_t &workspaceBytes, std::string &why) const {
    const Plan &p = plans_[i];
    if (!p.plan.get()) {
      why = p.refused;
      return -1;
    }
    workspaceBytes = p.workspaceBytes;
    return int(i);
  }

  /// The first engine configuration cuDNN's heuristics rank that finalizes
  /// into a plan for this device. LOOM_CUDNN_ENGINE=k takes the k-th one
  /// that finalizes instead (0 is the default) and reports on stderr how
  /// many the heuristics ranked and finalized: for timing the alternatives.
  bool pickEngine(const Desc &graph, Desc &plan, bool backward, std::string &why) {
    std::string tried;
    const char *pick = std::getenv("LOOM_CUDNN_ENGINE");
    const int64_t want = pick ? std::max(0, std::atoi(pick)) : 0;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      cudnnBackendDescriptor_t gd = graph.get();
      heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, gd)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
      if (api().finalize(heur.get()) != CUDNN_STATUS_SUCCESS)
        continue;
      int64_t count = 0;
      api().getAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                         0, &count, nullptr);
      if (count <= 0)
        continue;
      std::deque<Desc> configs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i)
        raw.push_back(configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
      int64_t got = 0;
      if (api().getAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()) !=
          CUDNN_STATUS_SUCCESS)
        continue;
      std::vector<Desc> finalized;
      for (int64_t i = 0; i < got && (pick || finalized.empty()); ++i) {
        Desc candidate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        candidate.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_)
            .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[size_t(i)]);
        cudnnStatus_t st = api().finalize(candidate.get());
        if (st == CUDNN_STATUS_SUCCESS) {
          finalized.push_back(std::move(candidate));
          continue;
        }
        char detail[256] = "";
        api().lastError(detail, sizeof detail);
        tried = std::string(api().errorString(st)) + (*detail ? std::string(": ") + detail : "");
      }
      if (pick)
        std::fprintf(stderr, "loom cudnn attention %s: heuristics mode %s ranked %lld engine configs, "
                     "%zu finalize; taking #%lld\n", backward ? "backward" : "forward",
                     mode == CUDNN_HEUR_MODE_A ? "A" : "fallback", (long long)got, finalized.size(),
                     (long long)std::min<int64_t>(want, int64_t(finalized.size()) - 1));
      if (!finalized.empty()) {
        plan = std::move(finalized[size_t(std::min<int64_t>(want, int64_t(finalized.size()) - 1))]);
        return true;
      }
    }
    why = "no cuDNN engine runs this attention graph" + (tried.empty() ? "" : " (" + tried + ")");
    return false;
  }

  bool run(const Plan &p, const std::vector<int64_t> &uids, std::vector<void *> &ptrs,
           void *workspace, cudaStream_t stream, std::string &err) {
    try {
      check(api().setStream(handle_, stream), "cudnnSetStream");
      Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      void *engineWs = static_cast<char *>(workspace) + auxLayout(p.shape, p.backward).engine;
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()),
               uids.data())
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
               ptrs.data())
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &engineWs)
          .finalize("variant pack");
      check(api().execute(handle_, p.plan.get(), pack.get()), "cudnnBackendExecute");
      return true;
    } catch (const std::exception &e) {
      err = e.what();
      return false;
    }
  }

  cudnnHandle_t handle_;
  std::deque<Plan> plans_;
};

} // namespace

size_t CudnnAttention::auxiliaryBytes(const SdpaShape &s, bool backward) {
  return auxLayout(s, backward).engine;
}

std::unique_ptr<CudnnAttention> CudnnAttention::create(std::string &why) {
  if (const char *env = std::getenv("LOOM_CUDNN"); env && std::strcmp(env, "0") == 0) {
    why = "LOOM_CUDNN=0";
    return nullptr;
  }
  const CudnnApi &a = api();
  if (!a.error.empty()) {
    why = a.error;
    return nullptr;
  }
  cudnnHandle_t h = nullptr;
  if (cudnnStatus_t s = a.create(&h); s != CUDNN_STATUS_SUCCESS) {
    why = std::string("cudnnCreate: ") + a.errorString(s);
    return nullptr;
  }
  return std::make_unique<CudnnAttentionImpl>(h);
}

#endif // LOOM_HAVE_CUDNN_HEADERS

} // namespace loom::rt::cuda
