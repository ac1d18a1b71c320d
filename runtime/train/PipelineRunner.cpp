//===- PipelineRunner.cpp - Training steps of a pipeline plan -------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/PipelineRunner.h"
#include "loom/train/RankSlices.h"
#include "loom/runtime/InProcessCommunicator.h"
#include "loom/runtime/Rendezvous.h"
#include "loom/runtime/SocketCommunicator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

namespace loom::train {

namespace {

using Clock = std::chrono::steady_clock;
using rt::PipeRole;

/// Where world rank r sits: its pipeline rank, and (replica, shard, tp)
/// within the pipeline rank's block of R S T ranks.
struct Coords {
  int pp, replica, shard, t, data;
};

Coords coordsOf(const TrainProgram &tp, int r) {
  int perStage = tp.dpReplicate * tp.dpShard * tp.tp, inner = r % perStage;
  return {r / perStage, inner / (tp.tp * tp.dpShard), (inner / tp.tp) % tp.dpShard, inner % tp.tp,
          inner / tp.tp};
}

/// The lowest pipeline rank holding each parameter (it counts its norm
/// term, and full tensors are read from it).
std::vector<int> ownerOf(const TrainProgram &tp) {
  std::vector<int> owner(tp.params.size(), -1);
  for (int r = tp.pp - 1; r >= 0; --r)
    for (const rt::PipeSlot &s : tp.pipeline->optimizerOf(r)->inputs)
      if (s.role == PipeRole::Param)
        owner[size_t(s.index)] = r;
  return owner;
}

/// Rank r's rows of microbatch i, tokens and targets.
void microbatchRows(const TrainProgram &tp, const Batch &batch, int r, int failRank, int64_t s,
                    int64_t failStep, std::vector<std::vector<int64_t>> &tokens,
                    std::vector<std::vector<int64_t>> &targets) {
  int M = tp.pipeline->microbatches;
  int64_t rowElems = int64_t(batch.inputs.size()) / tp.batch; // one sequence
  int64_t mbRows = tp.localBatch() / M;
  Coords c = coordsOf(tp, r);
  tokens.assign(size_t(M), {});
  targets.assign(size_t(M), {});
  for (int i = 0; i < M; ++i) {
    int64_t first = (c.data * tp.localBatch() + i * mbRows) * rowElems;
    tokens[size_t(i)].assign(batch.inputs.begin() + first,
                             batch.inputs.begin() + first + mbRows * rowElems);
    targets[size_t(i)].assign(batch.targets.begin() + first,
                              batch.targets.begin() + first + mbRows * rowElems);
    if (r == failRank && s == failStep)
      std::fill(tokens[size_t(i)].begin(), tokens[size_t(i)].end(), int64_t(1) << 40);
  }
}

/// The role of gatherTrainState's kind of state.
PipeRole stateRole(int kind) {
  return kind == 0 ? PipeRole::Param : kind == 1 ? PipeRole::ExpAvg : PipeRole::ExpAvgSq;
}

std::vector<const int64_t *> pointers(const std::vector<std::vector<int64_t>> &v) {
  std::vector<const int64_t *> p;
  for (const auto &x : v) p.push_back(x.data());
  return p;
}

/// The step's loss: the mean of the microbatches' (each already the mean
/// over the data-parallel ranks' rows).
float meanLoss(const std::vector<float> &losses) {
  double sum = 0;
  for (float l : losses) sum += l;
  return float(sum / double(losses.size()));
}

class PipelineRunnerBase : public StepRunner {
public:
  explicit PipelineRunnerBase(const TrainProgram &tp) : StepRunner(tp), owner_(ownerOf(tp)) {}
  const PipelineStats &stats() const { return stats_; }

protected:
  /// The pipeline rank of the last stage (it computes the loss).
  int lastStageRank() const {
    const rt::PipelineSchedule &s = tp_.pipeline->schedule;
    return s.stageRank[size_t(s.stages - 1)];
  }
  std::vector<int> owner_;
  PipelineStats stats_;
};

class SimulatedPipelineRunner : public PipelineRunnerBase {
public:
  SimulatedPipelineRunner(const TrainProgram &tp, std::unique_ptr<rt::Communicator> comm,
                          std::vector<std::unique_ptr<rt::PipelineRank>> ranks,
                          std::vector<uint64_t> measured = {})
      : PipelineRunnerBase(tp), comm_(std::move(comm)), ranks_(std::move(ranks)),
        measured_(std::move(measured)) {}

  ~SimulatedPipelineRunner() override {
    ranks_.clear();
    comm_.reset();
  }

  bool step(TrainState &st, int64_t s, const Batch &batch, bool wantGrads, StepResult &out,
            std::string &err) override {
    int N = int(ranks_.size());
    if (!uploaded_) {
      for (int r = 0; r < N; ++r) {
        Coords c = coordsOf(tp_, r);
        for (size_t i : ranks_[size_t(r)]->params()) {
          const ParamSlot &slot = st.params[i];
          bool ok = ranks_[size_t(r)]->setState(PipeRole::Param, i,
                                                localSlice(tp_, slot.value, slot, c.shard, c.t), err) &&
                    ranks_[size_t(r)]->setState(PipeRole::ExpAvg, i,
                                                localSlice(tp_, st.expAvg[i], slot, c.shard, c.t), err) &&
                    ranks_[size_t(r)]->setState(PipeRole::ExpAvgSq, i,
                                                localSlice(tp_, st.expAvgSq[i], slot, c.shard, c.t), err);
          if (!ok) {
            err = "rank " + std::to_string(r) + ": " + err;
            return false;
          }
        }
      }
      uploaded_ = true;
    }
    std::vector<rt::PipelineStepResult> results(static_cast<size_t>(N));
    std::vector<std::string> errs(static_cast<size_t>(N));
    std::vector<char> ok(static_cast<size_t>(N), 1);
    auto epoch = Clock::time_point();
    std::vector<std::thread> threads;
    std::mutex firstMutex;
    std::string first; // the first failure, for communicators that keep no reason
    for (int r = 0; r < N; ++r)
      threads.emplace_back([&, r] {
        std::vector<std::vector<int64_t>> tokens, targets;
        microbatchRows(tp_, batch, r, failRank_, s, failStep_, tokens, targets);
        if (!ranks_[size_t(r)]->runStep(float(s), pointers(tokens), pointers(targets), epoch,
                                        results[size_t(r)], errs[size_t(r)])) {
          ok[size_t(r)] = 0;
          std::string why = "rank " + std::to_string(r) + " failed: " + errs[size_t(r)];
          {
            std::lock_guard<std::mutex> lock(firstMutex);
            if (first.empty())
              first = why;
          }
          comm_->abort(why);
        }
      });
    for (std::thread &t : threads) t.join();
    if (std::find(ok.begin(), ok.end(), 0) != ok.end()) {
      auto *inProcess = dynamic_cast<rt::InProcessCommunicator *>(comm_.get());
      err = inProcess ? inProcess->abortReason() : first;
      return false;
    }
    stale_ = true;
    // The last stage's ranks of replica 0 have the losses; every rank the
    // norm and lr.
    const rt::PipelineStepResult &last = results[size_t(lastStageRank() * (N / tp_.pp))];
    out.loss = meanLoss(last.losses);
    out.gradNorm = results[0].gradNorm;
    out.lr = results[0].lr;
    std::vector<PipelineStats::Rank> record(static_cast<size_t>(N));
    for (int r = 0; r < N; ++r)
      record[size_t(r)] = {results[size_t(r)].timings, results[size_t(r)].peakActivationBytes,
                           results[size_t(r)].peakBufferBytes};
    stats_.steps.push_back(std::move(record));
    size_t P = st.params.size();
    if (wantGrads && tp_.hasGradients) {
      out.grads.assign(P, {});
      for (size_t i = 0; i < P; ++i) {
        out.grads[i].resize(st.params[i].value.size());
        if (!gather(i, PipeRole::Grad, out.grads[i], st.params[i], err))
          return false;
      }
    }
    if (wantGrads && tp_.activationSums) {
      // Sums over the data-parallel ranks (tp peers repeat them) of the
      // pipeline rank that computed each.
      out.activationNorms.assign(tp_.activationSums, 0);
      for (size_t k = 0; k < tp_.activationSums; ++k) {
        double sum = 0;
        for (int r = 0; r < N; ++r) {
          const rt::PipelineStepResult &res = results[size_t(r)];
          if (coordsOf(tp_, r).t == 0 && k < res.hasActSumSq.size() && res.hasActSumSq[k])
            sum += res.actSumSq[k];
        }
        out.activationNorms[k] = std::sqrt(sum);
      }
    }
    return true;
  }

  bool syncState(TrainState &st, std::string &err) override {
    if (!stale_)
      return true;
    if (!gatherTrainState(st, true, [&](int kind, std::vector<std::vector<float>> &full) {
          for (size_t i = 0; i < st.params.size(); ++i)
            if (!gather(i, stateRole(kind), full[i], st.params[i], err))
              return false;
          return true;
        }))
      return false;
    stale_ = false;
    return true;
  }

private:
  /// Full tensor `role` of parameter i from its owner's replica-0 ranks.
  bool gather(size_t i, PipeRole role, std::vector<float> &full, const ParamSlot &slot,
              std::string &err) {
    int perStage = int(ranks_.size()) / tp_.pp;
    return assembleFull(tp_, slot, full, [&](int shard, int t, std::vector<float> &piece) {
      rt::PipelineRank &rank = *ranks_[size_t(owner_[i] * perStage + rankOfCoords(tp_, 0, shard, t))];
      std::vector<float> v;
      bool ok = role == PipeRole::Grad ? rank.getGrad(i, v, err) : rank.getState(role, i, v, err);
      if (ok && v.size() != piece.size()) {
        err = "parameter " + slot.name + ": a rank holds " + std::to_string(v.size()) +
              " values, its slice has " + std::to_string(piece.size());
        ok = false;
      }
      if (ok)
        piece = std::move(v);
      return ok;
    });
  }

  std::vector<RankDeviceMemory> deviceMemoryPerRank() const override {
    std::vector<RankDeviceMemory> v;
    if (measured_.empty())
      return v; // host memory: nothing allocated on a device
    for (size_t r = 0; r < ranks_.size(); ++r)
      v.push_back({ranks_[r]->deviceMemory(), measured_[r]});
    return v;
  }

  std::unique_ptr<rt::Communicator> comm_;
  std::vector<std::unique_ptr<rt::PipelineRank>> ranks_;
  std::vector<uint64_t> measured_; // per rank, on a GPU: what creating it took
  bool uploaded_ = false, stale_ = false;
};

/// Serialization of the per-step results rank 0 needs from every rank.
std::string packFloats(const std::vector<float> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4);
}
std::vector<float> unpackFloats(const std::string &s, size_t at, size_t n) {
  std::vector<float> v(n);
  if (at + n * 4 <= s.size())
    std::memcpy(v.data(), s.data() + at, n * 4);
  return v;
}

class DistributedPipelineRunner : public PipelineRunnerBase {
public:
  DistributedPipelineRunner(const TrainProgram &tp, std::unique_ptr<rt::Rendezvous> rv,
                            std::unique_ptr<rt::Communicator> comm,
                            std::unique_ptr<rt::PipelineRank> rank)
      : PipelineRunnerBase(tp), rv_(std::move(rv)), comm_(std::move(comm)), rank_(std::move(rank)) {}

  ~DistributedPipelineRunner() override {
    rank_.reset();
    comm_.reset();
  }

  bool step(TrainState &st, int64_t s, const Batch &batch, bool wantGrads, StepResult &out,
            std::string &err) override {
    int r = rv_->rank();
    Coords c = coordsOf(tp_, r);
    if (!uploaded_) {
      for (size_t i : rank_->params()) {
        const ParamSlot &slot = st.params[i];
        if (!rank_->setState(PipeRole::Param, i, localSlice(tp_, slot.value, slot, c.shard, c.t), err) ||
            !rank_->setState(PipeRole::ExpAvg, i, localSlice(tp_, st.expAvg[i], slot, c.shard, c.t), err) ||
            !rank_->setState(PipeRole::ExpAvgSq, i,
                             localSlice(tp_, st.expAvgSq[i], slot, c.shard, c.t), err))
          return false;
      }
      uploaded_ = true;
    }
    std::vector<std::vector<int64_t>> tokens, targets;
    microbatchRows(tp_, batch, r, failRank_, s, failStep_, tokens, targets);
    rt::PipelineStepResult res;
    // Timings on the host's steady clock: processes of one machine share
    // it, so rank 0 can lay every rank's actions on one time axis.
    if (!rank_->runStep(float(s), pointers(tokens), pointers(targets), Clock::time_point(), res,
                        err)) {
      peerFailed_ = comm_->peerFailed();
      return false;
    }
    stale_ = true;
    out.gradNorm = res.gradNorm;
    out.lr = res.lr;
    // Rank 0 gathers the losses, the checks and the timings.
    std::ostringstream mine;
    uint32_t nl = uint32_t(res.losses.size()), na = uint32_t(res.actSumSq.size()),
             nt = uint32_t(res.timings.size());
    mine.write(reinterpret_cast<const char *>(&nl), 4);
    mine.write(reinterpret_cast<const char *>(res.losses.data()), nl * 4);
    mine.write(reinterpret_cast<const char *>(&na), 4);
    for (uint32_t k = 0; k < na; ++k) {
      double v = res.hasActSumSq[k] && c.t == 0 ? res.actSumSq[k] : 0;
      mine.write(reinterpret_cast<const char *>(&v), 8);
    }
    mine.write(reinterpret_cast<const char *>(&nt), 4);
    mine.write(reinterpret_cast<const char *>(res.timings.data()), nt * sizeof(rt::ActionTiming));
    mine.write(reinterpret_cast<const char *>(&res.peakActivationBytes), 8);
    std::vector<std::string> all;
    if (!rv_->gather(mine.str(), all, err)) {
      peerFailed_ = true;
      return false;
    }
    if (r == 0) {
      int N = int(all.size()), lastRank = lastStageRank() * (N / tp_.pp);
      std::vector<PipelineStats::Rank> record(static_cast<size_t>(N));
      std::vector<double> act(tp_.activationSums, 0);
      for (int q = 0; q < N; ++q) {
        const std::string &b = all[size_t(q)];
        size_t at = 0;
        auto u32 = [&] {
          uint32_t v = 0;
          if (at + 4 <= b.size()) std::memcpy(&v, b.data() + at, 4);
          at += 4;
          return v;
        };
        uint32_t n = u32();
        std::vector<float> losses = unpackFloats(b, at, n);
        at += n * 4;
        if (q == lastRank)
          out.loss = meanLoss(losses);
        uint32_t a = u32();
        for (uint32_t k = 0; k < a; ++k, at += 8) {
          double v = 0;
          if (at + 8 <= b.size()) std::memcpy(&v, b.data() + at, 8);
          if (k < act.size()) act[k] += v;
        }
        uint32_t t = u32();
        record[size_t(q)].timings.resize(t);
        if (at + t * sizeof(rt::ActionTiming) <= b.size())
          std::memcpy(record[size_t(q)].timings.data(), b.data() + at, t * sizeof(rt::ActionTiming));
        at += t * sizeof(rt::ActionTiming);
        if (at + 8 <= b.size())
          std::memcpy(&record[size_t(q)].peakActivationBytes, b.data() + at, 8);
      }
      stats_.steps.push_back(std::move(record));
      if (wantGrads && tp_.activationSums) {
        out.activationNorms.assign(act.size(), 0);
        for (size_t k = 0; k < act.size(); ++k) out.activationNorms[k] = std::sqrt(act[k]);
      }
    }
    if (wantGrads && tp_.hasGradients) {
      out.grads.assign(st.params.size(), {});
      for (size_t i = 0; i < st.params.size(); ++i) out.grads[i].resize(st.params[i].value.size());
      if (!gatherToRankZero(st, PipeRole::Grad, out.grads, err))
        return false;
    }
    return true;
  }

  bool syncState(TrainState &st, std::string &err) override {
    if (!stale_)
      return true;
    if (!gatherTrainState(st, rv_->rank() == 0, [&](int kind, std::vector<std::vector<float>> &full) {
          return gatherToRankZero(st, stateRole(kind), full, err);
        }))
      return false;
    stale_ = false;
    return true;
  }

  bool finish(std::string &err) override {
    if (rv_->barrier(err))
      return true;
    peerFailed_ = true;
    return false;
  }
  bool peerFailed() const override { return peerFailed_; }

private:
  /// `role` of every parameter, assembled on rank 0 from the replica-0
  /// ranks of the pipeline rank that owns it.
  bool gatherToRankZero(const TrainState &st, PipeRole role, std::vector<std::vector<float>> &full,
                        std::string &err) {
    int r = rv_->rank();
    Coords c = coordsOf(tp_, r);
    std::string mine;
    if (c.replica == 0)
      for (size_t i : rank_->params()) {
        if (owner_[i] != c.pp)
          continue;
        std::vector<float> v;
        bool ok = role == PipeRole::Grad ? rank_->getGrad(i, v, err) : rank_->getState(role, i, v, err);
        if (!ok)
          return false;
        uint64_t index = i, n = v.size();
        mine.append(reinterpret_cast<const char *>(&index), 8);
        mine.append(reinterpret_cast<const char *>(&n), 8);
        mine += packFloats(v);
      }
    std::vector<std::string> all;
    if (!rv_->gather(mine, all, err)) {
      peerFailed_ = true;
      return false;
    }
    if (r != 0)
      return true;
    // piece[(i, world rank)] = values
    std::map<std::pair<size_t, int>, std::vector<float>> pieces;
    for (int q = 0; q < int(all.size()); ++q) {
      const std::string &b = all[size_t(q)];
      for (size_t at = 0; at + 16 <= b.size();) {
        uint64_t index = 0, n = 0;
        std::memcpy(&index, b.data() + at, 8);
        std::memcpy(&n, b.data() + at + 8, 8);
        at += 16;
        pieces[{size_t(index), q}] = unpackFloats(b, at, n);
        at += n * 4;
      }
    }
    int perStage = int(all.size()) / tp_.pp;
    for (size_t i = 0; i < st.params.size(); ++i) {
      bool ok = assembleFull(tp_, st.params[i], full[i], [&](int shard, int t,
                                                             std::vector<float> &piece) {
        int q = owner_[i] * perStage + rankOfCoords(tp_, 0, shard, t);
        auto it = pieces.find({i, q});
        if (it == pieces.end() || it->second.size() != piece.size()) {
          err = "rank " + std::to_string(q) + " sent no " + std::to_string(piece.size()) +
                "-value piece of parameter " + st.params[i].name;
          return false;
        }
        piece = it->second;
        return true;
      });
      if (!ok)
        return false;
    }
    return true;
  }

  std::unique_ptr<rt::Rendezvous> rv_;
  std::unique_ptr<rt::Communicator> comm_;
  std::unique_ptr<rt::PipelineRank> rank_;
  bool uploaded_ = false, stale_ = false, peerFailed_ = false;
};

/// Every rank of a pipeline plan on the one GPU (DevicePipelineRanks).
std::unique_ptr<StepRunner> createDevicePipelineRunner(const TrainProgram &tp, std::string &err) {
  rt::DevicePipelineRanks world;
  if (!rt::createDevicePipelineRanks(tp.pipeline, world, err))
    return nullptr;
  return std::make_unique<SimulatedPipelineRunner>(tp, std::move(world.comm), std::move(world.ranks),
                                                   std::move(world.measured));
}

} // namespace

std::unique_ptr<StepRunner> createPipelineRunner(const TrainProgram &tp, int threads,
                                                 const std::string &backend, std::string &err) {
  int N = tp.worldSize();
  if (backend == "cuda")
    return createDevicePipelineRunner(tp, err);
  auto comm = std::make_unique<rt::InProcessCommunicator>(N);
  int hw = std::max(1, int(std::thread::hardware_concurrency()));
  int perRank = std::max(1, (threads > 0 ? threads : hw) / N);
  std::vector<std::unique_ptr<rt::PipelineRank>> ranks;
  for (int r = 0; r < N; ++r) {
    auto rank = rt::PipelineRank::create(tp.pipeline, r, comm.get(), backend, perRank, err);
    if (!rank) {
      err = "rank " + std::to_string(r) + ": " + err;
      return nullptr;
    }
    ranks.push_back(std::move(rank));
  }
  return std::make_unique<SimulatedPipelineRunner>(tp, std::move(comm), std::move(ranks));
}

std::unique_ptr<StepRunner> createDistributedPipelineRunner(const TrainProgram &tp, int threads,
                                                            const std::string &backend,
                                                            std::unique_ptr<rt::Rendezvous> rv,
                                                            int localRanks,
                                                            double collectiveTimeoutS,
                                                            std::string &err) {
  if (backend != "cpu") {
    err = "pipeline plans run one process per rank on the cpu backend (not '" + backend + "')";
    return nullptr;
  }
  std::unique_ptr<rt::Communicator> comm = rt::SocketCommunicator::create(*rv, collectiveTimeoutS, err);
  if (!comm)
    return nullptr;
  int hw = std::max(1, int(std::thread::hardware_concurrency()));
  int perRank = std::max(1, (threads > 0 ? threads : hw) / std::max(1, localRanks));
  auto rank = rt::PipelineRank::create(tp.pipeline, rv->rank(), comm.get(), backend, perRank, err);
  if (!rank)
    return nullptr;
  return std::make_unique<DistributedPipelineRunner>(tp, std::move(rv), std::move(comm),
                                                     std::move(rank));
}

const PipelineStats *pipelineStats(const StepRunner &r) {
  auto *p = dynamic_cast<const PipelineRunnerBase *>(&r);
  return p ? &p->stats() : nullptr;
}

RankMemory pipelineRankMemory(const TrainProgram &tp) {
  RankMemory m;
  const rt::PipelineFunction *opt = tp.pipeline->optimizerOf(0);
  const rt::Program &p = *opt->program;
  for (size_t k = 0; k < opt->inputs.size(); ++k) {
    uint64_t bytes = p.buffers[p.inputs[k]].bytes;
    switch (opt->inputs[k].role) {
    case PipeRole::Param: m.params += bytes; break;
    case PipeRole::ExpAvg:
    case PipeRole::ExpAvgSq: m.optimizer += bytes; break;
    case PipeRole::Accumulator:
    case PipeRole::Recv: m.grads += bytes; break;
    default: break;
    }
  }
  return m;
}

namespace {

bool isCompute(const rt::PipelineSchedule &s, int rank, int action) {
  return action >= 0 && !rt::isTransfer(s.actions[size_t(rank)][size_t(action)].op);
}

} // namespace

std::string pipelineTraceJson(const TrainProgram &tp, const PipelineStats &stats) {
  const rt::PipelineSchedule &s = tp.pipeline->schedule;
  int perStage = tp.pipeline->ranksPerStage;
  double origin = INFINITY;
  for (const auto &step : stats.steps)
    for (const auto &rank : step)
      for (const rt::ActionTiming &t : rank.timings) origin = std::min(origin, t.start);
  std::ostringstream j;
  j << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto event = [&](const std::string &name, const char *cat, int tid, double start, double end,
                   const std::string &args) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, "
                  "\"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}}",
                  first ? "" : ",\n", name.c_str(), cat, tid, (start - origin) * 1e6,
                  std::max(0.0, end - start) * 1e6, args.c_str());
    j << buf;
    first = false;
  };
  size_t N = stats.steps.empty() ? 0 : stats.steps[0].size();
  for (size_t r = 0; r < N; ++r) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %zu, \"args\": "
                  "{\"name\": \"rank %zu (pipeline rank %zu)\"}}",
                  first ? "" : ",\n", r, r, r / size_t(perStage));
    j << buf;
    first = false;
  }
  for (size_t step = 0; step < stats.steps.size(); ++step)
    for (size_t r = 0; r < stats.steps[step].size(); ++r) {
      int ppRank = int(r) / perStage;
      for (const rt::ActionTiming &t : stats.steps[step][r].timings) {
        std::string args = "\"step\": " + std::to_string(step);
        if (t.action < 0) {
          event("optimizer", "optimizer", int(r), t.start, t.end, args);
          continue;
        }
        const rt::PipeAction &a = s.actions[size_t(ppRank)][size_t(t.action)];
        std::string name = std::string(rt::pipeOpName(a.op)) + " s" + std::to_string(a.stage) +
                           " mb" + std::to_string(a.microbatch);
        args += ", \"stage\": " + std::to_string(a.stage) +
                ", \"microbatch\": " + std::to_string(a.microbatch);
        if (!rt::isTransfer(a.op))
          args += ", \"cpu_ms\": " + std::to_string(t.cpu * 1e3);
        event(name, rt::isTransfer(a.op) ? "transfer" : "compute", int(r), t.start, t.end, args);
      }
    }
  j << "\n]}\n";
  return j.str();
}

std::vector<double> measuredIdleFraction(const TrainProgram &tp, const PipelineStats &stats) {
  const rt::PipelineSchedule &s = tp.pipeline->schedule;
  int perStage = tp.pipeline->ranksPerStage;
  size_t N = stats.steps.empty() ? 0 : stats.steps[0].size();
  std::vector<double> idle(N, 0);
  size_t counted = 0;
  for (size_t step = stats.steps.size() > 1 ? 1 : 0; step < stats.steps.size(); ++step) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t r = 0; r < N; ++r)
      for (const rt::ActionTiming &t : stats.steps[step][r].timings)
        if (t.action >= 0)
          lo = std::min(lo, t.start), hi = std::max(hi, t.end);
    if (!(hi > lo))
      continue;
    for (size_t r = 0; r < N; ++r) {
      double busy = 0;
      for (const rt::ActionTiming &t : stats.steps[step][r].timings)
        if (isCompute(s, int(r) / perStage, t.action))
          busy += t.end - t.start;
      idle[r] += 1 - busy / (hi - lo);
    }
    ++counted;
  }
  for (double &v : idle) v /= double(std::max<size_t>(1, counted));
  return idle;
}

bool reportPipelineRun(const TrainProgram &tp, const StepRunner &r, const std::string &tracePath,
                       std::string &err) {
  const PipelineStats *stats = pipelineStats(r);
  if (!stats || stats->steps.empty())
    return true;
  const rt::PipelineProgram &pp = *tp.pipeline;
  const rt::PipelineSchedule &s = pp.schedule;
  int perStage = pp.ranksPerStage;
  size_t N = stats->steps[0].size();
  // Mean time of each compute kind per stage, over the steps after the
  // first and every rank that runs the stage.
  std::vector<rt::StageCost> costs(static_cast<size_t>(s.stages));
  std::vector<std::array<double, 4>> sum(static_cast<size_t>(s.stages), {0, 0, 0, 0});
  std::vector<std::array<int, 4>> count(static_cast<size_t>(s.stages), {0, 0, 0, 0});
  for (size_t step = stats->steps.size() > 1 ? 1 : 0; step < stats->steps.size(); ++step)
    for (size_t q = 0; q < N; ++q)
      for (const rt::ActionTiming &t : stats->steps[step][q].timings) {
        if (t.action < 0)
          continue;
        const rt::PipeAction &a = s.actions[q / size_t(perStage)][size_t(t.action)];
        if (rt::isTransfer(a.op))
          continue;
        size_t kind = size_t(a.op); // F, B, I, W
        sum[size_t(a.stage)][kind] += t.end - t.start;
        ++count[size_t(a.stage)][kind];
      }
  // Saved activations per microbatch of each stage: what its forward (and
  // its backward's input half) return for later.
  for (const rt::PipelineFunction &f : pp.functions) {
    if (f.stage < 0)
      continue;
    rt::StageCost &c = costs[size_t(f.stage)];
    if (f.phase == rt::PipePhase::Forward)
      c.activationBytes = 0;
  }
  for (const rt::PipelineFunction &f : pp.functions) {
    if (f.stage < 0 || (f.phase != rt::PipePhase::Forward && f.phase != rt::PipePhase::BackwardInput))
      continue;
    for (size_t k = 0; k < f.outputs.size(); ++k)
      if (f.outputs[k].role == PipeRole::Saved || f.outputs[k].role == PipeRole::Stash)
        costs[size_t(f.stage)].activationBytes += double(f.program->buffers[f.program->outputs[k]].bytes);
  }
  for (int st = 0; st < s.stages; ++st) {
    auto mean = [&](int k) { return count[size_t(st)][size_t(k)] ? sum[size_t(st)][size_t(k)] / count[size_t(st)][size_t(k)] : 0; };
    rt::StageCost &c = costs[size_t(st)];
    c.forward = mean(0), c.backward = mean(1), c.backwardInput = mean(2), c.backwardWeight = mean(3);
  }
  rt::ScheduleTimeline predicted;
  if (!rt::simulateSchedule(s, costs, predicted, err))
    return false;
  std::vector<double> idle = measuredIdleFraction(tp, *stats);
  std::printf("pipeline %s: %d ranks, %d stages, %d microbatches; idle fraction per rank, measured "
              "over steps %s (the schedule's own timeline with this run's mean action times):\n",
              s.name.c_str(), s.ranks, s.stages, s.microbatches,
              stats->steps.size() > 1 ? ("1.." + std::to_string(stats->steps.size() - 1)).c_str()
                                      : "0");
  for (size_t q = 0; q < N; ++q)
    std::printf("  rank %zu: %.1f%% (%.1f%%)\n", q, 100 * idle[q],
                100 * predicted.idleFraction[q / size_t(perStage)]);
  double mean = 0;
  for (double v : idle) mean += v / double(N);
  std::printf("  mean: %.1f%% (%.1f%%)", 100 * mean, 100 * predicted.bubble());
  if (s.kind == rt::ScheduleKind::GPipe || s.kind == rt::ScheduleKind::OneFOneB)
    std::printf("; (P - 1) / (M + P - 1) = %.1f%%",
                100.0 * (s.ranks - 1) / double(s.microbatches + s.ranks - 1));
  std::printf("\n");
  std::printf("saved activations held at once, per rank, measured (the schedule's peak from the "
              "programs' saved bytes):\n");
  for (size_t q = 0; q < N; ++q) {
    uint64_t peak = 0;
    for (const auto &step : stats->steps) peak = std::max(peak, step[q].peakActivationBytes);
    std::printf("  rank %zu: %llu B (%.0f B, %d microbatch-stages)\n", q, (unsigned long long)peak,
                predicted.peakActivationBytes[q / size_t(perStage)],
                predicted.peakInFlight[q / size_t(perStage)]);
  }
  // On a GPU: what each rank's executors allocated, and the stage tensors
  // (PipelineBuffers) at their peak beside them.
  std::vector<RankDeviceMemory> device = r.deviceMemoryPerRank();
  if (!device.empty())
    std::printf("device memory per rank, bytes (arena constants workspace communication | stage "
                "tensors at peak | measured at creation):\n");
  for (size_t q = 0; q < device.size(); ++q) {
    uint64_t peak = 0;
    for (const auto &step : stats->steps) peak = std::max(peak, step[q].peakBufferBytes);
    const rt::DeviceMemory &m = device[q].allocated;
    std::printf("  rank %zu: %llu %llu %llu %llu | %llu | %llu\n", q, (unsigned long long)m.arena,
                (unsigned long long)m.constants, (unsigned long long)m.workspace,
                (unsigned long long)m.communication, (unsigned long long)peak,
                (unsigned long long)device[q].measured);
  }
  if (!tracePath.empty()) {
    std::FILE *f = std::fopen(tracePath.c_str(), "w");
    std::string json = pipelineTraceJson(tp, *stats);
    if (!f || std::fwrite(json.data(), 1, json.size(), f) != json.size()) {
      if (f)
        std::fclose(f);
      err = "cannot write the trace to '" + tracePath + "'";
      return false;
    }
    std::fclose(f);
    std::printf("wrote %s\n", tracePath.c_str());
  }
  return true;
}

} // namespace loom::train
