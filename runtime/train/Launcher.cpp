//===- Launcher.cpp - Starting and watching local ranks -------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/Launcher.h"
#include "loom/runtime/CpuAffinity.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace loom::train {

namespace {

using Clock = std::chrono::steady_clock;

/// Seconds the other ranks get to exit after SIGTERM before SIGKILL.
constexpr double kGraceS = 5;

volatile sig_atomic_t gStopSignal = 0;

void onStopSignal(int sig) { gStopSignal = sig; }

/// A port that was free a moment ago (the kernel's pick for port 0).
int pickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = 0;
  socklen_t len = sizeof a;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    ::close(fd);
  return port;
}

std::string describe(int status) {
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped (status " + std::to_string(status) + ")";
}

bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

bool isPeerFailure(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == kExitPeerFailed;
}

struct Child {
  pid_t pid = -1;
  bool done = false;
  int status = 0;
};

pid_t spawn(int rank, int nproc, int port, const std::vector<std::string> &args,
            const std::vector<int> &cpus) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  // The child dies with the launcher, even when the launcher is SIGKILLed.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(1);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  unsetenv("LOOM_RENDEZVOUS_PORT");
  // The rank's CPUs hold across exec and for every thread it starts.
  unsetenv(rt::kRankCpusVar);
  if (!cpus.empty()) {
    std::string err;
    if (!rt::pinCurrentThread(cpus, err)) {
      std::fprintf(stderr, "loom: error: rank %d: %s\n", rank, err.c_str());
      _exit(1);
    }
    setenv(rt::kRankCpusVar, rt::formatCpuList(cpus).c_str(), 1);
  }
  std::vector<char *> argv;
  std::string self = "loom";
  argv.push_back(self.data());
  for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "loom: error: rank %d: cannot run /proc/self/exe: %s\n", rank,
               std::strerror(errno));
  _exit(127);
}

/// Reaps every child that has ended; returns how many did.
int reap(std::vector<Child> &kids, std::vector<int> &order) {
  int n = 0;
  while (true) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0)
      return n;
    for (size_t r = 0; r < kids.size(); ++r)
      if (kids[r].pid == pid) {
        kids[r].done = true;
        kids[r].status = status;
        order.push_back(int(r));
        ++n;
      }
  }
}

bool allDone(const std::vector<Child> &kids) {
  for (const Child &c : kids)
    if (!c.done)
      return false;
  return true;
}

void signalRunning(const std::vector<Child> &kids, int sig) {
  for (const Child &c : kids)
    if (!c.done)
      kill(c.pid, sig);
}

/// SIGTERM to the ranks still running, SIGKILL to those left after the
/// grace period; returns when every child is reaped.
void stopAll(std::vector<Child> &kids, std::vector<int> &order) {
  signalRunning(kids, SIGTERM);
  signalRunning(kids, SIGCONT); // a stopped (hung) rank acts on SIGTERM only once continued
  auto until = Clock::now() + std::chrono::duration<double>(kGraceS);
  while (!allDone(kids) && Clock::now() < until) {
    reap(kids, order);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  signalRunning(kids, SIGKILL);
  while (!allDone(kids)) {
    reap(kids, order);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// `args` without `--name VALUE` / `--name=VALUE`.
std::vector<std::string> withoutFlag(const std::vector<std::string> &args, const std::string &name) {
  std::vector<std::string> out;
  std::string flag = "--" + name;
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k] == flag) {
      ++k; // and its value
      continue;
    }
    if (args[k].rfind(flag + "=", 0) == 0)
      continue;
    out.push_back(args[k]);
  }
  return out;
}

} // namespace

std::vector<std::string> argsWithout(int argc, char **argv, int first, const std::string &name) {
  return withoutFlag(std::vector<std::string>(argv + std::min(first, argc), argv + argc), name);
}

int launchLocalRanks(const std::string &command, int nproc, const std::vector<std::string> &given,
                     const RankPinning &pinning) {
  std::string who = "loom " + command;
  std::vector<std::string> args = given;
  if (!pinning.cpus.empty()) { // each rank's share of the CPUs it is pinned to
    args = withoutFlag(args, "threads");
    args.push_back("--threads");
    args.push_back(std::to_string(pinning.threads));
  }
  if (!pinning.summary.empty())
    std::printf("%s\n", pinning.summary.c_str());
  int port = pickFreePort();
  if (!port) {
    std::fprintf(stderr, "%s: error: no free local port for the rendezvous\n", who.c_str());
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::fflush(nullptr); // children must not repeat buffered output
  std::vector<Child> kids(static_cast<size_t>(nproc));
  std::vector<int> order; // ranks in the order they ended
  for (int r = 0; r < nproc; ++r) {
    kids[size_t(r)].pid =
        spawn(r, nproc, port, args,
              pinning.cpus.empty() ? std::vector<int>() : pinning.cpus[size_t(r)]);
    if (kids[size_t(r)].pid < 0) {
      std::fprintf(stderr, "%s: error: cannot start rank %d: %s\n", who.c_str(), r,
                   std::strerror(errno));
      stopAll(kids, order);
      return 1;
    }
  }
  while (!allDone(kids)) {
    reap(kids, order);
    bool anyFailed = false;
    for (int r : order) anyFailed |= failed(kids[size_t(r)].status);
    if (anyFailed || gStopSignal)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (allDone(kids) && !gStopSignal) {
    bool ok = true;
    for (const Child &c : kids) ok &= !failed(c.status);
    if (ok)
      return 0;
  }
  if (gStopSignal) {
    stopAll(kids, order);
    std::fprintf(stderr, "%s: error: stopped by signal %d; ended all %d ranks\n", who.c_str(),
                 int(gStopSignal), nproc);
    return 128 + int(gStopSignal);
  }
  // A rank failed. The ranks that fail because of it end within moments;
  // give them that moment, so the report names the rank that failed first
  // on its own rather than one that only lost its peer.
  auto settle = Clock::now() + std::chrono::milliseconds(300);
  while (!allDone(kids) && Clock::now() < settle) {
    reap(kids, order);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int cause = -1;
  for (int r : order)
    if (failed(kids[size_t(r)].status) && !isPeerFailure(kids[size_t(r)].status)) {
      cause = r;
      break;
    }
  if (cause < 0)
    for (int r : order)
      if (failed(kids[size_t(r)].status)) {
        cause = r;
        break;
      }
  int running = 0;
  for (const Child &c : kids) running += !c.done;
  stopAll(kids, order);
  // When every failed rank only lost a peer, the peer is hung (still
  // running) or was stopped by us; its name is in the ranks' errors.
  const char *why = isPeerFailure(kids[size_t(cause)].status)
                        ? " after losing a peer (see the ranks' errors above)"
                        : "";
  std::fprintf(stderr, "%s: error: rank %d (pid %d) %s%s; stopped the other %d running rank%s\n",
               who.c_str(), cause, int(kids[size_t(cause)].pid),
               describe(kids[size_t(cause)].status).c_str(), why, running,
               running == 1 ? "" : "s");
  return 1;
}

int launchPinnedLocalRanks(const std::string &command, int nproc,
                           const std::vector<std::string> &args, const std::string &pinRanks,
                           int threads) {
  PinRanks mode;
  RankPinning pinning;
  std::string err;
  if (!parsePinRanks(pinRanks, mode, err) || !planRankPinning(mode, nproc, threads, pinning, err)) {
    std::fprintf(stderr, "loom %s: error: %s\n", command.c_str(), err.c_str());
    return 1;
  }
  return launchLocalRanks(command, nproc, args, pinning);
}

} // namespace loom::train
