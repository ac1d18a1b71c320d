//===- FuseAttention.cpp - eager attention to loom.attention --------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Exporters emit attention as two matmuls around a softmax, with the scale
// as a multiply, the causal mask as an added constant (after the mask
// subgraph folds), and grouped-query heads as an unsqueeze/expand/reshape
// of k and v (HF's repeat_kv). This pass recognizes that shape and builds
// one attention op, which later lowers to a flash-style kernel. A mask that
// also hides keys a window behind (sliding-window attention) becomes the
// op's `window`, and Gemma 2's capped scores, softcap tanh(x / softcap),
// its `softcap`.
//===----------------------------------------------------------------------===//
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"

namespace {

/// Undoes repeat_kv: reshape([B, H*rep, T, D]) of expand([B, H, rep, T, D])
/// of reshape([B, H, 1, T, D]) of x [B, H, T, D] gives x; anything else is
/// returned unchanged.
Value peelRepeatKv(Value v) {
  auto outer = v.getDefiningOp<ReshapeOp>();
  if (!outer)
    return v;
  auto expand = outer.getInput().getDefiningOp<ExpandOp>();
  if (!expand)
    return v;
  auto inner = expand.getInput().getDefiningOp<ReshapeOp>();
  if (!inner)
    return v;
  Value x = inner.getInput();
  ArrayRef<int64_t> xs = tensorType(x).getShape(), in = tensorType(inner).getShape(),
                    ex = tensorType(expand).getShape(), out = tensorType(v).getShape();
  if (xs.size() != 4 || in.size() != 5 || ex.size() != 5 || out.size() != 4)
    return v;
  int64_t rep = ex[2];
  bool ok = in[0] == xs[0] && in[1] == xs[1] && in[2] == 1 && in[3] == xs[2] &&
            in[4] == xs[3] && ex[0] == xs[0] && ex[1] == xs[1] && ex[3] == xs[2] &&
            ex[4] == xs[3] && out[0] == xs[0] && out[1] == xs[1] * rep &&
            out[2] == xs[2] && out[3] == xs[3];
  return ok ? x : v;
}

/// Whether element k of a mask lets its key through: true (visible), false
/// (hidden), or nullopt for a value that is neither.
using Visibility = llvm::function_ref<std::optional<bool>(int64_t k)>;

/// The sliding window of a mask broadcast over [B, H, T, S] whose element k
/// has visibility `at(k)`, when visible means j <= i + (S - T) and, for a
/// window w > 0, j > i + (S - T) - w: 0 for a plain causal mask, w for a
/// sliding-window one (Mistral's, a Gemma local layer's), nullopt for any
/// other mask. A window that cuts nothing at this length is plain causal.
/// A splat mask holds one element: causal only when every key is visible
/// (T = 1, a decode step).
std::optional<int64_t> bandWindow(int64_t t, int64_t s, int64_t n, bool splat, Visibility at) {
  int64_t offset = s > t ? s - t : 0;
  // The last query row sees the most keys: their count is the window.
  int64_t lastRow = (t - 1) * s, seen = 0;
  for (int64_t j = 0; j < s; ++j) seen += at(splat ? 0 : lastRow + j).value_or(false);
  int64_t window = seen >= t - 1 + offset + 1 ? 0 : seen;
  for (int64_t k = 0; k < (splat ? t * s : n); ++k) {
    int64_t j = k % s, i = (k / s) % t;
    bool visible = j <= i + offset && (window == 0 || j > i + offset - window);
    if (at(splat ? 0 : k) != std::optional<bool>(visible))
      return std::nullopt;
  }
  return window;
}

/// The constant `mask` as a [.., T, S] dense attribute, or null.
DenseElementsAttr maskConstant(Value mask, int64_t t, int64_t s) {
  auto c = mask.getDefiningOp<ConstantOp>();
  auto type = tensorType(mask);
  if (!c || type.getRank() < 2 || type.getRank() > 4)
    return nullptr;
  ArrayRef<int64_t> shape = type.getShape();
  if (shape[shape.size() - 2] != t || shape.back() != s)
    return nullptr;
  return dyn_cast<DenseElementsAttr>(c.getValue());
}

/// bandWindow of an additive mask: 0 where a key is visible, very negative
/// (<= -1e30 or -inf) where it is hidden.
std::optional<int64_t> causalWindow(Value mask, int64_t t, int64_t s) {
  DenseElementsAttr dense = maskConstant(mask, t, s);
  if (!dense || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  auto classify = [](double v) -> std::optional<bool> {
    if (v == 0.0) return true;
    if (v <= -1e30) return false;
    return std::nullopt;
  };
  int64_t n = dense.getNumElements();
  if (dense.isSplat()) {
    double v = dense.getSplatValue<APFloat>().convertToDouble();
    return bandWindow(t, s, n, true, [&](int64_t) { return classify(v); });
  }
  if (dense.getElementType().isF32()) {
    // Long-sequence masks have T S elements (64 M at 8192): read the floats
    // directly rather than through APFloat.
    const float *v = reinterpret_cast<const float *>(dense.getRawData().data());
    return bandWindow(t, s, n, false, [&](int64_t k) { return classify(double(v[k])); });
  }
  std::vector<double> values;
  for (APFloat f : dense.getValues<APFloat>()) values.push_back(f.convertToDouble());
  return bandWindow(t, s, n, false, [&](int64_t k) { return classify(values[size_t(k)]); });
}

/// bandWindow of a boolean mask: true where a key is visible (or, when
/// `hides`, where it is hidden: masked_fill's form).
std::optional<int64_t> causalWindowOfCondition(Value cond, int64_t t, int64_t s, bool hides) {
  DenseElementsAttr dense = maskConstant(cond, t, s);
  if (!dense || !dense.getElementType().isInteger(1))
    return std::nullopt;
  std::vector<bool> bits;
  if (dense.isSplat())
    bits.push_back(dense.getSplatValue<bool>());
  else
    for (bool b : dense.getValues<bool>()) bits.push_back(b);
  return bandWindow(t, s, dense.getNumElements(), dense.isSplat(),
                    [&](int64_t k) -> std::optional<bool> { return bits[size_t(k)] != hides; });
}

/// `v` as softcap * tanh(x / softcap) (Gemma 2's attention logits; the
/// division may be a multiplication by 1 / softcap): sets x and the cap.
bool matchSoftcap(Value v, Value &x, double &softcap) {
  auto outer = v.getDefiningOp<MulOp>();
  if (!outer)
    return false;
  return matchEitherOrder(outer, [&](Value th, Value c) {
    auto tanh = th.getDefiningOp<TanhOp>();
    std::optional<double> cap = splatValue(c);
    if (!tanh || !cap || *cap <= 0 || tensorType(c).getNumElements() != 1)
      return false;
    Value inner = tanh.getInput();
    if (auto div = inner.getDefiningOp<DivOp>()) {
      if (!isConstantNear(div.getRhs(), *cap) || tensorType(div.getRhs()).getNumElements() != 1)
        return false;
      x = div.getLhs();
    } else if (!matchMulByConstant(inner, 1.0 / *cap, x)) {
      return false;
    }
    softcap = *cap;
    return true;
  });
}

/// The key [B, H, S, D] of scores = matmul(q, rhs): rhs itself when the
/// matmul transposes it, else the value whose last-two-dims transpose rhs
/// is (rebuilt as a transpose when needed).
Value keyOf(MatmulOp scores, PatternRewriter &rewriter) {
  Value rhs = scores.getRhs();
  if (scores.getTransposeRhs())
    return rhs;
  auto tr = rhs.getDefiningOp<TransposeOp>();
  if (!tr || tr.getPermutation().size() != 4)
    return {};
  SmallVector<int64_t> perm(tr.getPermutation());
  std::swap(perm[2], perm[3]);
  if (perm == SmallVector<int64_t>{0, 1, 2, 3})
    return tr.getInput();
  return rewriter.create<TransposeOp>(scores.getLoc(), tr.getInput(),
                                      rewriter.getDenseI64ArrayAttr(perm));
}

/// matmul(softmax(softcap(scale * q k^T) [+ causal or sliding-window
/// mask]), v) -> attention(q, k, v) with the scale, causal flag, window and
/// softcap as attributes (the softcap is optional).
struct FuseAttentionPattern : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  /// Every layer adds one of a few (uniqued) mask constants: check each once.
  mutable llvm::DenseMap<std::tuple<const void *, int64_t, int64_t>, std::optional<int64_t>>
      masks;
  std::optional<int64_t> maskWindow(Value m, int64_t t, int64_t s) const {
    auto c = m.getDefiningOp<ConstantOp>();
    if (!c)
      return std::nullopt;
    auto key = std::make_tuple(c.getValue().getAsOpaquePointer(), t, s);
    auto it = masks.find(key);
    if (it == masks.end())
      it = masks.try_emplace(key, causalWindow(m, t, s)).first;
    return it->second;
  }
  LogicalResult matchAndRewrite(MatmulOp pv, PatternRewriter &rewriter) const override {
    if (pv.getTransposeLhs() || pv.getTransposeRhs())
      return failure();
    auto softmax = pv.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getAxis() != tensorType(softmax).getRank() - 1 ||
        tensorType(softmax).getRank() != 4)
      return failure();
    int64_t t = tensorType(softmax).getDimSize(2), s = tensorType(softmax).getDimSize(3);
    Value logits = softmax.getInput();
    bool causal = false;
    int64_t window = 0;
    if (auto add = logits.getDefiningOp<AddOp>()) {
      Value scaled;
      bool masked = matchEitherOrder(add, [&](Value a, Value m) {
        std::optional<int64_t> w = maskWindow(m, t, s);
        if (!w)
          return false;
        window = *w;
        scaled = a;
        return true;
      });
      if (!masked)
        return failure(); // a mask we cannot prove causal stays unfused
      causal = true;
      logits = scaled;
    } else if (auto where = logits.getDefiningOp<WhereOp>()) {
      // where(visible, scores, -inf), or masked_fill's where(hidden, -inf, scores).
      auto hiddenValue = [](Value v) {
        std::optional<double> x = splatValue(v);
        return x && *x <= -1e30;
      };
      bool hides = hiddenValue(where.getLhs());
      if (!hides && !hiddenValue(where.getRhs()))
        return failure();
      std::optional<int64_t> w = causalWindowOfCondition(where.getCondition(), t, s, hides);
      Value scores = hides ? where.getRhs() : where.getLhs();
      if (!w || scores.getType() != softmax.getInput().getType())
        return failure();
      causal = true;
      window = *w;
      logits = scores;
    }
    double softcap = 0;
    if (Value capped; matchSoftcap(logits, capped, softcap))
      logits = capped;
    double scale = 1.0;
    if (auto mul = logits.getDefiningOp<MulOp>()) {
      Value inner;
      bool scaledMul = matchEitherOrder(mul, [&](Value a, Value c) {
        std::optional<double> v = splatValue(c);
        if (!v || tensorType(c).getNumElements() != 1)
          return false;
        scale = *v;
        inner = a;
        return true;
      });
      if (!scaledMul)
        return failure();
      logits = inner;
    } else if (auto div = logits.getDefiningOp<DivOp>()) {
      std::optional<double> v = splatValue(div.getRhs());
      if (!v || tensorType(div.getRhs()).getNumElements() != 1 || *v == 0)
        return failure();
      scale = 1.0 / *v;
      logits = div.getLhs();
    }
    auto scores = logits.getDefiningOp<MatmulOp>();
    if (!scores || scores.getTransposeLhs())
      return failure();
    Value q = scores.getLhs();
    if (tensorType(q).getRank() != 4)
      return failure();
    Value k = keyOf(scores, rewriter);
    if (!k || tensorType(k).getRank() != 4)
      return failure();
    k = peelRepeatKv(k);
    Value v = peelRepeatKv(pv.getRhs());
    auto qs = tensorType(q).getShape(), ks = tensorType(k).getShape(),
         vs = tensorType(v).getShape();
    if (vs.size() != 4 || ks[1] != vs[1] || ks[2] != vs[2] || qs[1] % ks[1] != 0 ||
        ks[3] != qs[3] || ks[0] != qs[0] || vs[0] != qs[0])
      return failure();
    // The unfused graph has no logsumexp to replace: lse gets its reader
    // when autodiff builds attention_grad. A forward-only program still
    // stores it, one float per query row beside o's D, from the row
    // statistics the softmax computes anyway.
    auto fused = rewriter.create<AttentionOp>(
        pv->getLoc(), q, k, v, rewriter.getF64FloatAttr(scale), rewriter.getBoolAttr(causal),
        rewriter.getI64IntegerAttr(window), rewriter.getF64FloatAttr(softcap));
    rewriter.replaceOp(pv, fused.getOutput());
    return success();
  }
};

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), rewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
} // namespace loom
