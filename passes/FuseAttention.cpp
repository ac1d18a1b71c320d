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

/// The sliding window of the constant `mask`, broadcast over [B, H, T, S],
/// when it is 0 where key j is visible to query i and very negative (<=
/// -1e30 or -inf) elsewhere, visible meaning j <= i + (S - T) and, for a
/// window w > 0, j > i + (S - T) - w: 0 for a plain causal mask, w for a
/// sliding-window one (Mistral's, a Gemma local layer's), nullopt for any
/// other mask. A window that cuts nothing at this length is plain causal.
std::optional<int64_t> causalWindow(Value mask, int64_t t, int64_t s) {
  auto c = mask.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  auto type = tensorType(mask);
  if (!dense || type.getRank() < 2 || type.getRank() > 4)
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  if (shape[shape.size() - 2] != t || shape.back() != s)
    return std::nullopt;
  int64_t offset = s > t ? s - t : 0, n = type.getNumElements();
  // The last query row sees the most keys: their count is the window.
  auto valueAt = [&](int64_t k) -> double {
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble();
    if (type.getElementType().isF32()) // long-sequence masks: read the floats directly
      return double(reinterpret_cast<const float *>(dense.getRawData().data())[k]);
    return (*(dense.getValues<APFloat>().begin() + k)).convertToDouble();
  };
  int64_t lastRow = (t - 1) * s, seen = 0;
  for (int64_t j = 0; j < s; ++j) seen += valueAt(lastRow + j) == 0.0;
  int64_t window = seen >= t - 1 + offset + 1 ? 0 : seen;
  auto expected = [&](int64_t k, double v) {
    int64_t j = k % s, i = (k / s) % t;
    bool visible = j <= i + offset && (window == 0 || j > i + offset - window);
    return visible ? v == 0.0 : v <= -1e30;
  };
  if (dense.isSplat()) { // causal only when every key is visible (T = 1, a decode step)
    double v = valueAt(0);
    for (int64_t k = 0; k < t * s; ++k)
      if (!expected(k, v))
        return std::nullopt;
    return window;
  }
  if (type.getElementType().isF32()) {
    // Long-sequence masks have T S elements (64 M at 8192): read the floats
    // directly rather than through APFloat.
    const float *v = reinterpret_cast<const float *>(dense.getRawData().data());
    for (int64_t k = 0; k < n; ++k)
      if (!expected(k, double(v[k])))
        return std::nullopt;
    return window;
  }
  int64_t k = 0;
  for (APFloat f : dense.getValues<APFloat>())
    if (!expected(k++, f.convertToDouble()))
      return std::nullopt;
  return window;
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
