//===- InProcessCommunicator.cpp - Collectives between threads ------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/InProcessCommunicator.h"
#include "lib/Diagnostics.h"

#include <cstring>

namespace loom::rt {

InProcessCommunicator::InProcessCommunicator(int worldSize)
    : world_(worldSize), made_(size_t(worldSize)) {}

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

bool InProcessCommunicator::abortLocked(int rank, const std::string &err) {
  if (!aborted_) {
    aborted_ = true;
    abortWhy_ = cat("rank ", rank, ": ", err);
  }
  cv_.notify_all();
  return false;
}

bool InProcessCommunicator::waitFor(std::unique_lock<std::mutex> &lk,
                                    const std::function<bool()> &ready, std::string &err) {
  cv_.wait(lk, [&] { return aborted_ || ready(); });
  if (!aborted_)
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
  if (!isCollectiveOp(I.op)) {
    err = cat(opcodeName(I.op), " is not a collective");
    return false;
  }
  std::vector<int> group = groupOf(rank, I.ints);
  int n = int(group.size()), me = 0;
  while (group[size_t(me)] != rank) ++me;
  std::unique_lock<std::mutex> lk(m_);
  if (aborted_) {
    err = abortWhy_;
    return false;
  }
  // The n-th collective this rank makes over this group meets the n-th of
  // every other member.
  auto key = std::make_pair(group, made_[size_t(rank)][group]++);
  Meeting &m = meetings_[key];
  if (m.inputs.empty()) {
    m.inputs.assign(size_t(n), nullptr);
    m.instrs.assign(size_t(n), nullptr);
  }
  m.inputs[size_t(me)] = in;
  m.instrs[size_t(me)] = &I;
  ++m.arrived;
  cv_.notify_all();
  if (!waitFor(lk, [&] { return m.arrived == n; }, err))
    return false;
  // SPMD: the group must be at the same instruction. A mismatch means the
  // programs differ, which would otherwise read garbage.
  for (int g = 0; g < n; ++g)
    if (m.instrs[size_t(g)]->op != I.op || m.instrs[size_t(g)]->ints != I.ints) {
      err = cat("rank ", group[size_t(g)], " is at a different collective (",
                opcodeName(m.instrs[size_t(g)]->op), ")");
      return abortLocked(rank, err);
    }
  std::vector<const float *> ins = m.inputs;
  lk.unlock();
  compute(I, inShape, outShape, ins, me, out);
  lk.lock();
  // Nobody may overwrite an input while another member still reads it.
  ++m.computed;
  cv_.notify_all();
  if (!waitFor(lk, [&] { return m.computed == n; }, err))
    return false;
  if (++m.left == n) // the last one out forgets the meeting
    meetings_.erase(key);
  return true;
}

bool InProcessCommunicator::match(int from, int to, std::string &err) {
  std::deque<Posted> &s = sends_[{from, to}], &r = recvs_[{from, to}];
  while (!s.empty() && !r.empty()) {
    Posted send = s.front(), recv = r.front();
    uint64_t k = matched_[{from, to}]++;
    if (send.bytes != recv.bytes) {
      err = cat("transfer #", k, " from rank ", from, " to rank ", to, ": rank ", from, " sends ",
                send.bytes, " bytes, rank ", to, " receives ", recv.bytes);
      return false;
    }
    if (send.bytes)
      std::memcpy(recv.recv, send.send, size_t(send.bytes));
    *send.done = *recv.done = 1;
    s.pop_front();
    r.pop_front();
  }
  return true;
}

bool InProcessCommunicator::sendRecv(int rank, const std::vector<P2POp> &ops, std::string &err) {
  for (const P2POp &op : ops)
    if (op.peer < 0 || op.peer >= world_) {
      err = cat("rank ", rank, ": peer ", op.peer, " is outside the ", world_, "-rank world");
      return false;
    }
  std::vector<char> done(ops.size(), 0);
  std::unique_lock<std::mutex> lk(m_);
  if (aborted_) {
    err = abortWhy_;
    return false;
  }
  // Post everything first (group semantics), then match what can be.
  for (size_t k = 0; k < ops.size(); ++k) {
    const P2POp &op = ops[k];
    if (op.kind == P2POp::Kind::Send)
      sends_[{rank, op.peer}].push_back({op.send, nullptr, op.bytes, &done[k]});
    else
      recvs_[{op.peer, rank}].push_back({nullptr, op.recv, op.bytes, &done[k]});
  }
  for (const P2POp &op : ops) {
    bool ok = op.kind == P2POp::Kind::Send ? match(rank, op.peer, err) : match(op.peer, rank, err);
    if (!ok)
      return abortLocked(rank, err);
  }
  cv_.notify_all();
  return waitFor(lk, [&] {
    for (char d : done)
      if (!d) return false;
    return true;
  }, err);
}

} // namespace loom::rt
