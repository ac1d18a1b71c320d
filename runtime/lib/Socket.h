//===- Socket.h - TCP with deadlines for the multi-process runtime -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The rendezvous and the socket communicator move bytes between ranks over
// TCP (IPv4). Nothing here blocks without a deadline: sockets are
// non-blocking and every wait is a poll() bounded by the time left, so a
// peer that hangs becomes a timeout and a peer that dies becomes a closed
// connection, both reported with the peer's rank by the caller.
//
// Messages are frames: a fixed 32-byte header (magic, kind, tag, check,
// payload bytes) and the payload. exchange() drives sends and receives to
// many peers at once, so two ranks that both send a large buffer before
// reading never wait on each other's full socket buffers.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_LIB_SOCKET_H
#define LOOM_RUNTIME_LIB_SOCKET_H

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::rt::net {

using Clock = std::chrono::steady_clock;

/// A point in time the current operation must finish by.
struct Deadline {
  Clock::time_point at;
  static Deadline after(double seconds);
  /// Milliseconds left for poll(): 0 once passed.
  int msLeft() const;
  bool passed() const { return Clock::now() >= at; }
};

/// An owned file descriptor (closed on destruction; movable).
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd &operator=(Fd &&o) noexcept;
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset();

private:
  int fd_ = -1;
};

/// Listens on every interface at `port` (0: a free port, returned in
/// `boundPort`). The socket is non-blocking.
bool listenOn(int port, Fd &out, int &boundPort, std::string &err);

/// Connects to `host:port`, retrying every 100 ms while nobody listens
/// there yet, until `dl`. The socket is non-blocking with TCP_NODELAY.
bool connectTo(const std::string &host, int port, Deadline dl, Fd &out, std::string &err);

/// Accepts one connection by `dl`; false with err "timeout" when none came.
bool acceptBy(int listenFd, Deadline dl, Fd &out, std::string &err);

/// The IPv4 address this end of a connected socket uses ("10.0.0.5"): the
/// address peers on that network can reach this process at.
std::string localAddress(int fd);

/// Fixed-size header in front of every payload.
struct Frame {
  uint32_t magic = 0x4d4f4f4c; // "LOOM"
  uint32_t kind = 0;
  uint64_t tag = 0;   // sequence number / rank, meaning set by the caller
  uint64_t check = 0; // caller's consistency value (e.g. an instruction hash)
  uint64_t bytes = 0; // payload length
};
static_assert(sizeof(Frame) == 32, "Frame is sent as raw bytes");

/// One peer's part in an exchange: optionally a frame to send, optionally
/// a frame to receive.
struct Transfer {
  int fd = -1;
  int peer = -1; // rank, for the caller's messages
  // Sending: header then `sendData`.
  bool send = false;
  Frame sendHeader;
  const void *sendData = nullptr;
  // Receiving: the header, then `place` says where its payload goes (it
  // returns null with `err` set to refuse a header that is not expected).
  bool recv = false;
  Frame recvHeader;
  std::function<void *(const Frame &, std::string &err)> place;

  // Progress (exchange() maintains these).
  size_t sent = 0, received = 0;
  void *recvData = nullptr;
  bool sendDone() const { return !send || sent == sizeof(Frame) + sendHeader.bytes; }
  bool recvDone() const { return !recv || received == sizeof(Frame) + recvHeader.bytes; }
};

enum class Failure { None, Timeout, Closed, Refused, Error };

/// Drives every transfer to completion by `dl`. On failure returns the
/// kind, sets `bad` to the index of the transfer at fault (for Timeout: the
/// first unfinished one; see pending()) and `err` to the detail.
Failure exchange(std::vector<Transfer> &ts, Deadline dl, size_t &bad, std::string &err);

/// The peers whose transfers are unfinished, "1, 3" (for timeout messages).
std::string pending(const std::vector<Transfer> &ts);

} // namespace loom::rt::net

#endif
