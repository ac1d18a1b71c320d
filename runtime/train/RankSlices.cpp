//===- RankSlices.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/RankSlices.h"

#include <cstring>

namespace loom::train {

namespace {

/// Block `index` of `parts` equal blocks along `dim` of a row-major tensor.
std::vector<float> takeBlock(const std::vector<float> &full, std::vector<int64_t> &shape,
                             int64_t dim, int64_t parts, int64_t index) {
  int64_t outer = 1, inner = 1, n = shape[dim], rows = n / parts;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<float> block(size_t(outer * rows * inner));
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(block.data() + o * rows * inner, full.data() + (o * n + index * rows) * inner,
                size_t(rows * inner) * 4);
  shape[dim] = rows;
  return block;
}

/// The inverse: writes `block` as block `index` along `dim` of `full`.
void putBlock(std::vector<float> &full, const std::vector<int64_t> &shape, int64_t dim,
              int64_t parts, int64_t index, const std::vector<float> &block) {
  int64_t outer = 1, inner = 1, n = shape[dim], rows = n / parts;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(full.data() + (o * n + index * rows) * inner, block.data() + o * rows * inner,
                size_t(rows * inner) * 4);
}

/// A fused dim of k blocks (q|k|v) is split block by block: view it as
/// [k, n/k] and split the inner dim.
std::vector<int64_t> blockedShape(const ParamSlot &slot) {
  std::vector<int64_t> shape = slot.shape;
  int64_t k = slot.tpBlocks, d = slot.tpDim;
  shape[d] /= k;
  shape.insert(shape.begin() + d, k);
  return shape;
}

std::vector<float> takeTpSlice(const std::vector<float> &full, std::vector<int64_t> &shape,
                               const ParamSlot &slot, int64_t t, int64_t T) {
  std::vector<int64_t> b = blockedShape(slot);
  std::vector<float> v = takeBlock(full, b, slot.tpDim + 1, T, t);
  shape[slot.tpDim] /= T;
  return v;
}

void putTpSlice(std::vector<float> &full, const ParamSlot &slot, int64_t t, int64_t T,
                const std::vector<float> &slice) {
  putBlock(full, blockedShape(slot), slot.tpDim + 1, T, t, slice);
}

} // namespace

std::vector<float> localSlice(const TrainProgram &tp, const std::vector<float> &full,
                              const ParamSlot &slot, int shard, int t) {
  std::vector<int64_t> shape = slot.shape;
  std::vector<float> v = full;
  if (slot.tpDim >= 0)
    v = takeTpSlice(v, shape, slot, t, tp.tp);
  if (slot.dim0Shards > 1)
    v = takeBlock(v, shape, 0, slot.dim0Shards, shard);
  return v;
}

size_t localSize(const TrainProgram &tp, const ParamSlot &slot) {
  size_t n = slot.value.size();
  if (slot.tpDim >= 0)
    n /= size_t(tp.tp);
  return n / size_t(slot.dim0Shards);
}

bool assembleFull(const TrainProgram &tp, const ParamSlot &slot, std::vector<float> &full,
                  const std::function<bool(int, int, std::vector<float> &)> &getPiece) {
  int T = slot.tpDim >= 0 ? tp.tp : 1, S = int(slot.dim0Shards);
  std::vector<int64_t> tpShape = slot.shape;
  if (slot.tpDim >= 0)
    tpShape[slot.tpDim] /= T;
  std::vector<float> tpLocal(full.size() / size_t(T)), piece(tpLocal.size() / size_t(S));
  for (int t = 0; t < T; ++t) {
    for (int s = 0; s < S; ++s) {
      if (!getPiece(s, t, piece))
        return false;
      if (S > 1)
        putBlock(tpLocal, tpShape, 0, S, s, piece);
      else
        tpLocal = piece;
    }
    if (T > 1)
      putTpSlice(full, slot, t, T, tpLocal);
    else
      full = tpLocal;
  }
  return true;
}

bool gatherTrainState(TrainState &st, bool holdsFull,
                      const std::function<bool(int, std::vector<std::vector<float>> &)> &gather) {
  size_t P = st.params.size();
  std::vector<std::vector<float>> params(P);
  for (size_t i = 0; i < P; ++i) params[i].resize(st.params[i].value.size());
  if (!gather(0, params) || !gather(1, st.expAvg) || !gather(2, st.expAvgSq))
    return false;
  if (holdsFull)
    for (size_t i = 0; i < P; ++i) st.params[i].value = std::move(params[i]);
  return true;
}

std::vector<int64_t> rankTokens(const TrainProgram &tp, const std::vector<int64_t> &global,
                                int dataIndex, int c, int t) {
  int64_t T = tp.seq, rows = tp.localBatch(), C = tp.cp;
  std::vector<int64_t> positions;
  if (C > 1) {
    int64_t L = T / (2 * C);
    for (int64_t chunk : {int64_t(c), 2 * C - 1 - c})
      for (int64_t i = 0; i < L; ++i) positions.push_back(chunk * L + i);
  } else {
    for (int64_t i = 0; i < T; ++i) positions.push_back(i);
  }
  if (tp.tokensSplitOverTp) {
    int64_t part = int64_t(positions.size()) / tp.tp;
    positions.erase(positions.begin(), positions.begin() + t * part);
    positions.resize(size_t(part));
  }
  std::vector<int64_t> out;
  out.reserve(size_t(rows) * positions.size());
  for (int64_t r = dataIndex * rows; r < (dataIndex + 1) * rows; ++r)
    for (int64_t p : positions) out.push_back(global[size_t(r * T + p)]);
  return out;
}

} // namespace loom::train
