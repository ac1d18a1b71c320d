//===- StepRunner.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/StepRunner.h"
#include "loom/train/PipelineRunner.h"
#include "loom/train/RankSlices.h"
#include "loom/runtime/Executor.h"
#include "loom/runtime/SimulatedRanks.h"

#include <cmath>
#include <cstring>

namespace loom::train {

RankMemory StepRunner::perRank() const {
  if (tp_.pipeline)
    return pipelineRankMemory(tp_);
  const rt::Program &p = *tp_.program;
  size_t P = tp_.params.size();
  RankMemory m;
  for (size_t i = 0; i < P; ++i) {
    m.params += p.buffers[p.inputs[i]].bytes;
    m.optimizer += p.buffers[p.inputs[P + i]].bytes + p.buffers[p.inputs[2 * P + i]].bytes;
  }
  for (const rt::Instr &I : p.instrs)
    if (I.op == rt::OpCode::AdamW)
      m.grads += p.buffers[I.in[1]].bytes;
  return m;
}

RankMemory StepRunner::oneDevice() const {
  RankMemory m;
  for (const ParamSlot &s : tp_.params) {
    m.params += s.value.size() * 4;
    m.grads += s.value.size() * 4;
    m.optimizer += 2 * s.value.size() * 4;
  }
  return m;
}

bool updatesWholeState(const rt::Program &p) {
  size_t n = p.inputs.size() >= 3 ? p.inputs.size() - 3 : 0; // all but step, tokens, targets
  if (p.updates.size() != n)
    return false;
  for (size_t k = 0; k < n; ++k) {
    bool found = false;
    for (const rt::InPlaceUpdate &u : p.updates)
      found |= u.input == p.inputs[k] && u.output == p.outputs[3 + k];
    if (!found) return false;
  }
  return true;
}

namespace {

/// Reads `count` outputs starting at `first` into `dst` (one per parameter).
bool readAll(rt::Executor &e, size_t first, std::vector<std::vector<float>> &dst,
             std::string &err) {
  for (size_t i = 0; i < dst.size(); ++i)
    if (!e.getOutput(first + i, dst[i].data(), dst[i].size() * 4, err))
      return false;
  return true;
}

class SingleDeviceRunner : public StepRunner {
public:
  SingleDeviceRunner(const TrainProgram &tp, std::unique_ptr<rt::Executor> e)
      : StepRunner(tp), exec_(std::move(e)), resident_(updatesWholeState(exec_->program())) {}

  // When the program updates every parameter and moment in place
  // (Program::updates), the state lives on the device: uploaded on the
  // first step, downloaded only when syncState() asks.
  bool step(TrainState &st, int64_t s, const Batch &batch, bool wantGrads, StepResult &out,
            std::string &err) override {
    size_t P = st.params.size();
    float stepValue = float(s);
    size_t in = 3 * P;
    bool ok = resident_ && uploaded_ ? true : putState(st, err);
    ok = ok && exec_->setInput(in++, &stepValue, 4, err) &&
         exec_->setInput(in++, batch.inputs.data(), batch.inputs.size() * 8, err) &&
         exec_->setInput(in++, batch.targets.data(), batch.targets.size() * 8, err) &&
         exec_->run(err) && exec_->getOutput(0, &out.loss, 4, err) &&
         exec_->getOutput(1, &out.gradNorm, 4, err) && exec_->getOutput(2, &out.lr, 4, err);
    if (!ok)
      return false;
    uploaded_ = true;
    stale_ = true;
    if (!resident_ && !syncState(st, err))
      return false;
    if (wantGrads && tp_.hasGradients) {
      out.grads.assign(P, {});
      for (size_t i = 0; i < P; ++i) out.grads[i].resize(st.params[i].value.size());
      if (!readAll(*exec_, 3 + 3 * P, out.grads, err))
        return false;
    }
    if (wantGrads && tp_.activationSums) {
      size_t first = 3 + 3 * P + (tp_.hasGradients ? P : 0);
      out.activationNorms.assign(tp_.activationSums, 0);
      for (size_t k = 0; k < tp_.activationSums; ++k) {
        float v = 0;
        if (!exec_->getOutput(first + k, &v, 4, err))
          return false;
        out.activationNorms[k] = std::sqrt(double(v));
      }
    }
    return true;
  }

  bool syncState(TrainState &st, std::string &err) override {
    if (!stale_)
      return true;
    size_t P = st.params.size();
    std::vector<std::vector<float>> params(P);
    for (size_t i = 0; i < P; ++i) params[i].resize(st.params[i].value.size());
    if (!readAll(*exec_, 3, params, err) || !readAll(*exec_, 3 + P, st.expAvg, err) ||
        !readAll(*exec_, 3 + 2 * P, st.expAvgSq, err))
      return false;
    for (size_t i = 0; i < P; ++i) st.params[i].value = std::move(params[i]);
    stale_ = false;
    return true;
  }

  bool snapshotState(const TrainState &st, StateReader &read, std::string &err) override {
    read = nullptr;
    if (!resident_ || !stale_)
      return true;
    size_t P = st.params.size();
    std::vector<size_t> outputs(3 * P);
    for (size_t k = 0; k < 3 * P; ++k) outputs[k] = 3 + k; // params, exp_avg, exp_avg_sq
    if (!exec_->snapshotOutputs(outputs, err))
      return false;
    rt::Executor *exec = exec_.get();
    read = [exec, P](TrainState &s, std::string &why) {
      for (size_t k = 0; k < 3 * P; ++k) {
        std::vector<float> &dst =
            k < P ? s.params[k].value : k < 2 * P ? s.expAvg[k - P] : s.expAvgSq[k - 2 * P];
        if (!exec->readSnapshot(k, dst.data(), dst.size() * 4, why))
          return false;
      }
      return true;
    };
    return true;
  }

  std::vector<RankDeviceMemory> deviceMemoryPerRank() const override {
    return {{exec_->deviceMemory(), 0}};
  }

private:
  bool putState(const TrainState &st, std::string &err) {
    size_t in = 0;
    bool ok = true;
    for (size_t i = 0; i < st.params.size() && ok; ++i)
      ok = exec_->setInput(in++, st.params[i].value.data(), st.params[i].value.size() * 4, err);
    for (size_t i = 0; i < st.params.size() && ok; ++i)
      ok = exec_->setInput(in++, st.expAvg[i].data(), st.expAvg[i].size() * 4, err);
    for (size_t i = 0; i < st.params.size() && ok; ++i)
      ok = exec_->setInput(in++, st.expAvgSq[i].data(), st.expAvgSq[i].size() * 4, err);
    return ok;
  }

  bool holdsStateBetweenSteps() const override { return resident_; }

  std::unique_ptr<rt::Executor> exec_;
  bool resident_;
  bool uploaded_ = false, stale_ = false;
};

class SimulatedRanksRunner : public StepRunner {
public:
  SimulatedRanksRunner(const TrainProgram &tp, std::unique_ptr<rt::SimulatedRanks> w)
      : StepRunner(tp), world_(std::move(w)), resident_(updatesWholeState(*tp.program)) {}

  int rankOf(int rep, int shard, int t) const { return rankOfCoords(tp_, rep, shard, t); }

  std::vector<float> local(const std::vector<float> &full, const ParamSlot &slot, int shard,
                           int t) const {
    return localSlice(tp_, full, slot, shard, t);
  }

  /// Reassembles output `output` (parameter-shaped) from the replica-0 ranks.
  bool gather(size_t output, std::vector<float> &full, const ParamSlot &slot, std::string &err) {
    return assembleFull(tp_, slot, full, [&](int shard, int t, std::vector<float> &piece) {
      return world_->rank(rankOf(0, shard, t))
          .getOutput(output, piece.data(), piece.size() * 4, err);
    });
  }

  // As on one device: when every rank's program updates its parameter and
  // moment slices in place, the state lives on the ranks (uploaded on the
  // first step, gathered only when syncState() asks), which on the GPU
  // saves copying the whole model in and out every step.
  bool step(TrainState &st, int64_t s, const Batch &batch, bool wantGrads, StepResult &out,
            std::string &err) override {
    size_t P = st.params.size();
    int N = world_->size(), T = tp_.tp, S = tp_.dpShard, C = tp_.cp;
    float stepValue = float(s);
    bool putState = !(resident_ && uploaded_);
    for (int r = 0; r < N; ++r) {
      rt::Executor &e = world_->rank(r);
      int t = r % T, c = (r / T) % C, shard = (r / (T * C)) % S, dataIndex = r / (T * C);
      size_t in = putState ? 0 : 3 * P;
      auto put = [&](const std::vector<float> &full, const ParamSlot &slot) {
        std::vector<float> v = local(full, slot, shard, t);
        return e.setInput(in++, v.data(), v.size() * 4, err);
      };
      bool ok = true;
      for (size_t i = 0; i < P && ok && putState; ++i) ok = put(st.params[i].value, st.params[i]);
      for (size_t i = 0; i < P && ok && putState; ++i) ok = put(st.expAvg[i], st.params[i]);
      for (size_t i = 0; i < P && ok && putState; ++i) ok = put(st.expAvgSq[i], st.params[i]);
      // Data-parallel rank d = r / (T C) takes the d-th block of rows of
      // the global batch, cp rank c its load-balanced chunks of them;
      // tensor-parallel ranks share their tokens, or split them (sequence
      // parallelism without loss parallelism).
      std::vector<int64_t> ids = rankTokens(tp_, batch.inputs, dataIndex, c, t);
      std::vector<int64_t> targets = rankTokens(tp_, batch.targets, dataIndex, c, t);
      if (r == failRank_ && s == failStep_)
        ids.assign(ids.size(), int64_t(1) << 40);
      ok = ok && e.setInput(in++, &stepValue, 4, err) &&
           e.setInput(in++, ids.data(), ids.size() * 8, err) &&
           e.setInput(in++, targets.data(), targets.size() * 8, err);
      if (!ok) {
        err = "rank " + std::to_string(r) + ": " + err;
        return false;
      }
    }
    if (!world_->run(err))
      return false;
    uploaded_ = true;
    stale_ = true;
    // Scalars are identical on every rank (all-reduced); read rank 0's.
    rt::Executor &r0 = world_->rank(0);
    if (!r0.getOutput(0, &out.loss, 4, err) || !r0.getOutput(1, &out.gradNorm, 4, err) ||
        !r0.getOutput(2, &out.lr, 4, err))
      return false;
    if (!resident_ && !syncState(st, err))
      return false;
    if (wantGrads && tp_.hasGradients) {
      out.grads.assign(P, {});
      for (size_t i = 0; i < P; ++i) {
        out.grads[i].resize(st.params[i].value.size());
        if (!gather(3 + 3 * P + i, out.grads[i], st.params[i], err))
          return false;
      }
    }
    if (wantGrads && tp_.activationSums) {
      // Partial sums over the data-parallel and cp ranks (their tp peers
      // hold the same replicated stream, unless sequence parallelism split
      // it): add them, then take the root.
      size_t first = 3 + 3 * P + (tp_.hasGradients ? P : 0);
      out.activationNorms.assign(tp_.activationSums, 0);
      for (size_t k = 0; k < tp_.activationSums; ++k) {
        double sum = 0;
        for (int r = 0; r < N; r += tp_.activationsSplitOverTp ? 1 : T) {
          float v = 0;
          if (!world_->rank(r).getOutput(first + k, &v, 4, err))
            return false;
          sum += v;
        }
        out.activationNorms[k] = std::sqrt(sum);
      }
    }
    return true;
  }

  bool syncState(TrainState &st, std::string &err) override {
    if (!stale_)
      return true;
    for (size_t i = 0, P = st.params.size(); i < P; ++i)
      if (!gather(3 + i, st.params[i].value, st.params[i], err) ||
          !gather(3 + P + i, st.expAvg[i], st.params[i], err) ||
          !gather(3 + 2 * P + i, st.expAvgSq[i], st.params[i], err))
        return false;
    stale_ = false;
    return true;
  }

  std::vector<RankDeviceMemory> deviceMemoryPerRank() const override {
    std::vector<RankDeviceMemory> v;
    for (int r = 0; r < world_->size(); ++r)
      v.push_back({world_->rank(r).deviceMemory(), world_->measuredDeviceBytes(r)});
    return v;
  }

  bool holdsStateBetweenSteps() const override { return resident_; }

private:
  std::unique_ptr<rt::SimulatedRanks> world_;
  bool resident_;
  bool uploaded_ = false, stale_ = false;
};

} // namespace

std::unique_ptr<StepRunner> StepRunner::create(const TrainProgram &tp, int threads,
                                               std::string &err, const std::string &backend) {
  if (tp.pipeline)
    return createPipelineRunner(tp, threads, backend, err);
  if (tp.worldSize() == 1) {
    auto exec = rt::createExecutor(tp.program, backend, threads, err);
    if (!exec)
      return nullptr;
    return std::make_unique<SingleDeviceRunner>(tp, std::move(exec));
  }
  int perRank = threads > 0 ? std::max(1, threads / tp.worldSize()) : 0;
  auto world = rt::SimulatedRanks::create(tp.program, tp.worldSize(), backend, perRank, err);
  if (!world)
    return nullptr;
  return std::make_unique<SimulatedRanksRunner>(tp, std::move(world));
}

} // namespace loom::train
