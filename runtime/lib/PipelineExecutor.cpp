//===- PipelineExecutor.cpp - One rank's part of a pipelined step ---------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/PipelineExecutor.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/PipelineBuffers.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <time.h>

namespace loom::rt {

const char *pipePhaseName(PipePhase p) {
  switch (p) {
  case PipePhase::Forward: return "forward";
  case PipePhase::Backward: return "backward";
  case PipePhase::BackwardInput: return "backward_input";
  case PipePhase::BackwardWeight: return "backward_weight";
  case PipePhase::Optimizer: return "optimizer";
  }
  return "?";
}

std::vector<const PipelineFunction *> PipelineProgram::functionsOf(int ppRank) const {
  std::vector<const PipelineFunction *> out;
  for (const PipelineFunction &f : functions)
    if (f.rank == ppRank)
      out.push_back(&f);
  return out;
}

const PipelineFunction *PipelineProgram::optimizerOf(int ppRank) const {
  for (const PipelineFunction &f : functions)
    if (f.rank == ppRank && f.phase == PipePhase::Optimizer)
      return &f;
  return nullptr;
}

namespace {

/// Host buffers for the CPU backend: zeroed, as the vectors they replace.
class HostBuffers : public PipelineBuffers {
public:
  void *allocate(size_t bytes, std::string &) override {
    std::lock_guard<std::mutex> lock(m_);
    live_ += bytes;
    void *p = std::calloc(std::max<size_t>(bytes, 1), 1);
    sizes_[p] = bytes;
    return p;
  }
  void release(void *data) override {
    std::lock_guard<std::mutex> lock(m_);
    live_ -= sizes_[data];
    sizes_.erase(data);
    std::free(data);
  }

private:
  std::mutex m_;
  std::map<void *, size_t> sizes_;
};

} // namespace

std::unique_ptr<PipelineBuffers> createPipelineBuffers(const std::string &backend,
                                                       std::string &err) {
  if (backend == "cpu")
    return std::make_unique<HostBuffers>();
#ifdef LOOM_HAVE_CUDA
  if (backend == "cuda")
    return createCudaPipelineBuffers();
#endif
  err = "pipeline plans run on the cpu or cuda backend, not '" + backend + "'";
  return nullptr;
}

namespace {

/// One tensor between a rank's programs, in its PipelineBuffers (host or
/// device memory); shared by whoever still needs it (a queued send), and
/// released when the last of them lets go.
class Bytes {
public:
  Bytes() = default;
  bool empty() const { return !ptr_; }
  char *data() const { return static_cast<char *>(ptr_.get()); }
  size_t size() const { return size_; }
  /// Replaces the contents with `bytes` zeroed bytes of `mem`.
  bool allocate(PipelineBuffers &mem, size_t bytes, std::string &err) {
    void *p = mem.allocate(bytes, err);
    if (!p)
      return false;
    ptr_ = std::shared_ptr<void>(p, [&mem](void *q) { mem.release(q); });
    size_ = bytes;
    return true;
  }

private:
  std::shared_ptr<void> ptr_;
  size_t size_ = 0;
};

using Clock = std::chrono::steady_clock;

/// Sends to one peer in posting order, in the background: a schedule's
/// SEND never holds its rank up (PipelineSchedule.h).
class Sender {
public:
  Sender(Communicator *comm, int rank, int peer) : comm_(comm), rank_(rank), peer_(peer) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Sender() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::vector<Bytes> message) {
    {
      std::lock_guard<std::mutex> lk(m_);
      queue_.push_back(std::move(message));
    }
    cv_.notify_all();
  }
  /// Waits until everything posted is sent; false with the first failure.
  bool drain(std::string &err) {
    std::unique_lock<std::mutex> lk(m_);
    cv_.wait(lk, [&] { return (queue_.empty() && !busy_) || !failed_.empty(); });
    if (failed_.empty())
      return true;
    err = failed_;
    return false;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> lk(m_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty() && stop_)
        return;
      std::vector<Bytes> message = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lk.unlock();
      std::vector<P2POp> ops;
      for (const Bytes &b : message) ops.push_back(P2POp::sendTo(peer_, b.data(), b.size()));
      std::string err;
      bool ok = failed_.empty() && comm_->sendRecv(rank_, ops, err);
      lk.lock();
      busy_ = false;
      if (!ok && failed_.empty())
        failed_ = err.empty() ? "an earlier send failed" : err;
      cv_.notify_all();
    }
  }
  Communicator *comm_;
  int rank_, peer_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::vector<Bytes>> queue_;
  bool stop_ = false, busy_ = false;
  std::string failed_;
  std::thread thread_;
};

struct Fn {
  const PipelineFunction *f = nullptr;
  std::unique_ptr<Executor> exec;
};

/// Key of a transferred tensor set: (kind, the stage it enters, microbatch).
using Box = std::tuple<int, int, int>;

} // namespace

struct PipelineRank::Impl {
  std::shared_ptr<const PipelineProgram> prog;
  Communicator *comm = nullptr;
  // Declared before every member holding Bytes, so it outlives them.
  std::unique_ptr<PipelineBuffers> memory;
  int worldRank = 0, ppRank = 0, inner = 0;
  std::map<std::pair<int, PipePhase>, Fn> fns; // (stage, phase); the optimizer at stage -1
  std::map<size_t, std::array<std::vector<float>, 3>> state;
  std::map<size_t, std::vector<float>> grads;
  std::map<int64_t, Bytes> acc;
  std::map<std::pair<int, int>, std::map<int64_t, Bytes>> saved, stash;
  std::map<Box, std::map<int64_t, Bytes>> inbox, outbox;
  std::map<int, std::unique_ptr<Sender>> senders;
  uint64_t heldBytes = 0;
  uint64_t peakBuffers = 0; // memory->liveBytes() at its highest this step

  /// `b` = `bytes` zeroed bytes of this rank's memory.
  bool allocate(Bytes &b, size_t bytes, std::string &err) {
    if (!b.allocate(*memory, bytes, err))
      return false;
    peakBuffers = std::max(peakBuffers, memory->liveBytes());
    return true;
  }

  int worldOf(int ppPeer) const { return ppPeer * prog->ranksPerStage + inner; }
  Fn *fn(int stage, PipePhase phase) {
    auto it = fns.find({stage, phase});
    return it == fns.end() ? nullptr : &it->second;
  }
  static uint64_t bytesOf(const Fn &f, bool output, size_t k) {
    const Program &p = f.exec->program();
    return p.buffers[output ? p.outputs[k] : p.inputs[k]].bytes;
  }
  std::string describe(int k) const {
    const PipeAction &a = prog->schedule.actions[size_t(ppRank)][size_t(k)];
    return cat("rank ", worldRank, " (pipeline rank ", ppRank, ") action ", k, " (",
               describeAction(a, prog->schedule.peerOf(a)), ")");
  }
  bool fail(std::string &err, const std::string &why) {
    err = why;
    comm->abort(cat("rank ", worldRank, " failed: ", why));
    return false;
  }

  bool uploadParams(Fn &f, std::string &err) {
    for (size_t k = 0; k < f.f->inputs.size(); ++k) {
      const PipeSlot &s = f.f->inputs[k];
      int which = s.role == PipeRole::Param ? 0 : s.role == PipeRole::ExpAvg ? 1
                  : s.role == PipeRole::ExpAvgSq ? 2 : -1;
      if (which < 0)
        continue;
      const std::vector<float> &v = state[size_t(s.index)][size_t(which)];
      if (!f.exec->setInput(k, v.data(), v.size() * 4, err))
        return false;
    }
    return true;
  }

  /// Runs compute action `a` of microbatch data `tokens`/`targets`.
  bool compute(const PipeAction &a, const int64_t *tokens, const int64_t *targets,
               PipelineStepResult &out, std::string &err) {
    PipePhase phase = a.op == PipeOp::Forward         ? PipePhase::Forward
                      : a.op == PipeOp::Backward      ? PipePhase::Backward
                      : a.op == PipeOp::BackwardInput ? PipePhase::BackwardInput
                                                      : PipePhase::BackwardWeight;
    Fn *f = fn(a.stage, phase);
    if (!f) {
      err = cat("no ", pipePhaseName(phase), " program for stage ", a.stage);
      return false;
    }
    int st = a.stage, i = a.microbatch;
    auto key = std::make_pair(st, i);
    auto input = [&](size_t k, const Bytes &b) {
      if (b.size() != bytesOf(*f, false, k)) {
        err = cat("input ", k, " of ", pipePhaseName(phase), " stage ", st, " has ", b.size(),
                  " bytes, the program ", bytesOf(*f, false, k));
        return false;
      }
      return f->exec->setInput(k, b.data(), b.size(), err);
    };
    for (size_t k = 0; k < f->f->inputs.size(); ++k) {
      const PipeSlot &s = f->f->inputs[k];
      switch (s.role) {
      case PipeRole::Param:
        break; // uploaded at the start of the step
      case PipeRole::Tokens:
      case PipeRole::Targets: {
        const int64_t *rows = s.role == PipeRole::Tokens ? tokens : targets;
        if (!f->exec->setInput(k, rows, bytesOf(*f, false, k), err))
          return false;
        break;
      }
      case PipeRole::Saved:
      case PipeRole::Stash: {
        auto &m = s.role == PipeRole::Saved ? saved[key] : stash[key];
        auto it = m.find(s.index);
        if (it == m.end()) {
          err = cat(s.role == PipeRole::Saved ? "saved activation " : "stashed value ", s.index,
                    " of stage ", st, " microbatch ", i, " is missing (its forward has not run)");
          return false;
        }
        if (!input(k, it->second))
          return false;
        break;
      }
      case PipeRole::Recv: {
        Box box{int(s.transfer), st, i};
        auto it = inbox[box].find(s.index);
        if (it == inbox[box].end()) {
          err = cat("transfer ", s.index, " into stage ", st, " microbatch ", i,
                    " has not arrived (no receive before it)");
          return false;
        }
        if (!input(k, it->second))
          return false;
        break;
      }
      case PipeRole::Accumulator: {
        Bytes &b = acc[s.index];
        if (b.empty() && !allocate(b, bytesOf(*f, false, k), err))
          return false;
        if (!input(k, b))
          return false;
        break;
      }
      default:
        err = cat("a ", pipePhaseName(phase), " program cannot take input role ", int(s.role));
        return false;
      }
    }
    if (!f->exec->run(err))
      return false;
    for (size_t k = 0; k < f->f->outputs.size(); ++k) {
      const PipeSlot &s = f->f->outputs[k];
      float scalar = 0; // Loss, ActSumSq: straight to the host
      Bytes b;
      bool kept = s.role == PipeRole::Saved || s.role == PipeRole::Stash ||
                  s.role == PipeRole::Accumulator || s.role == PipeRole::Send;
      bool scalarOut = s.role == PipeRole::Loss || s.role == PipeRole::ActSumSq;
      if (scalarOut && bytesOf(*f, true, k) != 4) {
        err = cat("output ", k, " of ", pipePhaseName(phase), " stage ", st, " (a scalar) has ",
                  bytesOf(*f, true, k), " bytes");
        return false;
      }
      if (kept && !allocate(b, bytesOf(*f, true, k), err))
        return false;
      if ((kept || scalarOut) &&
          !f->exec->getOutput(k, kept ? static_cast<void *>(b.data()) : &scalar,
                              kept ? b.size() : 4, err))
        return false;
      switch (s.role) {
      case PipeRole::Saved:
      case PipeRole::Stash:
        heldBytes += b.size();
        (s.role == PipeRole::Saved ? saved : stash)[key][s.index] = std::move(b);
        break;
      case PipeRole::Accumulator:
        acc[s.index] = std::move(b);
        break;
      case PipeRole::Loss:
        out.losses[size_t(i)] = scalar;
        break;
      case PipeRole::ActSumSq: {
        float v = scalar;
        if (out.actSumSq.size() <= size_t(s.index)) {
          out.actSumSq.resize(size_t(s.index) + 1, 0);
          out.hasActSumSq.resize(size_t(s.index) + 1, false);
        }
        out.actSumSq[size_t(s.index)] += v;
        out.hasActSumSq[size_t(s.index)] = true;
        break;
      }
      case PipeRole::Send: {
        // Into the stage it enters: on this rank directly, else the outbox
        // of the schedule's SEND.
        Box box{int(s.transfer), int(s.peer), i};
        bool local = prog->schedule.stageRank[size_t(s.peer)] == ppRank;
        (local ? inbox : outbox)[box][s.index] = std::move(b);
        break;
      }
      default:
        break;
      }
    }
    // What this microbatch's stage no longer needs.
    inbox.erase(Box{int(phase == PipePhase::Forward ? TransferKind::Activation
                                                    : TransferKind::Gradient),
                    st, i});
    auto release = [&](std::map<std::pair<int, int>, std::map<int64_t, Bytes>> &m) {
      auto it = m.find(key);
      if (it == m.end())
        return;
      for (auto &[k, b] : it->second) heldBytes -= b.size();
      m.erase(it);
    };
    if (phase == PipePhase::Backward || phase == PipePhase::BackwardWeight) {
      release(saved);
      release(stash);
    }
    out.peakActivationBytes = std::max(out.peakActivationBytes, heldBytes);
    return true;
  }

  /// The receives of one transfer group, in one call.
  bool receive(const std::vector<PipeAction> &group, std::string &err) {
    std::vector<P2POp> ops;
    for (const PipeAction &a : group) {
      bool activation = a.op == PipeOp::RecvActivation;
      // The program that reads it says which tensors and how large.
      Fn *reader = activation ? fn(a.stage, PipePhase::Forward)
                              : (fn(a.stage, PipePhase::Backward) ? fn(a.stage, PipePhase::Backward)
                                                                  : fn(a.stage, PipePhase::BackwardInput));
      if (!reader) {
        err = cat("no program of stage ", a.stage, " receives ", describeAction(a));
        return false;
      }
      int from = worldOf(prog->schedule.peerOf(a));
      TransferKind kind = activation ? TransferKind::Activation : TransferKind::Gradient;
      auto &box = inbox[Box{int(kind), a.stage, a.microbatch}];
      for (size_t k = 0; k < reader->f->inputs.size(); ++k) {
        const PipeSlot &s = reader->f->inputs[k];
        if (s.role != PipeRole::Recv || s.transfer != kind)
          continue;
        Bytes &b = box[s.index];
        if (!allocate(b, bytesOf(*reader, false, k), err))
          return false;
        ops.push_back(P2POp::recvFrom(from, b.data(), b.size()));
      }
    }
    return ops.empty() || comm->sendRecv(worldRank, ops, err);
  }

  bool send(const PipeAction &a, std::string &err) {
    bool activation = a.op == PipeOp::SendActivation;
    int into = activation ? a.stage + 1 : a.stage - 1;
    TransferKind kind = activation ? TransferKind::Activation : TransferKind::Gradient;
    auto it = outbox.find(Box{int(kind), into, a.microbatch});
    if (it == outbox.end()) {
      err = "nothing to send (the compute producing it has not run)";
      return false;
    }
    std::vector<Bytes> message;
    for (auto &[tag, b] : it->second) message.push_back(std::move(b)); // tag order
    outbox.erase(it);
    int peer = worldOf(prog->schedule.peerOf(a));
    auto &s = senders[peer];
    if (!s)
      s = std::make_unique<Sender>(comm, worldRank, peer);
    s->post(std::move(message));
    return true;
  }

  bool optimize(float stepValue, PipelineStepResult &out, std::string &err) {
    Fn *f = fn(-1, PipePhase::Optimizer);
    // Parts of parameters that another rank also holds go both ways first.
    std::vector<P2POp> ops;
    std::map<int64_t, Bytes> received;
    for (size_t k = 0; k < f->f->inputs.size(); ++k) {
      const PipeSlot &s = f->f->inputs[k];
      if (s.role == PipeRole::Recv) {
        Bytes &b = received[s.index];
        if (!allocate(b, bytesOf(*f, false, k), err))
          return false;
        ops.push_back(P2POp::recvFrom(worldOf(int(s.peer)), b.data(), b.size()));
      }
    }
    for (size_t k = 0; k < f->f->outputs.size(); ++k) {
      const PipeSlot &s = f->f->outputs[k];
      if (s.role != PipeRole::Send)
        continue;
      Bytes &b = acc[s.index];
      if (b.empty() && !allocate(b, bytesOf(*f, true, k), err))
        return false;
      ops.push_back(P2POp::sendTo(worldOf(int(s.peer)), b.data(), b.size()));
    }
    if (!ops.empty() && !comm->sendRecv(worldRank, ops, err))
      return false;
    if (!uploadParams(*f, err))
      return false;
    for (size_t k = 0; k < f->f->inputs.size(); ++k) {
      const PipeSlot &s = f->f->inputs[k];
      bool ok = true;
      if (s.role == PipeRole::Step) {
        ok = f->exec->setInput(k, &stepValue, 4, err);
      } else if (s.role == PipeRole::Accumulator || s.role == PipeRole::Recv) {
        Bytes &b = s.role == PipeRole::Recv ? received[s.index] : acc[s.index];
        if (b.empty() && !allocate(b, bytesOf(*f, false, k), err))
          return false;
        ok = f->exec->setInput(k, b.data(), b.size(), err);
      }
      if (!ok)
        return false;
    }
    if (!f->exec->run(err))
      return false;
    for (size_t k = 0; k < f->f->outputs.size(); ++k) {
      const PipeSlot &s = f->f->outputs[k];
      auto read = [&](void *dst, size_t bytes) { return f->exec->getOutput(k, dst, bytes, err); };
      bool ok = true;
      switch (s.role) {
      case PipeRole::GradNorm: ok = read(&out.gradNorm, 4); break;
      case PipeRole::Lr: ok = read(&out.lr, 4); break;
      case PipeRole::Param:
      case PipeRole::ExpAvg:
      case PipeRole::ExpAvgSq: {
        std::vector<float> &v = state[size_t(s.index)][s.role == PipeRole::Param ? 0
                                                       : s.role == PipeRole::ExpAvg ? 1 : 2];
        ok = read(v.data(), v.size() * 4);
        break;
      }
      case PipeRole::Grad: {
        std::vector<float> &g = grads[size_t(s.index)];
        g.resize(bytesOf(*f, true, k) / 4);
        ok = read(g.data(), g.size() * 4);
        break;
      }
      default:
        break;
      }
      if (!ok)
        return false;
    }
    acc.clear(); // the next step accumulates from zero
    return true;
  }
};

PipelineRank::~PipelineRank() = default;

std::unique_ptr<PipelineRank> PipelineRank::create(std::shared_ptr<const PipelineProgram> p,
                                                   int worldRank, Communicator *comm,
                                                   const std::string &backend, int threads,
                                                   std::string &err) {
  std::unique_ptr<PipelineBuffers> memory = createPipelineBuffers(backend, err);
  if (!memory)
    return nullptr;
  std::unique_ptr<PipelineRank> r(new PipelineRank());
  r->impl_ = std::make_unique<Impl>();
  Impl &im = *r->impl_;
  im.memory = std::move(memory);
  im.prog = p;
  im.comm = comm;
  im.worldRank = r->worldRank_ = worldRank;
  im.ppRank = r->ppRank_ = worldRank / p->ranksPerStage;
  im.inner = worldRank % p->ranksPerStage;
  for (const PipelineFunction *f : p->functionsOf(im.ppRank)) {
    Fn fn;
    fn.f = f;
    fn.exec = createRankExecutor(f->program, backend, threads, comm, worldRank, err);
    if (!fn.exec) {
      err = cat(pipePhaseName(f->phase), " of stage ", f->stage, ": ", err);
      return nullptr;
    }
    im.fns[{f->phase == PipePhase::Optimizer ? -1 : f->stage, f->phase}] = std::move(fn);
  }
  const PipelineFunction *opt = p->optimizerOf(im.ppRank);
  if (!opt) {
    err = cat("pipeline rank ", im.ppRank, " has no optimizer program");
    return nullptr;
  }
  for (size_t k = 0; k < opt->inputs.size(); ++k) {
    const PipeSlot &s = opt->inputs[k];
    if (s.role != PipeRole::Param)
      continue;
    r->params_.push_back(size_t(s.index));
    size_t n = opt->program->buffers[opt->program->inputs[k]].numElements();
    for (auto &v : im.state[size_t(s.index)]) v.assign(n, 0.0f);
  }
  return r;
}

DeviceMemory PipelineRank::deviceMemory() const {
  DeviceMemory sum;
  for (const auto &[key, f] : impl_->fns) {
    DeviceMemory m = f.exec->deviceMemory();
    sum.arena += m.arena;
    sum.constants += m.constants;
    sum.workspace += m.workspace;
    sum.communication = std::max(sum.communication, m.communication);
  }
  return sum;
}

size_t PipelineRank::stateElements(size_t index) const {
  auto it = impl_->state.find(index);
  return it == impl_->state.end() ? 0 : it->second[0].size();
}

bool PipelineRank::setState(PipeRole role, size_t index, const std::vector<float> &value,
                            std::string &err) {
  auto it = impl_->state.find(index);
  int which = role == PipeRole::Param ? 0 : role == PipeRole::ExpAvg ? 1 : 2;
  if (it == impl_->state.end() || it->second[size_t(which)].size() != value.size()) {
    err = cat("pipeline rank ", ppRank_, " does not hold parameter ", index,
              it == impl_->state.end() ? "" : " at that size");
    return false;
  }
  it->second[size_t(which)] = value;
  return true;
}

bool PipelineRank::getState(PipeRole role, size_t index, std::vector<float> &value,
                            std::string &err) const {
  auto it = impl_->state.find(index);
  if (it == impl_->state.end()) {
    err = cat("pipeline rank ", ppRank_, " does not hold parameter ", index);
    return false;
  }
  value = it->second[role == PipeRole::Param ? 0 : role == PipeRole::ExpAvg ? 1 : 2];
  return true;
}

bool PipelineRank::getGrad(size_t index, std::vector<float> &value, std::string &err) const {
  auto it = impl_->grads.find(index);
  if (it == impl_->grads.end()) {
    err = cat("pipeline rank ", ppRank_, " has no gradient of parameter ", index,
              " (compiled without returned gradients?)");
    return false;
  }
  value = it->second;
  return true;
}

bool PipelineRank::runStep(float step, const std::vector<const int64_t *> &tokens,
                           const std::vector<const int64_t *> &targets, Clock::time_point epoch,
                           PipelineStepResult &out, std::string &err) {
  Impl &im = *impl_;
  const PipelineSchedule &s = im.prog->schedule;
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - epoch).count(); };
  auto cpuNow = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  };
  out = PipelineStepResult();
  out.losses.assign(size_t(s.microbatches), 0.0f);
  out.stepStart = now();
  im.heldBytes = 0;
  im.peakBuffers = im.memory->liveBytes();
  for (auto &[key, f] : im.fns)
    if (key.first >= 0 && !im.uploadParams(f, err))
      return im.fail(err, cat("rank ", im.worldRank, ": ", err));
  const std::vector<PipeAction> &acts = s.actions[size_t(im.ppRank)];
  for (size_t k = 0; k < acts.size();) {
    const PipeAction &a = acts[k];
    double t0 = now();
    if (!isTransfer(a.op)) {
      int i = a.microbatch;
      double c0 = cpuNow();
      if (!im.compute(a, tokens[size_t(i)], targets[size_t(i)], out, err))
        return im.fail(err, cat(im.describe(int(k)), ": ", err));
      double t1 = now();
      out.timings.push_back({int(k), t0, t1, cpuNow() - c0});
      ++k;
      continue;
    }
    // A group: its sends go out in the background, its receives together.
    size_t end = k;
    std::vector<PipeAction> recvs;
    for (; end < acts.size() && isTransfer(acts[end].op); ++end) {
      const PipeAction &t = acts[end];
      if (t.op == PipeOp::SendActivation || t.op == PipeOp::SendGradient) {
        if (!im.send(t, err))
          return im.fail(err, cat(im.describe(int(end)), ": ", err));
      } else {
        recvs.push_back(t);
      }
    }
    if (!recvs.empty() && !im.receive(recvs, err)) {
      std::string why = cat(im.describe(int(k)), ": ", err);
      err = why;
      return false; // the communicator failed: whoever failed first aborted it
    }
    out.timings.push_back({int(k), t0, now()});
    k = end;
  }
  for (auto &[peer, sender] : im.senders)
    if (!sender->drain(err))
      return false;
  double t0 = now();
  if (!im.optimize(step, out, err)) {
    err = cat("rank ", im.worldRank, " (pipeline rank ", im.ppRank, ") optimizer: ", err);
    return false;
  }
  out.timings.push_back({-1, t0, now()});
  out.peakBufferBytes = im.peakBuffers;
  out.stepEnd = now();
  return true;
}

} // namespace loom::rt
