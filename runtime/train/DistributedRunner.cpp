//===- DistributedRunner.cpp - One rank per process -----------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Every process runs the same training loop (same compile, same initial
// weights, same batches) and this runner feeds its own rank's piece: its
// rows of the global batch and its slices of the parameters and moments
// (RankSlices.h), as SimulatedRanksRunner does for all ranks at once. The
// state then stays with the rank (in place on its device, or in host
// copies of its own outputs); full tensors exist only on rank 0, and only
// when syncState() gathers the replica-0 pieces over the rendezvous for a
// checkpoint or an export. The loss, grad norm and lr are all-reduced, so
// every rank reads them locally.
//===----------------------------------------------------------------------===//
#include "loom/train/PipelineRunner.h"
#include "loom/train/RankSlices.h"
#include "loom/train/StepRunner.h"
#include "loom/runtime/Executor.h"
#include "loom/runtime/NcclCommunicator.h"
#include "loom/runtime/Rendezvous.h"
#include "loom/runtime/SocketCommunicator.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace loom::train {

namespace {

class DistributedRunner : public StepRunner {
public:
  DistributedRunner(const TrainProgram &tp, std::unique_ptr<rt::Rendezvous> rv,
                    std::unique_ptr<rt::Communicator> comm, std::unique_ptr<rt::Executor> exec)
      : StepRunner(tp), rv_(std::move(rv)), comm_(std::move(comm)), exec_(std::move(exec)) {
    int r = rv_->rank();
    t_ = r % tp.tp;
    c_ = (r / tp.tp) % tp.cp;
    shard_ = (r / (tp.tp * tp.cp)) % tp.dpShard;
    replica_ = r / (tp.tp * tp.cp * tp.dpShard);
    dataIndex_ = r / (tp.tp * tp.cp);
    resident_ = updatesWholeState(exec_->program());
  }

  // A distributed runner's executor and communicator hold sockets (or an
  // NCCL communicator) that must go before the rendezvous.
  ~DistributedRunner() override {
    exec_.reset();
    comm_.reset();
  }

  bool step(TrainState &st, int64_t s, const Batch &batch, bool wantGrads, StepResult &out,
            std::string &err) override {
    size_t P = st.params.size();
    float stepValue = float(s);
    size_t in = 0;
    bool ok = true;
    if (!uploaded_) {
      // Every rank holds the same full initial state; each takes its piece.
      auto put = [&](const std::vector<float> &full, const ParamSlot &slot) {
        std::vector<float> v = localSlice(tp_, full, slot, shard_, t_);
        return exec_->setInput(in++, v.data(), v.size() * 4, err);
      };
      for (size_t i = 0; i < P && ok; ++i) ok = put(st.params[i].value, st.params[i]);
      for (size_t i = 0; i < P && ok; ++i) ok = put(st.expAvg[i], st.params[i]);
      for (size_t i = 0; i < P && ok; ++i) ok = put(st.expAvgSq[i], st.params[i]);
    } else if (!resident_) {
      for (size_t k = 0; k < 3 * P && ok; ++k)
        ok = exec_->setInput(in++, local_[k].data(), local_[k].size() * 4, err);
    }
    in = 3 * P;
    std::vector<int64_t> ids = rankTokens(tp_, batch.inputs, dataIndex_, c_, t_);
    std::vector<int64_t> targets = rankTokens(tp_, batch.targets, dataIndex_, c_, t_);
    if (rv_->rank() == failRank_ && s == failStep_)
      ids.assign(ids.size(), int64_t(1) << 40);
    ok = ok && exec_->setInput(in++, &stepValue, 4, err) &&
         exec_->setInput(in++, ids.data(), ids.size() * 8, err) &&
         exec_->setInput(in++, targets.data(), targets.size() * 8, err);
    if (!ok)
      return false;
    if (!exec_->run(err)) {
      peerFailed_ = comm_->peerFailed();
      return false;
    }
    uploaded_ = stale_ = true;
    if (!exec_->getOutput(0, &out.loss, 4, err) || !exec_->getOutput(1, &out.gradNorm, 4, err) ||
        !exec_->getOutput(2, &out.lr, 4, err))
      return false;
    if (!resident_) {
      local_.resize(3 * P);
      for (size_t k = 0; k < 3 * P; ++k) {
        local_[k].resize(localSize(tp_, st.params[k % P]));
        if (!exec_->getOutput(3 + k, local_[k].data(), local_[k].size() * 4, err))
          return false;
      }
    }
    if (wantGrads && tp_.hasGradients) {
      out.grads.assign(P, {});
      for (size_t i = 0; i < P; ++i) out.grads[i].resize(st.params[i].value.size());
      if (!gatherToRankZero(st, 3 + 3 * P, out.grads, err))
        return false;
    }
    return true;
  }

  bool syncState(TrainState &st, std::string &err) override {
    if (!stale_)
      return true;
    size_t P = st.params.size();
    if (!gatherTrainState(st, rv_->rank() == 0, [&](int kind, std::vector<std::vector<float>> &full) {
          return gatherToRankZero(st, 3 + size_t(kind) * P, full, err);
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
  std::vector<RankDeviceMemory> deviceMemoryPerRank() const override {
    return {{exec_->deviceMemory(), 0}};
  }

private:
  /// Outputs first .. first + P - 1 (parameter-shaped) of every rank of
  /// replica 0, reassembled into `full` on rank 0 (untouched elsewhere).
  bool gatherToRankZero(const TrainState &st, size_t first, std::vector<std::vector<float>> &full,
                        std::string &err) {
    size_t P = st.params.size();
    std::string mine;
    if (replica_ == 0 && c_ == 0) { // parameters are whole along cp
      for (size_t i = 0; i < P; ++i) {
        size_t at = mine.size(), bytes = localSize(tp_, st.params[i]) * 4;
        mine.resize(at + bytes);
        if (!exec_->getOutput(first + i, &mine[at], bytes, err))
          return false;
      }
    }
    std::vector<std::string> all;
    if (!rv_->gather(mine, all, err)) {
      peerFailed_ = true;
      return false;
    }
    if (rv_->rank() != 0)
      return true;
    // Every replica-0 rank packed the same P piece sizes in order, so
    // tensor i starts at the same offset in every rank's bytes.
    size_t offset = 0;
    for (size_t i = 0; i < P; ++i) {
      size_t bytes = localSize(tp_, st.params[i]) * 4;
      bool ok = assembleFull(tp_, st.params[i], full[i], [&](int shard, int t,
                                                             std::vector<float> &piece) {
        size_t r = size_t(rankOfCoords(tp_, 0, shard, t));
        if (all[r].size() < offset + bytes) {
          err = "rank " + std::to_string(r) + " sent fewer state bytes than its shards hold";
          return false;
        }
        std::memcpy(piece.data(), all[r].data() + offset, bytes);
        return true;
      });
      if (!ok)
        return false;
      offset += bytes;
    }
    return true;
  }

  bool holdsStateBetweenSteps() const override { return resident_; }

  std::unique_ptr<rt::Rendezvous> rv_;
  std::unique_ptr<rt::Communicator> comm_;
  std::unique_ptr<rt::Executor> exec_;
  int t_ = 0, c_ = 0, shard_ = 0, replica_ = 0, dataIndex_ = 0;
  bool resident_ = false, uploaded_ = false, stale_ = false, peerFailed_ = false;
  std::vector<std::vector<float>> local_; // this rank's state when not resident
};

} // namespace

std::unique_ptr<StepRunner> StepRunner::createDistributed(const TrainProgram &tp, int threads,
                                                          const std::string &backend,
                                                          std::unique_ptr<rt::Rendezvous> rv,
                                                          int localRank, int localRanks,
                                                          double collectiveTimeoutS,
                                                          std::string &err) {
  if (rv->worldSize() != tp.worldSize()) {
    err = "the plan has " + std::to_string(tp.worldSize()) + " ranks, the job " +
          std::to_string(rv->worldSize()) + " processes";
    return nullptr;
  }
  if (tp.pipeline)
    return createDistributedPipelineRunner(tp, threads, backend, std::move(rv), localRanks,
                                           collectiveTimeoutS, err);
  std::unique_ptr<rt::Communicator> comm;
  if (backend == "cpu")
    comm = rt::SocketCommunicator::create(*rv, collectiveTimeoutS, err);
  else if (backend == "cuda")
    comm = rt::createNcclCommunicator(*rv, localRank, collectiveTimeoutS, err);
  else
    err = "unknown backend '" + backend + "' (available: cpu, cuda)";
  if (!comm)
    return nullptr;
  int hw = std::max(1, int(std::thread::hardware_concurrency()));
  int perRank = std::max(1, (threads > 0 ? threads : hw) / std::max(1, localRanks));
  auto exec = rt::createRankExecutor(tp.program, backend, perRank, comm.get(), rv->rank(), err);
  if (!exec)
    return nullptr;
  return std::make_unique<DistributedRunner>(tp, std::move(rv), std::move(comm), std::move(exec));
}

} // namespace loom::train
