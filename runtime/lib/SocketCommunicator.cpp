//===- SocketCommunicator.cpp - Collectives over a mesh of TCP connections ===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/SocketCommunicator.h"
#include "lib/Diagnostics.h"
#include "lib/Socket.h"
#include "loom/runtime/Rendezvous.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace loom::rt {

using namespace net;

enum : uint32_t { kPeerHello = 20, kCollective = 21, kPointToPoint = 22 };

struct SocketCommunicator::Impl {
  std::vector<Fd> peers; // by rank; peers[rank_] unused
  std::vector<std::vector<float>> received; // scratch, by rank
};

namespace {

/// Ranks must agree on the opcode and every int (kind, dim, mesh, axes).
uint64_t instrHash(const Instr &I) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  auto mix = [&](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(uint64_t(I.op));
  for (int64_t v : I.ints) mix(uint64_t(v));
  return h;
}

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

} // namespace

SocketCommunicator::~SocketCommunicator() = default;

std::unique_ptr<SocketCommunicator> SocketCommunicator::create(Rendezvous &rv, double timeoutS,
                                                               std::string &err) {
  std::unique_ptr<SocketCommunicator> c(new SocketCommunicator());
  c->impl_ = std::make_unique<Impl>();
  c->rank_ = rv.rank();
  c->world_ = rv.worldSize();
  c->timeoutS_ = timeoutS;
  Impl &im = *c->impl_;
  im.peers.resize(size_t(c->world_));
  im.received.resize(size_t(c->world_));
  c->sentTo_.assign(size_t(c->world_), 0);
  c->receivedFrom_.assign(size_t(c->world_), 0);
  Fd listener;
  int port = 0;
  std::string why;
  if (!listenOn(0, listener, port, why)) {
    err = cat("rank ", c->rank_, ": cannot open a port for its peers: ", why);
    return nullptr;
  }
  std::vector<std::string> addrs;
  if (!rv.allGather(cat(rv.localAddress(), " ", port), addrs, err))
    return nullptr;
  Deadline dl = Deadline::after(timeoutS);
  for (int i = 0; i < c->rank_; ++i) {
    size_t sp = addrs[size_t(i)].find(' ');
    std::string host = addrs[size_t(i)].substr(0, sp);
    int peerPort = std::atoi(addrs[size_t(i)].c_str() + sp + 1);
    Fd fd;
    if (!connectTo(host, peerPort, dl, fd, why)) {
      err = cat("rank ", c->rank_, " cannot connect to rank ", i, " at ", host, ":", peerPort, " (",
                why, ")");
      return nullptr;
    }
    Transfer t;
    t.fd = fd.get();
    t.peer = i;
    t.send = true;
    t.sendHeader.kind = kPeerHello;
    t.sendHeader.tag = uint64_t(c->rank_);
    std::vector<Transfer> ts = {t};
    size_t bad = 0;
    if (exchange(ts, dl, bad, why) != Failure::None) {
      err = cat("rank ", c->rank_, " cannot greet rank ", i, " (", why, ")");
      return nullptr;
    }
    im.peers[size_t(i)] = std::move(fd);
  }
  for (int k = c->rank_ + 1; k < c->world_; ++k) {
    Fd fd;
    if (!acceptBy(listener.get(), dl, fd, why)) {
      std::string missing;
      for (int j = c->rank_ + 1; j < c->world_; ++j)
        if (!im.peers[size_t(j)])
          missing += (missing.empty() ? "" : ", ") + std::to_string(j);
      err = cat("rank ", c->rank_, ": ranks ", missing, " did not connect within ", timeoutS, " s");
      return nullptr;
    }
    Transfer t;
    t.fd = fd.get();
    t.recv = true;
    t.place = [](const Frame &h, std::string &e) -> void * {
      if (h.kind != kPeerHello || h.bytes)
        e = "a connection that is not a loom rank";
      return nullptr;
    };
    std::vector<Transfer> ts = {t};
    size_t bad = 0;
    uint64_t from = 0;
    if (exchange(ts, dl, bad, why) != Failure::None ||
        (from = ts[0].recvHeader.tag) <= uint64_t(c->rank_) || from >= uint64_t(c->world_) ||
        im.peers[from]) {
      err = cat("rank ", c->rank_, ": a peer connection failed its greeting (", why, ")");
      return nullptr;
    }
    im.peers[from] = std::move(fd);
  }
  return c;
}

void SocketCommunicator::abort(const std::string &why) {
  std::lock_guard<std::mutex> lk(m_);
  if (aborted_)
    return;
  abortWhy_ = why;
  aborted_ = true;
  // shutdown() (not close()) is safe while this rank's thread may be
  // polling the same descriptors; it wakes that poll and ends the peers'.
  for (Fd &fd : impl_->peers)
    if (fd)
      ::shutdown(fd.get(), SHUT_RDWR);
}

bool SocketCommunicator::collective(int rank, const Instr &I, const std::vector<int64_t> &inShape,
                                    const std::vector<int64_t> &outShape, const float *in,
                                    float *out, std::string &err) {
  if (aborted_) {
    std::lock_guard<std::mutex> lk(m_);
    err = abortWhy_;
    return false;
  }
  if (rank != rank_ || meshSize(I.ints) != world_) {
    err = cat("the program's mesh has ", meshSize(I.ints), " ranks; this process is rank ", rank_,
              " of ", world_, " (asked for rank ", rank, ")");
    return false;
  }
  if (!isCollectiveOp(I.op)) {
    err = cat(opcodeName(I.op), " is not a collective");
    return false;
  }
  std::vector<int> group = groupOf(rank_, I.ints);
  ++seq_;
  uint64_t seq = ++groupSeq_[group];
  uint64_t check = instrHash(I);
  int64_t n = count(inShape);
  uint64_t bytes = uint64_t(n) * 4;
  std::vector<Transfer> ts;
  int me = 0;
  for (size_t g = 0; g < group.size(); ++g) {
    int peer = group[g];
    if (peer == rank_) {
      me = int(g);
      continue;
    }
    std::vector<float> &buf = impl_->received[size_t(peer)];
    buf.resize(size_t(n));
    Transfer t;
    t.fd = impl_->peers[size_t(peer)].get();
    t.peer = peer;
    t.send = t.recv = true;
    t.sendHeader.kind = kCollective;
    t.sendHeader.tag = seq;
    t.sendHeader.check = check;
    t.sendHeader.bytes = bytes;
    t.sendData = in;
    t.place = [&buf, seq, check, bytes, peer](const Frame &h, std::string &e) -> void * {
      if (h.kind != kCollective || h.tag != seq || h.check != check || h.bytes != bytes) {
        e = cat("rank ", peer, " is at a different collective (its #", h.tag, ", ", h.bytes,
                " bytes; this rank's #", seq, ", ", bytes, " bytes)");
        return nullptr;
      }
      return buf.data();
    };
    ts.push_back(std::move(t));
  }
  if (!run(ts, "take part", "stuck elsewhere", err))
    return false;
  std::vector<const float *> inputs;
  for (int peer : group)
    inputs.push_back(peer == rank_ ? in : impl_->received[size_t(peer)].data());
  compute(I, inShape, outShape, inputs, me, out);
  return true;
}

bool SocketCommunicator::sendRecv(int rank, const std::vector<P2POp> &ops, std::string &err) {
  if (aborted_) {
    std::lock_guard<std::mutex> lk(m_);
    err = abortWhy_;
    return false;
  }
  if (rank != rank_) {
    err = cat("this process is rank ", rank_, ", not ", rank);
    return false;
  }
  // Per peer, its sends and receives in posting order; transfers to this
  // rank itself are copies within the call.
  std::vector<std::vector<const P2POp *>> sends, recvs;
  sends.resize(size_t(world_));
  recvs.resize(size_t(world_));
  for (const P2POp &op : ops) {
    if (op.peer < 0 || op.peer >= world_) {
      err = cat("rank ", rank_, ": peer ", op.peer, " is outside the ", world_, "-rank world");
      return false;
    }
    (op.kind == P2POp::Kind::Send ? sends : recvs)[size_t(op.peer)].push_back(&op);
  }
  std::vector<const P2POp *> &selfSends = sends[size_t(rank_)], &selfRecvs = recvs[size_t(rank_)];
  if (selfSends.size() != selfRecvs.size()) {
    err = cat("rank ", rank_, " sends ", selfSends.size(), " and receives ", selfRecvs.size(),
              " transfers to and from itself in one call; they must pair up");
    return false;
  }
  for (size_t k = 0; k < selfSends.size(); ++k) {
    if (selfSends[k]->bytes != selfRecvs[k]->bytes) {
      err = cat("rank ", rank_, " sends itself ", selfSends[k]->bytes, " bytes into a receive of ",
                selfRecvs[k]->bytes);
      return false;
    }
    std::memcpy(selfRecvs[k]->recv, selfSends[k]->send, size_t(selfSends[k]->bytes));
  }
  selfSends.clear();
  selfRecvs.clear();
  // Round k: the k-th send to and the k-th receive from every peer, one
  // frame each way per connection, all peers at once.
  size_t rounds = 0;
  for (int p = 0; p < world_; ++p)
    rounds = std::max({rounds, sends[size_t(p)].size(), recvs[size_t(p)].size()});
  for (size_t k = 0; k < rounds; ++k) {
    std::vector<Transfer> ts;
    for (int p = 0; p < world_; ++p) {
      const P2POp *send = k < sends[size_t(p)].size() ? sends[size_t(p)][k] : nullptr;
      const P2POp *recv = k < recvs[size_t(p)].size() ? recvs[size_t(p)][k] : nullptr;
      if (!send && !recv)
        continue;
      Transfer t;
      t.fd = impl_->peers[size_t(p)].get();
      t.peer = p;
      if (send) {
        t.send = true;
        t.sendHeader.kind = kPointToPoint;
        t.sendHeader.tag = sentTo_[size_t(p)]++;
        t.sendHeader.bytes = send->bytes;
        t.sendData = send->send;
      }
      if (recv) {
        t.recv = true;
        uint64_t want = receivedFrom_[size_t(p)]++, bytes = recv->bytes;
        void *into = recv->recv;
        t.place = [p, want, bytes, into, this](const Frame &h, std::string &e) -> void * {
          if (h.kind != kPointToPoint || h.tag != want || h.bytes != bytes) {
            e = h.kind != kPointToPoint
                    ? cat("rank ", p, " sent a collective where this rank expected its transfer #",
                          want)
                    : cat("rank ", p, "'s transfer #", h.tag, " has ", h.bytes, " bytes; rank ",
                          rank_, " expected transfer #", want, " of ", bytes, " bytes");
            return nullptr;
          }
          return into;
        };
      }
      ts.push_back(std::move(t));
    }
    if (!run(ts, "complete a point-to-point transfer", "waiting elsewhere", err))
      return false;
  }
  return true;
}

bool SocketCommunicator::run(std::vector<net::Transfer> &ts, const char *what,
                             const char *elsewhere, std::string &err) {
  size_t bad = 0;
  std::string why;
  Failure f = exchange(ts, Deadline::after(timeoutS_), bad, why);
  if (f == Failure::None)
    return true;
  if (aborted_) {
    std::lock_guard<std::mutex> lk(m_);
    err = abortWhy_;
    return false;
  }
  peerFailed_ = true;
  if (f == Failure::Timeout)
    err = cat("rank", pending(ts).find(',') == std::string::npos ? " " : "s ", pending(ts),
              " did not ", what, " within ", timeoutS_, " s (hung, or ", elsewhere, ")");
  else if (f == Failure::Closed)
    err = cat("rank ", ts[bad].peer, " closed its connection (it exited or died)");
  else
    err = cat("with rank ", ts[bad].peer, ": ", why);
  return false;
}

} // namespace loom::rt
