//===- MultiProcessTestUtil.h - Ranks as threads on localhost ---*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The rendezvous and the socket communicator do not care whether their
// peers are processes or threads, so the tests run a world as threads of
// the test process talking TCP over 127.0.0.1.
//===----------------------------------------------------------------------===//
#ifndef LOOM_UNITTESTS_RUNTIME_MULTIPROCESSTESTUTIL_H
#define LOOM_UNITTESTS_RUNTIME_MULTIPROCESSTESTUTIL_H

#include <functional>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace loom::rt::test {

/// A port nobody listens on right now (the kernel's pick for port 0).
inline int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// Runs body(rank) for every rank on its own thread and joins them.
inline void runRanks(int world, const std::function<void(int)> &body) {
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r) ts.emplace_back(body, r);
  for (std::thread &t : ts) t.join();
}

} // namespace loom::rt::test

#endif
