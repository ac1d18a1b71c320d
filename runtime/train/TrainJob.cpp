//===- TrainJob.cpp -------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/TrainJob.h"
#include "loom/train/GradientError.h"
#include "loom/train/Npy.h"
#include "loom/train/WeightFiles.h"
#include "loom/runtime/TensorBoard.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/resource.h>
#include <unistd.h>

namespace loom::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string fmtDuration(double s) {
  char buf[32];
  int t = int(s + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

/// The memory the run holds, for TensorBoard: the device bytes of the
/// GPU ranks, else the process's peak resident set (the CPU backend).
double memoryGiB(const StepRunner &r) {
  if (uint64_t dev = r.deviceMemoryBytes())
    return double(dev) / double(1ull << 30);
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0 / double(1ull << 30);
}

/// Compares the step's unclipped gradients with reference gradients saved
/// by PyTorch under HF names (numpy.savez). Prints one line per parameter
/// and returns the worst relative L2 error, or -1 on a problem.
double compareGradients(const std::string &npzPath, const std::vector<ParamSlot> &params,
                        const std::vector<std::vector<float>> &grads,
                        const std::vector<std::string> &hfNames,
                        const std::map<std::string, std::string> &aliases, bool verbose,
                        std::string &err) {
  std::map<std::string, NpyArray> ref;
  if (!readNpz(npzPath, ref, err))
    return -1;
  double worst = 0;
  std::map<std::string, bool> covered;
  // A gradient that is zero in exact arithmetic is compared against a floor
  // (GradientError.h).
  double largest = 0;
  for (const auto &[name, a] : ref) {
    double r2 = 0;
    for (double v : a.asDoubles()) r2 += v * v;
    largest = std::max(largest, std::sqrt(r2));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSlot &p = params[i];
    std::vector<std::string> candidates = {hfNames.empty() || hfNames[i].empty()
                                               ? defaultHfName(p.name)
                                               : hfNames[i]};
    for (const auto &[alias, of] : aliases)
      if (of == candidates[0]) candidates.push_back(alias);
    const NpyArray *r = nullptr;
    std::string used;
    for (const std::string &c : candidates)
      if (ref.count(c)) {
        r = &ref.at(c);
        used = c;
        break;
      }
    if (!r) {
      err = npzPath + ": no reference gradient for parameter '" + p.name + "'";
      return -1;
    }
    covered[used] = true;
    std::vector<float> g = grads[i];
    if (p.transposed && p.shape.size() == 2)
      g = transpose2d(g, p.shape[0], p.shape[1]);
    std::vector<double> rv = r->asDoubles();
    if (rv.size() != g.size()) {
      err = npzPath + ": reference gradient '" + used + "' has " + std::to_string(rv.size()) +
            " elements, the parameter " + std::to_string(g.size());
      return -1;
    }
    double d2 = 0, r2 = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      double d = double(g[k]) - rv[k];
      d2 += d * d;
      r2 += rv[k] * rv[k];
    }
    bool floored;
    double rel = relativeGradientError(d2, r2, largest, floored);
    if (verbose)
      std::printf("  grad %-55s rel L2 error %.3e%s\n", used.c_str(), rel,
                  floored ? " (zero in the reference: vs the largest gradient)" : "");
    worst = std::max(worst, rel);
  }
  for (const auto &[name, a] : ref)
    if (!covered.count(name)) {
      err = npzPath + ": reference gradient '" + name + "' matches no parameter";
      return -1;
    }
  return worst;
}

} // namespace

void printTrainHeader(const std::string &model, const TrainProgram &tp, const TrainState &state,
                      const std::string &precision, int64_t steps, double compileS) {
  int64_t numel = 0;
  for (const ParamSlot &p : state.params) numel += int64_t(p.value.size());
  std::printf("loom train: %s, %zu parameter tensors (%lld values), batch %lld x seq %lld, "
              "%s, %lld steps (compiled in %.2f s, arena %.1f MiB, %zu in-place updates)\n",
              model.c_str(), state.params.size(), (long long)numel, (long long)state.batch,
              (long long)state.seq, precision.c_str(), (long long)steps, compileS,
              double(tp.program->arenaBytes) / (1 << 20), tp.program->updates.size());
}

TrainState initialTrainState(const TrainProgram &tp, int64_t batch, int64_t seq,
                             const std::string &dataRule) {
  TrainState state;
  state.params = tp.params;
  state.batch = batch;
  state.seq = seq;
  state.dataRule = dataRule;
  for (const ParamSlot &p : state.params) {
    state.expAvg.emplace_back(p.value.size(), 0.0f);
    state.expAvgSq.emplace_back(p.value.size(), 0.0f);
  }
  return state;
}

bool restoreTrainState(TrainState &state, const std::string &resumeFrom,
                       const std::string &checkpointDir, bool lead, std::string &err) {
  if (!resumeFrom.empty()) {
    std::string from;
    if (!loadCheckpoint(resumeFrom, state, from, err))
      return false;
    std::printf("resumed from %s at step %lld\n", from.c_str(), (long long)state.step);
  } else if (!checkpointDir.empty()) {
    // One command for the first launch and every restart of a preemptible
    // job: resume from the newest usable checkpoint if there is one.
    std::string from;
    std::vector<std::string> skipped;
    bool resumed = resumeNewest(checkpointDir, state, from, skipped, err);
    for (const std::string &why : skipped)
      if (lead) std::fprintf(stderr, "loom train: warning: skipped %s\n", why.c_str());
    if (!resumed && !err.empty())
      return false;
    if (resumed)
      std::printf("resumed from %s at step %lld\n", from.c_str(), (long long)state.step);
    else if (lead)
      std::printf("no checkpoint in %s yet: starting at step 0\n", checkpointDir.c_str());
  }

  return true;
}

TrainLoopStatus runTrainLoop(StepRunner &runner, const TrainProgram &tp, const TokenFile &data,
                             TrainState &state, const TrainLoopOptions &o, std::string &err) {
  auto error = [&](const std::string &msg) {
    err = msg;
    return TrainLoopStatus::Error;
  };
  const bool lead = o.lead;
  const BatchRule rule = o.rule;
  std::FILE *log = nullptr;
  if (lead && !o.logPath.empty() && !(log = std::fopen(o.logPath.c_str(), "a"))) {
    err = "cannot open log file '" + o.logPath + "'";
    return TrainLoopStatus::Error;
  }
  rt::TensorBoardWriter tensorboard;
  if (lead && !o.tensorboardDir.empty() && !tensorboard.open(o.tensorboardDir, err))
    return TrainLoopStatus::Error;
  bool tty = isatty(1);
  const int64_t B = o.batch, T = o.seq, steps = o.steps, every = o.checkpointEvery;
  auto trainStart = Clock::now();
  int64_t firstStep = state.step;
  float loss = 0, gnorm = 0, lr = 0;
  // --async-checkpoint: the write in flight reads `state`, so anything
  // that writes it (a runner that brings its state to the host after each
  // step, the next checkpoint's sync, the final export) waits for it.
  bool async = o.asyncCheckpoint;
  AsyncCheckpointWriter writer;
  auto settleCheckpoint = [&]() {
    std::string at;
    if (!writer.wait(at, err))
      return false;
    if (!at.empty() && !tty)
      std::printf("checkpoint %s\n", at.c_str());
    return true;
  };
  for (int64_t s = state.step; s < steps; ++s) {
    if (writer.busy() && !runner.holdsStateBetweenSteps() && !settleCheckpoint())
      return TrainLoopStatus::Error;
    auto ts = Clock::now();
    Batch batch;
    if (!makeBatch(data, s, B, T, batch, err, rule))
      return TrainLoopStatus::Error;
    StepResult result;
    bool ok = runner.step(state, s, batch, s == firstStep && tp.hasGradients, result, err);
    loss = result.loss;
    gnorm = result.gradNorm;
    lr = result.lr;
    if (!ok)
      return error("step " + std::to_string(s) + ": " + err);
    if (!std::isfinite(loss))
      return error("step " + std::to_string(s) + ": the loss is not finite (" +
                               std::to_string(loss) + ")");
    if (s == firstStep && o.expectLoss) {
      double want = *o.expectLoss, rel = std::fabs(loss - want) / std::fabs(want);
      bool pass = rel <= o.lossTolerance;
      std::printf("step-%lld loss %.9g vs %.9g: relative error %.3e (tolerance %.1e): %s\n",
                  (long long)s, loss, want, rel, o.lossTolerance,
                  pass ? "PASS" : "FAIL");
      if (!pass)
        return TrainLoopStatus::CheckFailed;
    }
    if (lead && s == firstStep && tp.hasGradients) { // gathered on rank 0 only
      const std::vector<std::vector<float>> &grads = result.grads;
      double worst = compareGradients(o.expectGrads, state.params, grads, o.hfNames, o.aliases,
                                      true, err);
      if (worst < 0)
        return TrainLoopStatus::Error;
      double tol = o.gradTolerance;
      std::printf("step-%lld gradients vs %s: worst relative L2 error %.3e (tolerance %.1e): %s\n",
                  (long long)s, o.expectGrads.c_str(), worst, tol,
                  worst <= tol ? "PASS" : "FAIL");
      if (!(worst <= tol))
        return TrainLoopStatus::CheckFailed;
    }
    double stepS = std::chrono::duration<double>(Clock::now() - ts).count();
    double wall = std::chrono::duration<double>(Clock::now() - trainStart).count();
    double tokPerS = double(B * T) / stepS;
    double eta = wall / double(s - firstStep + 1) * double(steps - s - 1);
    if (tty)
      std::printf("\r\033[Kstep %lld/%lld  loss %.4f  grad_norm %.3f  lr %.2e  %.0f tok/s  ETA %s",
                  (long long)s + 1, (long long)steps, loss, gnorm, lr, tokPerS,
                  fmtDuration(eta).c_str());
    else if ((s + 1) % std::max<int64_t>(1, o.printEvery) == 0 || s + 1 == steps)
      std::printf("step %lld loss %.9g grad_norm %.9g lr %.9g tok/s %.0f\n", (long long)s, loss,
                  gnorm, lr, tokPerS);
    std::fflush(stdout);
    if (log) {
      std::fprintf(log,
                   "{\"step\": %lld, \"loss\": %.9g, \"grad_norm\": %.9g, \"lr\": %.9g, "
                   "\"tokens_per_s\": %.1f, \"step_s\": %.6f, \"wall_s\": %.6f}\n",
                   (long long)s, loss, gnorm, lr, tokPerS, stepS, wall);
      std::fflush(log);
    }
    if (lead && !o.tensorboardDir.empty() &&
        !tensorboard.scalars(s, {{"loss", loss}, {"grad_norm", gnorm}, {"lr", lr},
                                 {"tokens_per_s", float(tokPerS)},
                                 {"memory_gib", float(memoryGiB(runner))}}, err))
      return TrainLoopStatus::Error;
    state.step = s + 1;
    if (!o.checkpointDir.empty() && every > 0 && state.step % every == 0) {
      // What the step pays for the checkpoint: the state set aside or
      // brought to the host, plus the write unless it goes to the
      // background.
      auto tc = Clock::now();
      if (!settleCheckpoint())
        return TrainLoopStatus::Error;
      // A write still in flight (checkpoints closer together than the
      // disk writes them) holds training up here; said apart.
      double waitS = std::chrono::duration<double>(Clock::now() - tc).count();
      auto tsync = Clock::now();
      // Asynchronous: the state is set aside where it lives (on a GPU, a
      // device copy) and reaches the host on the writer's thread.
      StateReader read;
      if (async && !runner.snapshotState(state, read, err)) {
        std::printf("checkpoint: %s; bringing the state to the host instead\n", err.c_str());
        read = nullptr;
      }
      if (!read && !runner.syncState(state, err))
        return TrainLoopStatus::Error;
      double syncS = std::chrono::duration<double>(Clock::now() - tsync).count();
      bool setAside = bool(read); // the writer copies it to the host
      std::string at;
      if (lead && async) {
        writer.start(o.checkpointDir, state, o.keepCheckpoints, std::move(read));
      } else if (lead && !saveCheckpoint(o.checkpointDir, state, o.keepCheckpoints, at, err)) {
        return TrainLoopStatus::Error;
      }
      double blockedS = std::chrono::duration<double>(Clock::now() - tc).count();
      if (lead && !tty) {
        char waited[64] = "";
        if (waitS >= 0.0005)
          std::snprintf(waited, sizeof waited, ", waiting for the previous write %.3f s", waitS);
        std::printf("checkpoint %s: blocked training %.3f s (state %s %.3f s%s)\n",
                    async ? "writing in the background" : at.c_str(), blockedS,
                    setAside ? "set aside" : "to host", syncS, waited);
      }
    }
    if (s == o.dieAfterStep) {
      std::fflush(nullptr);
      std::_Exit(86);
    }
  }
  if (!settleCheckpoint())
    return TrainLoopStatus::Error;
  if (tty)
    std::printf("\n");
  double wall = std::chrono::duration<double>(Clock::now() - trainStart).count();
  int64_t done = steps - firstStep;
  if (done > 0)
    std::printf("done: %lld steps in %.2f s (%.2f steps/s, %.0f tokens/s), final loss %.6f\n",
                (long long)done, wall, double(done) / wall, double(done * B * T) / wall, loss);
  if (log)
    std::fclose(log);
  return TrainLoopStatus::Done;
}

} // namespace loom::train
