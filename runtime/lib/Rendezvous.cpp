//===- Rendezvous.cpp - A star of TCP connections through rank 0 ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// Frames (Socket.h): hello {kind 1, tag = rank, check = world}; rank 0's
// answer once everybody is there {kind 2, payload: "" or why it refuses};
// data {kind 3, tag = operation number}. Rank 0 answers no hello before
// all ranks have said theirs, so join() returns on every rank only when
// the whole world is connected.
//===----------------------------------------------------------------------===//
#include "loom/runtime/Rendezvous.h"
#include "lib/Diagnostics.h"
#include "lib/Socket.h"

#include <cstring>
#include <poll.h>
#include <sys/socket.h>

namespace loom::rt {

using namespace net;

enum : uint32_t { kHello = 1, kWelcome = 2, kData = 3 };

struct Rendezvous::Impl {
  Fd listener;
  std::vector<Fd> conns; // rank 0: one per rank (conns[0] unused); others: conns[0] = rank 0
};

namespace {

std::string seconds(double s) { return cat(s, " s"); }

Transfer sendTo(int fd, int peer, uint32_t kind, uint64_t tag, const std::string &bytes) {
  Transfer t;
  t.fd = fd;
  t.peer = peer;
  t.send = true;
  t.sendHeader.kind = kind;
  t.sendHeader.tag = tag;
  t.sendHeader.bytes = bytes.size();
  t.sendData = bytes.data();
  return t;
}

/// Receives one frame of `kind` and `tag` into `into`.
Transfer recvFrom(int fd, int peer, uint32_t kind, uint64_t tag, std::string &into) {
  Transfer t;
  t.fd = fd;
  t.peer = peer;
  t.recv = true;
  t.place = [&into, kind, tag, peer](const Frame &h, std::string &err) -> void * {
    if (h.kind != kind || h.tag != tag) {
      err = cat("rank ", peer, " is at a different rendezvous step (frame ", h.kind, "/", h.tag,
                ", expected ", kind, "/", tag, ")");
      return nullptr;
    }
    into.resize(h.bytes);
    return into.empty() ? nullptr : &into[0];
  };
  return t;
}

std::string joinStrings(const std::vector<std::string> &all) {
  std::string s;
  for (const std::string &x : all) {
    uint64_t n = x.size();
    s.append(reinterpret_cast<const char *>(&n), 8);
    s += x;
  }
  return s;
}

bool splitStrings(const std::string &s, size_t count, std::vector<std::string> &all) {
  all.clear();
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t n = 0;
    if (at + 8 > s.size())
      return false;
    std::memcpy(&n, s.data() + at, 8);
    at += 8;
    if (at + n > s.size())
      return false;
    all.push_back(s.substr(at, n));
    at += n;
  }
  return at == s.size();
}

} // namespace

Rendezvous::~Rendezvous() = default;

std::unique_ptr<Rendezvous> Rendezvous::join(int rank, int world, const std::string &host,
                                             int port, double timeoutS, std::string &err) {
  if (world < 1 || rank < 0 || rank >= world) {
    err = cat("rendezvous: rank ", rank, " is not a rank of a ", world, "-rank world");
    return nullptr;
  }
  if (port <= 0 || port > 65535) {
    err = cat("rendezvous: port ", port, " is not a TCP port (1-65535)");
    return nullptr;
  }
  std::unique_ptr<Rendezvous> rv(new Rendezvous());
  rv->impl_ = std::make_unique<Impl>();
  rv->rank_ = rank;
  rv->world_ = world;
  rv->timeoutS_ = timeoutS;
  rv->address_ = cat(host, ":", port);
  Impl &im = *rv->impl_;
  Deadline dl = Deadline::after(timeoutS);
  std::string why;
  if (rank != 0) {
    Fd fd;
    if (!connectTo(host, port, dl, fd, why)) {
      err = cat("rendezvous: rank ", rank, " cannot reach rank 0 at ", rv->address_, " within ",
                seconds(timeoutS), " (", why, ")");
      return nullptr;
    }
    rv->local_ = net::localAddress(fd.get());
    std::string refusal;
    std::vector<Transfer> ts = {sendTo(fd.get(), 0, kHello, uint64_t(rank), "")};
    ts[0].sendHeader.check = uint64_t(world);
    Transfer r = recvFrom(fd.get(), 0, kWelcome, uint64_t(rank), refusal);
    ts[0].recv = true;
    ts[0].place = r.place;
    size_t bad = 0;
    // Rank 0 decides whether the world is complete and says so by its own
    // deadline; waiting a little longer lets its verdict (which ranks are
    // missing) arrive rather than a vaguer timeout of our own.
    Deadline verdict{dl.at + std::chrono::seconds(2)};
    Failure f = exchange(ts, verdict, bad, why);
    if (f == Failure::Timeout) {
      err = cat("rendezvous at ", rv->address_, ": rank 0 did not see every rank within ",
                seconds(timeoutS), " (some rank never arrived)");
      return nullptr;
    }
    if (f != Failure::None) {
      err = cat("rendezvous at ", rv->address_, ": rank 0 closed the connection (", why, ")");
      return nullptr;
    }
    if (!refusal.empty()) {
      err = cat("rendezvous at ", rv->address_, ": ", refusal);
      return nullptr;
    }
    im.conns.push_back(std::move(fd));
    return rv;
  }

  int bound = 0;
  if (!listenOn(port, im.listener, bound, why)) {
    err = cat("rendezvous: rank 0 cannot listen on ", rv->address_, ": ", why);
    return nullptr;
  }
  rv->local_ = host;
  im.conns.resize(size_t(world));
  std::string refusal;
  // Tells every connected rank why the job will not start, so every
  // process prints the same reason rather than "connection closed".
  auto refuseAll = [&](int extraFd, uint64_t extraRank) {
    size_t bad = 0;
    std::vector<Transfer> no;
    for (int k = 1; k < world; ++k)
      if (im.conns[size_t(k)])
        no.push_back(sendTo(im.conns[size_t(k)].get(), k, kWelcome, uint64_t(k), refusal));
    if (extraFd >= 0)
      no.push_back(sendTo(extraFd, int(extraRank), kWelcome, extraRank, refusal));
    exchange(no, Deadline::after(1), bad, why);
  };
  int arrived = 1;
  while (arrived < world) {
    Fd fd;
    if (!acceptBy(im.listener.get(), dl, fd, why)) {
      std::string missing;
      for (int r = 1; r < world; ++r)
        if (!im.conns[size_t(r)])
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      refusal = cat("rank", arrived + 1 < world ? "s " : " ", missing, " of ", world,
                    " did not arrive within ", seconds(timeoutS));
      err = cat("rendezvous at ", rv->address_, ": ", refusal);
      refuseAll(-1, 0);
      return nullptr;
    }
    // A hello: which rank, and how large it thinks the world is.
    Transfer t;
    t.fd = fd.get();
    t.recv = true;
    t.place = [](const Frame &h, std::string &e) -> void * {
      if (h.kind != kHello || h.bytes)
        e = "a connection that is not a loom rank said something else than hello";
      return nullptr;
    };
    std::vector<Transfer> ts = {t};
    size_t bad = 0;
    if (exchange(ts, dl, bad, why) != Failure::None)
      continue; // not a rank, or gone already: keep waiting for the real ones
    uint64_t r = ts[0].recvHeader.tag, w = ts[0].recvHeader.check;
    if (refusal.empty() && w != uint64_t(world))
      refusal = cat("rank ", r, " says the world has ", w, " ranks, rank 0 says ", world);
    if (refusal.empty() && (r == 0 || r >= uint64_t(world) || im.conns[r]))
      refusal = cat("two processes claim rank ", r, " (or it is not a rank of ", world, ")");
    if (!refusal.empty()) {
      err = cat("rendezvous at ", rv->address_, ": ", refusal);
      refuseAll(fd.get(), r);
      return nullptr;
    }
    im.conns[r] = std::move(fd);
    ++arrived;
  }
  std::vector<Transfer> ts;
  for (int r = 1; r < world; ++r)
    ts.push_back(sendTo(im.conns[size_t(r)].get(), r, kWelcome, uint64_t(r), ""));
  size_t bad = 0;
  if (Failure f = exchange(ts, dl, bad, why); f != Failure::None) {
    err = cat("rendezvous at ", rv->address_, ": rank ", ts[bad].peer,
              " left before the job started (", why, ")");
    return nullptr;
  }
  return rv;
}

namespace {

/// Runs one round's transfers (gather's or broadcast's) to the end: false
/// with the error a user can act on (who did not arrive, who left).
bool exchangeRound(std::vector<Transfer> &ts, Deadline dl, uint64_t round, int rank,
                   const std::string &address, double timeoutS, std::string &err) {
  size_t bad = 0;
  std::string why;
  Failure f = exchange(ts, dl, bad, why);
  if (f == Failure::None)
    return true;
  if (f == Failure::Timeout)
    err = cat("rank", rank == 0 ? "s " : " ", pending(ts), " did not reach step ", round,
              " of the rendezvous at ", address, " within ", seconds(timeoutS));
  else if (f == Failure::Closed)
    err = cat("rank ", ts[bad].peer, " closed its connection (it exited or died)");
  else
    err = cat("rendezvous with rank ", ts[bad].peer, ": ", why);
  return false;
}

} // namespace

bool Rendezvous::gather(const std::string &mine, std::vector<std::string> &all,
                        std::string &err) {
  uint64_t round = ++round_;
  Deadline dl = Deadline::after(timeoutS_);
  std::vector<Transfer> ts;
  all.assign(rank_ == 0 ? size_t(world_) : 0, std::string());
  if (rank_ == 0) {
    all[0] = mine;
    for (int r = 1; r < world_; ++r)
      ts.push_back(recvFrom(impl_->conns[size_t(r)].get(), r, kData, round, all[size_t(r)]));
  } else {
    ts.push_back(sendTo(impl_->conns[0].get(), 0, kData, round, mine));
  }
  return exchangeRound(ts, dl, round, rank_, address_, timeoutS_, err);
}

bool Rendezvous::broadcast(std::string &bytes, std::string &err) {
  uint64_t round = ++round_;
  Deadline dl = Deadline::after(timeoutS_);
  std::vector<Transfer> ts;
  if (rank_ == 0) {
    for (int r = 1; r < world_; ++r)
      ts.push_back(sendTo(impl_->conns[size_t(r)].get(), r, kData, round, bytes));
  } else {
    ts.push_back(recvFrom(impl_->conns[0].get(), 0, kData, round, bytes));
  }
  return exchangeRound(ts, dl, round, rank_, address_, timeoutS_, err);
}

bool Rendezvous::allGather(const std::string &mine, std::vector<std::string> &all,
                           std::string &err) {
  std::vector<std::string> gathered;
  if (!gather(mine, gathered, err))
    return false;
  std::string packed = rank_ == 0 ? joinStrings(gathered) : std::string();
  if (!broadcast(packed, err))
    return false;
  if (!splitStrings(packed, size_t(world_), all)) {
    err = "rendezvous: rank 0 sent a malformed list";
    return false;
  }
  return true;
}

bool Rendezvous::barrier(std::string &err) {
  std::vector<std::string> ignored;
  std::string none;
  return gather("", ignored, err) && broadcast(none, err);
}

int Rendezvous::lostPeer() const {
  for (size_t i = 0; i < impl_->conns.size(); ++i) {
    const Fd &fd = impl_->conns[i];
    if (!fd)
      continue;
    pollfd p{fd.get(), short(POLLIN | POLLRDHUP), 0};
    if (::poll(&p, 1, 0) != 1)
      continue;
    char c;
    // Pending data is a later frame, not a loss; only the end of the stream is.
    if ((p.revents & (POLLHUP | POLLRDHUP | POLLERR)) ||
        ::recv(fd.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
      return rank_ == 0 ? int(i) : 0;
  }
  return -1;
}

} // namespace loom::rt
