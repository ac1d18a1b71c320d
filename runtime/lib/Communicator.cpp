//===- Communicator.cpp - Groups and the reference collective arithmetic --===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/Communicator.h"

#include <algorithm>

namespace loom::rt {

bool Communicator::sendRecv(int, const std::vector<P2POp> &, std::string &err) {
  err = std::string("the ") + transport() + " communicator has no point-to-point transfers";
  return false;
}

int64_t Communicator::meshSize(const std::vector<int64_t> &ints) {
  int64_t world = 1;
  for (int a = 0; a < kMeshAxes; ++a) world *= ints[2 + a];
  return world;
}

std::vector<int> Communicator::groupOf(int rank, const std::vector<int64_t> &ints) {
  const int64_t *sizes = ints.data() + 2;
  int64_t mask = ints[2 + kMeshAxes];
  // Row-major coordinates of `rank`; the group varies the masked axes.
  int64_t coord[kMeshAxes];
  int64_t r = rank;
  for (int a = kMeshAxes - 1; a >= 0; --a) {
    coord[a] = r % sizes[a];
    r /= sizes[a];
  }
  int64_t world = meshSize(ints);
  std::vector<int> group;
  for (int64_t other = 0; other < world; ++other) {
    int64_t o = other;
    bool same = true;
    for (int a = kMeshAxes - 1; a >= 0; --a) {
      int64_t c = o % sizes[a];
      o /= sizes[a];
      if (!(mask & (int64_t(1) << a)) && c != coord[a])
        same = false;
    }
    if (same)
      group.push_back(int(other));
  }
  return group;
}

int Communicator::groupIndex(int rank, const std::vector<int64_t> &ints) {
  std::vector<int> group = groupOf(rank, ints);
  int me = 0;
  while (me < int(group.size()) && group[me] != rank) ++me;
  return me;
}

void Communicator::compute(const Instr &I, const std::vector<int64_t> &inShape,
                           const std::vector<int64_t> &outShape,
                           const std::vector<const float *> &inputs, int me, float *out) {
  int n = int(inputs.size());
  bool mean = I.ints[0] == 1;
  int64_t dim = I.ints[1];
  // [outer, chunk, inner] view around `dim` of the smaller (per-rank) shape.
  auto split = [&](const std::vector<int64_t> &small, int64_t &outer, int64_t &chunk,
                   int64_t &inner) {
    outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= small[d];
    chunk = small[dim];
    for (size_t d = dim + 1; d < small.size(); ++d) inner *= small[d];
  };
  if (I.op == OpCode::AllReduce) {
    int64_t count = 1;
    for (int64_t d : inShape) count *= d;
    for (int64_t k = 0; k < count; ++k) {
      double acc = 0;
      for (int g = 0; g < n; ++g) acc += inputs[g][k];
      out[k] = float(mean ? acc / n : acc);
    }
  } else if (I.op == OpCode::AllGather) {
    int64_t outer, chunk, inner;
    split(inShape, outer, chunk, inner);
    for (int g = 0; g < n; ++g) {
      const float *src = inputs[g];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < chunk * inner; ++j)
          out[(o * n * chunk + g * chunk) * inner + j] = src[o * chunk * inner + j];
    }
  } else if (I.op == OpCode::AllToAll) {
    // Chunk g of the output is chunk `me` of member g's input.
    int64_t outer, chunk, inner;
    split(inShape, outer, chunk, inner);
    chunk /= n;
    for (int g = 0; g < n; ++g)
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < chunk * inner; ++j)
          out[(o * n * chunk + g * chunk) * inner + j] =
              inputs[g][(o * n * chunk + me * chunk) * inner + j];
  } else if (I.op == OpCode::CollectivePermute) {
    // ints[1] is the shift: member (me - shift) mod n's input, whole.
    int64_t count = 1;
    for (int64_t d : inShape) count *= d;
    int64_t from = ((int64_t(me) - I.ints[1]) % n + n) % n;
    std::copy(inputs[from], inputs[from] + count, out);
  } else if (I.op == OpCode::ReduceScatter) {
    int64_t outer, chunk, inner;
    split(outShape, outer, chunk, inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < chunk * inner; ++j) {
        int64_t at = (o * n * chunk + me * chunk) * inner + j;
        double acc = 0;
        for (int g = 0; g < n; ++g) acc += inputs[g][at];
        out[o * chunk * inner + j] = float(mean ? acc / n : acc);
      }
  }
}

} // namespace loom::rt
