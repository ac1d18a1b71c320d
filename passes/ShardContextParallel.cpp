//===- ShardContextParallel.cpp - @forward on load-balanced sequence chunks ===//
//
// Part of loom, under the Apache License v2.0.
//
// Context parallelism (issue 18), before autodiff. The sequence of T
// tokens is cut into 2C chunks of L = T / 2C and rank c keeps chunks c and
// 2C - 1 - c, in that order. Under a causal mask chunk k sees k + 1/2 chunks
// of keys, so every rank sees (c + 1/2) + (2C - 1 - c + 1/2) = 2C chunks'
// worth: the same attention work on every rank (a contiguous split would
// give the last rank 2C - 1 times the first's).
//
// Everything downstream of the token ids holds this rank's rows
// (SequenceSharding.h): local types, position tables reordered into the
// chunk layout and sliced per rank (so rotary and position embeddings use
// global positions), attention over every rank's keys (context_attention;
// its forward and backward collectives are made explicit after autodiff by
// loom-expand-context-attention), and each parameter read through
// copy_to_parallel over cp, whose gradient sums the ranks' tokens. The
// loss is the mean over cp of the ranks' means (equal token counts), which
// loom-build-train-step builds from the logits' cp placement.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/PatternUtils.h"
#include "passes/SequenceSharding.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstring>

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_SHARDCONTEXTPARALLEL
#include "passes/Passes.h.inc"

namespace {

/// Chunk order that puts rank c's chunks c and 2C - 1 - c at positions
/// 2c and 2c + 1: a contiguous slice per rank after reordering.
SmallVector<int64_t> loadBalancedOrder(int64_t C) {
  SmallVector<int64_t> order;
  for (int64_t c = 0; c < C; ++c) order.append({c, 2 * C - 1 - c});
  return order;
}

/// `v` (a constant) with dim d's chunks in load-balanced order, or null
/// when its elements are not plain bytes.
Value reorderedConstant(OpBuilder &b, ConstantOp c, int64_t d, int64_t C) {
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  auto t = cast<RankedTensorType>(c.getType());
  unsigned bits = t.getElementType().getIntOrFloatBitWidth();
  if (!dense || bits % 8)
    return {};
  if (dense.isSplat()) // every chunk is the same
    return c.getResult();
  size_t es = bits / 8;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= t.getDimSize(k);
  for (int64_t k = d + 1; k < t.getRank(); ++k) inner *= t.getDimSize(k);
  int64_t n = t.getDimSize(d), L = n / (2 * C);
  ArrayRef<char> raw = dense.getRawData();
  std::vector<char> out(raw.size());
  SmallVector<int64_t> order = loadBalancedOrder(C);
  size_t chunkBytes = size_t(L * inner) * es;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < 2 * C; ++k)
      std::memcpy(out.data() + (o * n + k * L) * inner * es,
                  raw.data() + (o * n + order[k] * L) * inner * es, chunkBytes);
  auto attr = DenseElementsAttr::getFromRawBuffer(t, ArrayRef<char>(out));
  return b.create<ConstantOp>(c.getLoc(), attr, StringAttr(), ParamAttr());
}

struct ShardContextParallelPass : impl::ShardContextParallelBase<ShardContextParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (cp < 1) {
      module.emitError("cp must be at least 1");
      return signalPassFailure();
    }
    if (cp == 1)
      return;
    std::optional<CpRotate> how = symbolizeCpRotate(rotate);
    if (!how) {
      module.emitError() << "cp_rotate must be allgather or ring, not '" << std::string(rotate) << "'";
      return signalPassFailure();
    }
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd || fwd.getNumArguments() != 1 || fwd.getNumResults() != 1 ||
        tensorType(fwd.getArgument(0)).getRank() != 2) {
      module.emitError("expected @forward(tokens [B, T]) -> logits");
      return signalPassFailure();
    }
    int64_t T = tensorType(fwd.getArgument(0)).getDimSize(1);
    if (T % (2 * cp)) {
      fwd.emitError() << "context parallelism: the sequence length " << T
                      << " does not divide into 2 x cp = " << 2 * cp << " load-balanced chunks";
      return signalPassFailure();
    }
    module->setAttr(kMeshAttrName,
                    meshWithAxis(ctx, module->getAttrOfType<MeshAttr>(kMeshAttrName),
                                 MeshAxis::cp, cp));
    ArrayAttr cpAxis = meshAxes(ctx, {MeshAxis::cp});

    SequenceRegion region;
    if (failed(followSequence(fwd, T, {{fwd.getArgument(0), 1}}, [](OpOperand &) { return false; },
                              /*allowAttention=*/true, "context parallelism", region)))
      return signalPassFailure();
    for (AttentionOp a : region.attentions)
      if (!a.getCausal()) {
        a.emitError("context parallelism: attention is not causal (the chunk layout balances a "
                    "causal mask)");
        return signalPassFailure();
      } else if (a.getWindow() != 0 || a.getSoftcap().convertToDouble() != 0.0) {
        a.emitError("context parallelism: attention with a sliding window or a softcap is not "
                    "split over cp yet (context_attention is plain causal)");
        return signalPassFailure();
      }
    if (!region.reachesReturn) {
      fwd.emitError("context parallelism: the logits do not follow the token ids");
      return signalPassFailure();
    }
    int64_t logitsDim = region.dims.lookup(fwd.getBody().front().getTerminator()->getOperand(0));
    applySequenceRegion(fwd, region, cp, cpAxis, [&](OpBuilder &b, Value table, int64_t d) {
      return slicePositions(b, table, d, cpAxis);
    });
    // Attention reads every rank's keys.
    for (AttentionOp a : region.attentions) {
      OpBuilder b(a);
      auto ca = b.create<ContextAttentionOp>(a.getLoc(), a.getQuery(), a.getKey(), a.getValue(),
                                             cpAxis, a.getScaleAttr(), a.getCausalAttr(),
                                             CpRotateAttr::get(ctx, *how));
      a.getOutput().replaceAllUsesWith(ca.getOutput());
      a.getLse().replaceAllUsesWith(ca.getLse());
      a.erase();
    }
    auto shard = [&](int64_t dim) {
      return PlacementAttr::get(ctx, MeshAxis::cp, PlacementKind::shard, dim, ReduceKind::sum, 1);
    };
    addSharding(fwd, 0, /*argument=*/true, shard(1));
    addSharding(fwd, 0, /*argument=*/false, shard(logitsDim));
  }

  /// This rank's rows of a table that spans the whole sequence along `d`:
  /// reordered into the chunk layout (at compile time for a constant, by a
  /// split and a concat otherwise), then shard_slice over cp.
  Value slicePositions(OpBuilder &b, Value table, int64_t d, ArrayAttr cpAxis) {
    auto t = tensorType(table);
    Value ordered;
    if (auto c = table.getDefiningOp<ConstantOp>(); c && !c.getParamAttr())
      ordered = reorderedConstant(b, c, d, cp);
    if (!ordered) {
      int64_t L = t.getDimSize(d) / (2 * cp);
      auto parts = b.create<SplitOp>(table.getLoc(), table, d,
                                     SmallVector<int64_t>(2 * cp, L));
      SmallVector<Value> chunks;
      for (int64_t k : loadBalancedOrder(cp)) chunks.push_back(parts.getResult(k));
      ordered = b.create<ConcatOp>(table.getLoc(), chunks, d);
    }
    SmallVector<int64_t> local(t.getShape());
    local[d] /= cp;
    return b.create<ShardSliceOp>(table.getLoc(), RankedTensorType::get(local, t.getElementType()),
                                  ordered, cpAxis, b.getI64IntegerAttr(d));
  }
};

} // namespace
} // namespace loom
