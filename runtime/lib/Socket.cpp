//===- Socket.cpp - TCP with deadlines ------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "lib/Socket.h"
#include "lib/Diagnostics.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace loom::rt::net {

Deadline Deadline::after(double seconds) {
  return {Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(seconds))};
}

int Deadline::msLeft() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
  return left <= 0 ? 0 : left > 1000000 ? 1000000 : int(left);
}

Fd &Fd::operator=(Fd &&o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

namespace {

void configure(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool resolve(const std::string &host, int port, sockaddr_in &addr, std::string &err) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || !res) {
    err = cat("cannot resolve '", host, "': ", gai_strerror(rc));
    return false;
  }
  addr = *reinterpret_cast<sockaddr_in *>(res->ai_addr);
  addr.sin_port = htons(uint16_t(port));
  freeaddrinfo(res);
  return true;
}

} // namespace

bool listenOn(int port, Fd &out, int &boundPort, std::string &err) {
  Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
  if (!fd) {
    err = cat("socket: ", std::strerror(errno));
    return false;
  }
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (::bind(fd.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    err = cat("cannot listen on port ", port, ": ", std::strerror(errno));
    return false;
  }
  socklen_t len = sizeof addr;
  getsockname(fd.get(), reinterpret_cast<sockaddr *>(&addr), &len);
  boundPort = ntohs(addr.sin_port);
  configure(fd.get());
  out = std::move(fd);
  return true;
}

bool connectTo(const std::string &host, int port, Deadline dl, Fd &out, std::string &err) {
  sockaddr_in addr{};
  if (!resolve(host, port, addr, err))
    return false;
  std::string last = "timeout";
  while (true) {
    Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
    if (!fd) {
      err = cat("socket: ", std::strerror(errno));
      return false;
    }
    configure(fd.get());
    int rc = ::connect(fd.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      if (::poll(&p, 1, dl.msLeft()) == 1) {
        int soErr = 0;
        socklen_t len = sizeof soErr;
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soErr, &len);
        rc = soErr == 0 ? 0 : -1;
        errno = soErr;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      out = std::move(fd);
      return true;
    }
    last = std::strerror(errno);
    // Refused or unreachable: the listener may not be up yet. Retry.
    if (dl.passed()) {
      err = last;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, dl.msLeft())));
  }
}

bool acceptBy(int listenFd, Deadline dl, Fd &out, std::string &err) {
  while (true) {
    int fd = ::accept(listenFd, nullptr, nullptr);
    if (fd >= 0) {
      configure(fd);
      out = Fd(fd);
      return true;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      err = cat("accept: ", std::strerror(errno));
      return false;
    }
    pollfd p{listenFd, POLLIN, 0};
    if (dl.passed() || ::poll(&p, 1, dl.msLeft()) == 0) {
      if (dl.passed()) {
        err = "timeout";
        return false;
      }
    }
  }
}

std::string localAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    return "127.0.0.1";
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof buf);
  return buf;
}

namespace {

/// One non-blocking send step. False with `f` set on a dead connection.
bool stepSend(Transfer &t, Failure &f, std::string &err) {
  while (!t.sendDone()) {
    const char *src;
    size_t left;
    if (t.sent < sizeof(Frame)) {
      src = reinterpret_cast<const char *>(&t.sendHeader) + t.sent;
      left = sizeof(Frame) - t.sent;
    } else {
      size_t at = t.sent - sizeof(Frame);
      src = static_cast<const char *>(t.sendData) + at;
      left = t.sendHeader.bytes - at;
    }
    ssize_t n = ::send(t.fd, src, left, MSG_NOSIGNAL);
    if (n > 0) {
      t.sent += size_t(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      return true;
    f = errno == EPIPE || errno == ECONNRESET ? Failure::Closed : Failure::Error;
    err = std::strerror(errno);
    return false;
  }
  return true;
}

bool stepRecv(Transfer &t, Failure &f, std::string &err) {
  while (!t.recvDone()) {
    char *dst;
    size_t left;
    if (t.received < sizeof(Frame)) {
      dst = reinterpret_cast<char *>(&t.recvHeader) + t.received;
      left = sizeof(Frame) - t.received;
    } else {
      size_t at = t.received - sizeof(Frame);
      dst = static_cast<char *>(t.recvData) + at;
      left = t.recvHeader.bytes - at;
    }
    ssize_t n = left ? ::recv(t.fd, dst, left, 0) : 0;
    if (n > 0 || left == 0) {
      bool headerNow = t.received < sizeof(Frame) && t.received + size_t(n) >= sizeof(Frame);
      t.received += size_t(n);
      if (headerNow) {
        if (t.recvHeader.magic != Frame().magic) {
          f = Failure::Error;
          err = "received bytes that are not a loom frame";
          return false;
        }
        std::string refused;
        t.recvData = t.place(t.recvHeader, refused);
        if (!refused.empty() || (!t.recvData && t.recvHeader.bytes)) {
          f = Failure::Error;
          err = refused.empty() ? "no room for the payload" : refused;
          return false;
        }
      }
      continue;
    }
    if (n == 0) {
      f = Failure::Closed;
      err = "connection closed";
      return false;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return true;
    f = errno == ECONNRESET ? Failure::Closed : Failure::Error;
    err = std::strerror(errno);
    return false;
  }
  return true;
}

} // namespace

Failure exchange(std::vector<Transfer> &ts, Deadline dl, size_t &bad, std::string &err) {
  std::vector<pollfd> fds;
  std::vector<size_t> which;
  while (true) {
    fds.clear();
    which.clear();
    for (size_t i = 0; i < ts.size(); ++i) {
      Transfer &t = ts[i];
      Failure f = Failure::None;
      if (!stepSend(t, f, err) || !stepRecv(t, f, err)) {
        bad = i;
        return f;
      }
      short events = short((t.sendDone() ? 0 : POLLOUT) | (t.recvDone() ? 0 : POLLIN));
      if (events) {
        fds.push_back({t.fd, events, 0});
        which.push_back(i);
      }
    }
    if (fds.empty())
      return Failure::None;
    if (dl.passed()) {
      bad = which[0];
      err = "timeout";
      return Failure::Timeout;
    }
    int rc = ::poll(fds.data(), fds.size(), dl.msLeft());
    if (rc < 0 && errno != EINTR) {
      bad = which[0];
      err = cat("poll: ", std::strerror(errno));
      return Failure::Error;
    }
    // POLLHUP/POLLERR show up as a failed send or recv on the next pass.
  }
}

std::string pending(const std::vector<Transfer> &ts) {
  std::string s;
  for (const Transfer &t : ts)
    if (!t.sendDone() || !t.recvDone())
      s += (s.empty() ? "" : ", ") + std::to_string(t.peer);
  return s;
}

} // namespace loom::rt::net
