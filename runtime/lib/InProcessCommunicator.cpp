//===- InProcessCommunicator.cpp - Collectives between threads ------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/Communicator.h"
#include "lib/Diagnostics.h"

namespace loom::rt {

InProcessCommunicator::InProcessCommunicator(int worldSize)
    : world_(worldSize), inputs_(worldSize), instrs_(worldSize) {}

void InProcessCommunicator::abort(const std::string &why) {
  std::lock_guard<std::mutex> lk(m_);
  if (!aborted_) {
    aborted_ = true;
    abortWhy_ = why;
  }
  cv_.notify_all();
}

bool InProcessCommunicator::aborted() const {
  std::lock_guard<std::mutex> lk(m_);
  return aborted_;
}

std::string InProcessCommunicator::abortReason() const {
  std::lock_guard<std::mutex> lk(m_);
  return abortWhy_;
}

bool InProcessCommunicator::barrier(std::string &err) {
  std::unique_lock<std::mutex> lk(m_);
  if (aborted_) {
    err = abortWhy_;
    return false;
  }
  uint64_t gen = generation_;
  if (++arrived_ == world_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return true;
  }
  cv_.wait(lk, [&] { return generation_ != gen || aborted_; });
  if (generation_ != gen)
    return true;
  err = abortWhy_;
  return false;
}

std::vector<int> InProcessCommunicator::groupOf(int rank, const std::vector<int64_t> &ints) {
  const int64_t *sizes = ints.data() + 2;
  int64_t mask = ints[2 + kMeshAxes];
  // Row-major coordinates of `rank`; the group varies the masked axes.
  int64_t coord[kMeshAxes];
  int64_t r = rank;
  for (int a = kMeshAxes - 1; a >= 0; --a) {
    coord[a] = r % sizes[a];
    r /= sizes[a];
  }
  int64_t world = 1;
  for (int a = 0; a < kMeshAxes; ++a) world *= sizes[a];
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

bool InProcessCommunicator::collective(int rank, const Instr &I,
                                       const std::vector<int64_t> &inShape,
                                       const std::vector<int64_t> &outShape, const float *in,
                                       float *out, std::string &err) {
  int64_t world = 1;
  for (int a = 0; a < kMeshAxes; ++a) world *= I.ints[2 + a];
  if (world != world_) {
    err = cat("the program's mesh has ", world, " ranks, the communicator ", world_);
    return false;
  }
  inputs_[rank] = in;
  instrs_[rank] = &I;
  if (!barrier(err))
    return false;
  // SPMD: every rank must be at the same instruction. A mismatch means the
  // programs differ, which would otherwise read garbage.
  for (int r = 0; r < world_; ++r)
    if (instrs_[r]->op != I.op || instrs_[r]->ints != I.ints) {
      err = cat("rank ", r, " is at a different collective (", opcodeName(instrs_[r]->op), ")");
      abort(cat("rank ", rank, ": ", err));
      return false;
    }
  std::vector<int> group = groupOf(rank, I.ints);
  int n = int(group.size());
  int me = 0;
  while (group[me] != rank) ++me;
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
      for (int g = 0; g < n; ++g) acc += inputs_[group[g]][k];
      out[k] = float(mean ? acc / n : acc);
    }
  } else if (I.op == OpCode::AllGather) {
    int64_t outer, chunk, inner;
    split(inShape, outer, chunk, inner);
    for (int g = 0; g < n; ++g) {
      const float *src = inputs_[group[g]];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < chunk * inner; ++j)
          out[(o * n * chunk + g * chunk) * inner + j] = src[o * chunk * inner + j];
    }
  } else if (I.op == OpCode::ReduceScatter) {
    int64_t outer, chunk, inner;
    split(outShape, outer, chunk, inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < chunk * inner; ++j) {
        int64_t at = (o * n * chunk + me * chunk) * inner + j;
        double acc = 0;
        for (int g = 0; g < n; ++g) acc += inputs_[group[g]][at];
        out[o * chunk * inner + j] = float(mean ? acc / n : acc);
      }
  } else {
    err = cat(opcodeName(I.op), " is not a collective");
    return false;
  }
  return barrier(err);
}

} // namespace loom::rt
