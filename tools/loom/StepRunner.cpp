//===- StepRunner.cpp -----------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "StepRunner.h"
#include "loom/runtime/Executor.h"
#include "loom/runtime/SimulatedRanks.h"

#include <cstring>

namespace loom::tools {

RankMemory StepRunner::perRank() const {
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
      : StepRunner(tp), exec_(std::move(e)) {}

  bool step(TrainState &st, int64_t s, const Batch &batch, bool wantGrads, StepResult &out,
            std::string &err) override {
    size_t P = st.params.size();
    float stepValue = float(s);
    size_t in = 0;
    bool ok = true;
    for (size_t i = 0; i < P && ok; ++i)
      ok = exec_->setInput(in++, st.params[i].value.data(), st.params[i].value.size() * 4, err);
    for (size_t i = 0; i < P && ok; ++i)
      ok = exec_->setInput(in++, st.expAvg[i].data(), st.expAvg[i].size() * 4, err);
    for (size_t i = 0; i < P && ok; ++i)
      ok = exec_->setInput(in++, st.expAvgSq[i].data(), st.expAvgSq[i].size() * 4, err);
    ok = ok && exec_->setInput(in++, &stepValue, 4, err) &&
         exec_->setInput(in++, batch.inputs.data(), batch.inputs.size() * 8, err) &&
         exec_->setInput(in++, batch.targets.data(), batch.targets.size() * 8, err) &&
         exec_->run(err) && exec_->getOutput(0, &out.loss, 4, err) &&
         exec_->getOutput(1, &out.gradNorm, 4, err) && exec_->getOutput(2, &out.lr, 4, err);
    if (!ok)
      return false;
    std::vector<std::vector<float>> params(P);
    for (size_t i = 0; i < P; ++i) params[i].resize(st.params[i].value.size());
    if (!readAll(*exec_, 3, params, err) || !readAll(*exec_, 3 + P, st.expAvg, err) ||
        !readAll(*exec_, 3 + 2 * P, st.expAvgSq, err))
      return false;
    for (size_t i = 0; i < P; ++i) st.params[i].value = std::move(params[i]);
    if (wantGrads && tp_.hasGradients) {
      out.grads.assign(P, {});
      for (size_t i = 0; i < P; ++i) out.grads[i].resize(st.params[i].value.size());
      if (!readAll(*exec_, 3 + 3 * P, out.grads, err))
        return false;
    }
    return true;
  }

private:
  std::unique_ptr<rt::Executor> exec_;
};

class SimulatedRanksRunner : public StepRunner {
public:
  SimulatedRanksRunner(const TrainProgram &tp, std::unique_ptr<rt::SimulatedRanks> w)
      : StepRunner(tp), world_(std::move(w)) {}

  bool step(TrainState &st, int64_t s, const Batch &batch, bool wantGrads, StepResult &out,
            std::string &err) override {
    size_t P = st.params.size();
    int N = world_->size(), S = tp_.dpShard;
    int64_t rowElems = (int64_t(batch.inputs.size()) / tp_.batch) * tp_.localBatch();
    float stepValue = float(s);
    for (int r = 0; r < N; ++r) {
      rt::Executor &e = world_->rank(r);
      int shard = r % S;
      size_t in = 0;
      auto put = [&](const std::vector<float> &full, const ParamSlot &slot) {
        size_t n = full.size() / size_t(slot.dim0Shards);
        size_t from = slot.dim0Shards > 1 ? size_t(shard) * n : 0;
        return e.setInput(in++, full.data() + from, n * 4, err);
      };
      bool ok = true;
      for (size_t i = 0; i < P && ok; ++i) ok = put(st.params[i].value, st.params[i]);
      for (size_t i = 0; i < P && ok; ++i) ok = put(st.expAvg[i], st.params[i]);
      for (size_t i = 0; i < P && ok; ++i) ok = put(st.expAvgSq[i], st.params[i]);
      // Data-parallel rank r takes the r-th block of rows of the global batch.
      ok = ok && e.setInput(in++, &stepValue, 4, err) &&
           e.setInput(in++, batch.inputs.data() + r * rowElems, rowElems * 8, err) &&
           e.setInput(in++, batch.targets.data() + r * rowElems, rowElems * 8, err);
      if (!ok) {
        err = "rank " + std::to_string(r) + ": " + err;
        return false;
      }
    }
    if (!world_->run(err))
      return false;
    // Scalars are identical on every rank (all-reduced); read rank 0's.
    rt::Executor &r0 = world_->rank(0);
    if (!r0.getOutput(0, &out.loss, 4, err) || !r0.getOutput(1, &out.gradNorm, 4, err) ||
        !r0.getOutput(2, &out.lr, 4, err))
      return false;
    auto gather = [&](size_t output, std::vector<float> &full, const ParamSlot &slot) {
      size_t n = full.size() / size_t(slot.dim0Shards);
      for (int shard = 0; shard < int(slot.dim0Shards); ++shard)
        if (!world_->rank(shard).getOutput(output, full.data() + size_t(shard) * n, n * 4, err))
          return false;
      return true;
    };
    for (size_t i = 0; i < P; ++i)
      if (!gather(3 + i, st.params[i].value, st.params[i]) ||
          !gather(3 + P + i, st.expAvg[i], st.params[i]) ||
          !gather(3 + 2 * P + i, st.expAvgSq[i], st.params[i]))
        return false;
    if (wantGrads && tp_.hasGradients) {
      out.grads.assign(P, {});
      for (size_t i = 0; i < P; ++i) {
        out.grads[i].resize(st.params[i].value.size());
        if (!gather(3 + 3 * P + i, out.grads[i], st.params[i]))
          return false;
      }
    }
    return true;
  }

private:
  std::unique_ptr<rt::SimulatedRanks> world_;
};

} // namespace

std::unique_ptr<StepRunner> StepRunner::create(const TrainProgram &tp, int threads,
                                               std::string &err) {
  if (tp.worldSize() == 1) {
    auto exec = rt::createExecutor(tp.program, "cpu", threads, err);
    if (!exec)
      return nullptr;
    return std::make_unique<SingleDeviceRunner>(tp, std::move(exec));
  }
  int perRank = threads > 0 ? std::max(1, threads / tp.worldSize()) : 0;
  auto world = rt::SimulatedRanks::create(tp.program, tp.worldSize(), perRank, err);
  if (!world)
    return nullptr;
  return std::make_unique<SimulatedRanksRunner>(tp, std::move(world));
}

} // namespace loom::tools
