//===- InProcessCommunicator.cpp - Collectives between threads ------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/InProcessCommunicator.h"
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

bool InProcessCommunicator::collective(int rank, const Instr &I,
                                       const std::vector<int64_t> &inShape,
                                       const std::vector<int64_t> &outShape, const float *in,
                                       float *out, std::string &err) {
  int64_t world = meshSize(I.ints);
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
  if (!isCollectiveOp(I.op)) {
    err = cat(opcodeName(I.op), " is not a collective");
    return false;
  }
  std::vector<int> group = groupOf(rank, I.ints);
  int me = 0;
  while (group[me] != rank) ++me;
  std::vector<const float *> ins;
  for (int g : group) ins.push_back(inputs_[g]);
  compute(I, inShape, outShape, ins, me, out);
  return barrier(err);
}

} // namespace loom::rt
