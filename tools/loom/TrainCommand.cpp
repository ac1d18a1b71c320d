//===- TrainCommand.cpp - `loom train` ------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Compile-then-run training: the whole step (forward, loss, backward,
// clipping, schedule, AdamW) is one compiled program; this loop only feeds
// it batches and carries the parameters and optimizer state from one step
// to the next, logs, and checkpoints.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Checkpoint.h"
#include "Commands.h"
#include "GradientError.h"
#include "Launcher.h"
#include "Npy.h"
#include "PipelineProgram.h"
#include "PipelineRunner.h"
#include "PipelineStageCosts.h"
#include "RecomputeFlags.h"
#include "SequencePlan.h"
#include "SpmdPlan.h"
#include "StepRunner.h"
#include "TokenData.h"
#include "TrainProgram.h"
#include "WeightFiles.h"
#include "frontends/onnx/OnnxExporter.h"
#include "loom/runtime/LaunchEnv.h"
#include "loom/runtime/ProgramStats.h"
#include "loom/runtime/Rendezvous.h"
#include "loom/runtime/TensorBoard.h"
#include "planner/Plan.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sys/resource.h>
#include <unistd.h>

namespace loom::tools {
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
  const double floor = gradientErrorFloor(largest);
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
    double rel = relativeGradientError(d2, r2, floor, floored);
    if (verbose)
      std::printf("  grad %-55s rel L2 error %.3e%s\n", used.c_str(), rel,
                  floored ? " (zero in the reference: vs 1e-6 of the largest gradient)" : "");
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

int runTrain(int argc, char **argv) {
  Args args("train", "MODEL.onnx --data TOKENS.bin --batch B --seq T --steps N [options]");
  args.flag("data", "token file (uint16, uint32 if named *.u32.bin, or a 1-D .npy of integer ids)");
  args.flag("batch", "sequences per step");
  args.flag("seq", "tokens per sequence");
  args.flag("steps", "train until this many steps are done", false, "10");
  args.flag("batching", "sequential (consecutive windows) or fixture (the fixtures' rule)", false,
            "sequential");
  args.flag("lr", "peak learning rate", false, "1e-3");
  args.flag("warmup", "linear warmup steps: lr * min(1, (s+1)/warmup)", false, "0");
  args.flag("schedule", "after warmup: constant, cosine or linear", false, "constant");
  args.flag("min-lr-ratio", "final lr of cosine/linear decay, as a fraction of --lr", false, "0");
  args.flag("beta1", "AdamW beta1", false, "0.9");
  args.flag("beta2", "AdamW beta2", false, "0.95");
  args.flag("eps", "AdamW epsilon", false, "1e-8");
  args.flag("weight-decay", "AdamW decoupled weight decay", false, "0.1");
  args.flag("max-grad-norm", "clip the global gradient norm (0: off)", false, "1.0");
  args.flag("trainable", "regex: also train named constants matching it");
  args.flag("frozen", "regex: do not train parameters matching it");
  args.flag("precision", "fp32, or bf16 (bf16 matmul/attention, fp32 master weights)", false,
            "fp32");
  args.flag("fp8", "off, tensorwise or rowwise: linear layers' GEMMs on fp8 operands with dynamic "
            "scales (torchao's recipes; the output head too with --fp8-lm-head)", false, "off");
  args.flag("fp8-lm-head", "with --fp8: the output head's GEMM in fp8 as well", true);
  args.flag("init-weights", "HF-named .safetensors with the initial weights");
  args.flag("export-weights", "write the trained weights with HF names to this .safetensors");
  args.flag("export-shard-gb", "past this size, --export-weights writes HF's shards and index",
            false, "5");
  args.flag("export-onnx", "write the model with trained initializers to this .onnx");
  args.flag("log", "append one JSON line per step to this file");
  args.flag("tensorboard", "write TensorBoard event files here (loss, grad norm, lr, tokens/s, memory)");
  args.flag("checkpoint-dir", "write checkpoints into this folder");
  args.flag("checkpoint-every", "steps between checkpoints", false, "0");
  args.flag("keep-checkpoints", "newest checkpoints to keep (0: all)", false, "3");
  args.flag("resume", "continue from a checkpoint (folder, or a checkpoint dir: the newest)");
  args.flag("async-checkpoint", "write checkpoints in the background while training goes on", true);
  args.flag("expect-grads", "check step-0 gradients against this .npz (HF names)");
  args.flag("grad-tolerance", "max relative L2 error for --expect-grads", false, "1e-4");
  args.flag("expect-loss", "check the first step's loss against this value");
  args.flag("loss-tolerance", "max relative error for --expect-loss", false, "1e-5");
  args.flag("print-every", "without a terminal: print every K-th step (and the last)", false, "1");
  args.flag("threads", "CPU threads (0: all)", false, "0");
  args.flag("backend", "where the program runs: cpu or cuda", false, "cpu");
  args.flag("plan", "parallelism: dp_replicate=R,dp_shard=S,cp=C,tp=T (simulated ranks on the "
            "CPU), with cp_rotate=allgather|ring, tp_sp=on|off, loss_parallel=on|off", false,
            "1");
  args.flag("world-size", "ranks the job has (default: the plan's product)");
  args.flag("nproc", "run the plan's ranks as this many local processes (1: simulated ranks)",
            false, "1");
  args.flag("rendezvous-timeout", "seconds for every rank to join a multi-process job", false,
            "60");
  args.flag("collective-timeout",
            "seconds a multi-process collective may wait for its peers before failing", false,
            "300");
  args.flag("ddp-bucket-mib", "gradient MiB per dp_replicate all-reduce (0: one per gradient)",
            false, "25");
  args.flag("fsdp-prefetch", "issue each FSDP all-gather this many parameters early", false, "1");
  args.flag("fsdp-keep-gathered", "keep forward's gathered parameters for backward (no reshard)",
            true);
  args.flag("pp-split", "pipeline plans: the first layer of each stage after the first (e.g. 2,4,6)");
  args.flag("trace", "pipeline plans: write every rank's actions as chrome-tracing JSON to this file");
  args.flag("stage-costs-out", "pipeline plans: write the measured per-stage action and transfer "
                               "times (medians after step 0) for loom plan --stage-costs");
  args.flag("die-after-step", "testing: exit abruptly (code 86) after this step completes");
  args.flag("fail-rank", "testing: this simulated rank gets invalid token ids at --fail-step");
  args.flag("fail-step", "testing: the step at which --fail-rank fails", false, "0");
  addRecomputeFlags(args);
  args.flag("print-program-stats", "print the step program's instructions per opcode and where "
            "its casts sit, then train", true);
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  if (args.positional().size() != 1)
    return fail("train", "expected one MODEL.onnx (see loom train --help)");
  if (!args.has("data"))
    return fail("train", "--data is required");
  int64_t B = args.getInt("batch"), T = args.getInt("seq"), steps = args.getInt("steps");
  if (B <= 0 || T <= 0)
    return fail("train", "--batch and --seq must be positive");
  std::string batching = args.get("batching"), precision = args.get("precision");
  if (batching != "sequential" && batching != "fixture")
    return fail("train", "--batching must be sequential or fixture, not '" + batching + "'");
  if (precision != "fp32" && precision != "bf16")
    return fail("train", "--precision must be fp32 or bf16, not '" + precision + "'");
  std::string fp8 = args.get("fp8");
  if (fp8 != "off" && fp8 != "tensorwise" && fp8 != "rowwise")
    return fail("train", "--fp8 must be off, tensorwise or rowwise, not '" + fp8 + "'");
  if (fp8 == "off" && args.has("fp8-lm-head"))
    return fail("train", "--fp8-lm-head needs --fp8 tensorwise or rowwise");
  BatchRule rule = batching == "fixture" ? BatchRule::Fixture : BatchRule::Sequential;

  std::string err;
  TokenFile data;
  if (!data.load(args.get("data"), err))
    return fail("train", err);

  TrainOptions opts;
  opts.lr = args.getDouble("lr");
  opts.warmup = args.getInt("warmup");
  opts.schedule = args.get("schedule");
  opts.minLrRatio = args.getDouble("min-lr-ratio");
  opts.totalSteps = steps;
  opts.beta1 = args.getDouble("beta1");
  opts.beta2 = args.getDouble("beta2");
  opts.eps = args.getDouble("eps");
  opts.weightDecay = args.getDouble("weight-decay");
  opts.maxGradNorm = args.getDouble("max-grad-norm");
  opts.trainable = args.get("trainable");
  opts.frozen = args.get("frozen");
  opts.bf16 = precision == "bf16";
  opts.fp8 = fp8 == "off" ? "" : fp8;
  opts.fp8LmHead = args.has("fp8-lm-head");
  opts.returnGradients = args.has("expect-grads");
  planner::Plan plan;
  if (!parseSpmdPlan(args.get("plan"), args.has("world-size") ? int(args.getInt("world-size")) : 0,
                     plan, err))
    return fail("train", err);
  opts.dpReplicate = plan.dpReplicate;
  opts.dpShard = plan.dpShard;
  opts.tp = plan.tp;
  applySequencePlan(plan, opts);
  opts.pipeline = plan;
  if (args.getDouble("ddp-bucket-mib") < 0)
    return fail("train", "--ddp-bucket-mib must not be negative");
  opts.ddpBucketBytes = int64_t(args.getDouble("ddp-bucket-mib") * (1 << 20));
  opts.fsdpPrefetch = args.getInt("fsdp-prefetch");
  opts.fsdpReshardAfterForward = !args.has("fsdp-keep-gathered");
  opts.ppSplit = args.get("pp-split");
  if (opts.fsdpPrefetch < 0)
    return fail("train", "--fsdp-prefetch must not be negative");
  if (!readRecomputeFlags(args, args.get("backend"), opts, err))
    return fail("train", err);
  if (!checkPipelineOptions(opts, err)) // before any rank is launched
    return fail("train", err);
  if (args.has("stage-costs-out") && plan.pp <= 1)
    return fail("train", "--stage-costs-out needs a pipeline plan (pp > 1), not '" +
                             args.get("plan") + "'");

  // One process per rank: either this process launches them (--nproc), or
  // a launcher started this process as one of them (its variables).
  rt::LaunchEnv env;
  if (!rt::readLaunchEnv(env, err))
    return fail("train", err);
  int64_t nproc = args.getInt("nproc");
  if (nproc < 1)
    return fail("train", "--nproc must be at least 1");
  if (nproc > 1) {
    if (env.multiProcess)
      return fail("train", "--nproc " + std::to_string(nproc) + " inside a launched job (WORLD_SIZE=" +
                               std::to_string(env.worldSize) + "): use one or the other");
    if (nproc != int64_t(plan.gpus()))
      return fail("train", "--nproc " + std::to_string(nproc) + " but plan '" + args.get("plan") +
                               "' has " + std::to_string(plan.gpus()) + " ranks");
    return launchLocalRanks("train", int(nproc), argsWithout(argc, argv, 1, "nproc"));
  }
  bool lead = !env.multiProcess || env.rank == 0; // prints, logs, checkpoints, exports
  std::string rankPrefix = env.multiProcess ? "rank " + std::to_string(env.rank) + ": " : "";
  std::unique_ptr<rt::Rendezvous> rendezvous;
  if (env.multiProcess) {
    if (env.worldSize != plan.gpus())
      return fail("train", rankPrefix + "plan '" + args.get("plan") + "' has " +
                               std::to_string(plan.gpus()) + " ranks, the job " +
                               std::to_string(env.worldSize) + " processes (WORLD_SIZE)");
    // Join before compiling, so a wrong address or a missing rank is
    // reported in seconds rather than after every rank has compiled.
    rendezvous = rt::Rendezvous::join(env.rank, env.worldSize, env.masterAddr, env.masterPort,
                                      args.getDouble("rendezvous-timeout"), err);
    if (!rendezvous)
      return fail("train", rankPrefix + err);
    // Only rank 0 speaks on stdout (the ranks' lines would repeat it);
    // errors still go to stderr, prefixed with the rank.
    if (!lead && !std::freopen("/dev/null", "w", stdout))
      return fail("train", rankPrefix + "cannot silence stdout");
  }
  std::unique_ptr<StepRunner> runner;
  // A rank that stops because another rank failed exits with
  // kExitPeerFailed, so the launcher names the rank that failed first.
  auto die = [&](const std::string &msg) {
    fail("train", rankPrefix + msg);
    return runner && runner->peerFailed() ? kExitPeerFailed : 1;
  };

  auto t0 = Clock::now();
  TrainProgram tp;
  if (!compileTrainStep(args.positional()[0], B, T, opts, tp, err))
    return die(err);
  std::printf("%s", recomputeSummary(opts, tp).c_str());
  if (args.has("print-program-stats"))
    std::printf("%s", rt::formatProgramStats(rt::programStats(*tp.program)).c_str());
  std::vector<std::string> hfNames;
  std::map<std::string, std::string> aliases;
  if (args.has("init-weights") &&
      !loadInitWeights(args.get("init-weights"), tp.params, hfNames, aliases, err))
    return die(err);

  TrainState state;
  state.params = tp.params;
  state.batch = B;
  state.seq = T;
  state.dataRule = batching;
  size_t P = state.params.size();
  for (const ParamSlot &p : state.params) {
    state.expAvg.emplace_back(p.value.size(), 0.0f);
    state.expAvgSq.emplace_back(p.value.size(), 0.0f);
  }
  if (args.has("resume")) {
    std::string from;
    if (!loadCheckpoint(args.get("resume"), state, from, err))
      return die(err);
    std::printf("resumed from %s at step %lld\n", from.c_str(), (long long)state.step);
  } else if (args.has("checkpoint-dir")) {
    // One command for the first launch and every restart of a preemptible
    // job: resume from the newest usable checkpoint if there is one.
    std::string from;
    std::vector<std::string> skipped;
    bool resumed = resumeNewest(args.get("checkpoint-dir"), state, from, skipped, err);
    for (const std::string &why : skipped)
      if (lead) std::fprintf(stderr, "loom train: warning: skipped %s\n", why.c_str());
    if (!resumed && !err.empty())
      return die(err);
    if (resumed)
      std::printf("resumed from %s at step %lld\n", from.c_str(), (long long)state.step);
    else if (lead)
      std::printf("no checkpoint in %s yet: starting at step 0\n", args.get("checkpoint-dir").c_str());
  }

  if (env.multiProcess)
    runner = StepRunner::createDistributed(tp, int(args.getInt("threads")), args.get("backend"),
                                           std::move(rendezvous), env.localRank,
                                           env.localWorldSize, args.getDouble("collective-timeout"),
                                           err);
  else
    runner = StepRunner::create(tp, int(args.getInt("threads")), err, args.get("backend"));
  if (!runner)
    return die(err);
  int64_t numel = 0;
  for (const ParamSlot &p : state.params) numel += int64_t(p.value.size());
  double compileS = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("loom train: %s, %zu parameter tensors (%lld values), batch %lld x seq %lld, "
              "%s, %lld steps (compiled in %.2f s, arena %.1f MiB, %zu in-place updates)\n",
              args.positional()[0].c_str(), P, (long long)numel, (long long)B, (long long)T,
              (fp8 == "off" ? precision : precision + " + fp8 " + fp8).c_str(), (long long)steps,
              compileS,
              double(tp.program->arenaBytes) / (1 << 20), tp.program->updates.size());
  if (uint64_t dev = runner->deviceMemoryBytes())
    std::printf("device memory: %.2f GiB (arena, constants, scratch, GEMM workspace%s)\n",
                double(dev) / double(1ull << 30),
                runner->deviceMemoryPerRank().size() > 1 ? "; every rank's, together" : "");
  if (tp.worldSize() > 1)
    printSpmdSummary(plan, tp, *runner,
                     env.multiProcess ? "processes on the " + args.get("backend") + " backend"
                     : args.get("backend") == "cuda"
                         ? "simulated ranks on one GPU (verification and memory, not speed)"
                         : "simulated ranks on the " + args.get("backend") + " backend");
  printRankDeviceMemory(tp, *runner);
  if (args.has("fail-rank")) {
    int64_t r = args.getInt("fail-rank");
    if (r < 0 || r >= tp.worldSize())
      return die("--fail-rank " + std::to_string(r) + " is not a rank of this " +
                               std::to_string(tp.worldSize()) + "-rank plan");
    runner->injectRankFailure(int(r), args.getInt("fail-step"));
  }

  std::FILE *log = nullptr;
  if (lead && args.has("log") && !(log = std::fopen(args.get("log").c_str(), "a")))
    return die("cannot open log file '" + args.get("log") + "'");
  rt::TensorBoardWriter tensorboard;
  if (lead && args.has("tensorboard") && !tensorboard.open(args.get("tensorboard"), err))
    return die(err);
  bool tty = isatty(1);
  int64_t every = args.getInt("checkpoint-every");
  int64_t dieAfter = args.has("die-after-step") ? args.getInt("die-after-step") : -1;
  auto trainStart = Clock::now();
  int64_t firstStep = state.step;
  float loss = 0, gnorm = 0, lr = 0;
  // --async-checkpoint: the write in flight reads `state`, so anything
  // that writes it (a runner that brings its state to the host after each
  // step, the next checkpoint's sync, the final export) waits for it.
  bool async = args.has("async-checkpoint");
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
    if (writer.busy() && !runner->holdsStateBetweenSteps() && !settleCheckpoint())
      return die(err);
    auto ts = Clock::now();
    Batch batch;
    if (!makeBatch(data, s, B, T, batch, err, rule))
      return die(err);
    StepResult result;
    bool ok = runner->step(state, s, batch, s == firstStep && tp.hasGradients, result, err);
    loss = result.loss;
    gnorm = result.gradNorm;
    lr = result.lr;
    if (!ok)
      return die("step " + std::to_string(s) + ": " + err);
    if (!std::isfinite(loss))
      return die("step " + std::to_string(s) + ": the loss is not finite (" +
                               std::to_string(loss) + ")");
    if (s == firstStep && args.has("expect-loss")) {
      double want = args.getDouble("expect-loss"), rel = std::fabs(loss - want) / std::fabs(want);
      bool pass = rel <= args.getDouble("loss-tolerance");
      std::printf("step-%lld loss %.9g vs %.9g: relative error %.3e (tolerance %.1e): %s\n",
                  (long long)s, loss, want, rel, args.getDouble("loss-tolerance"),
                  pass ? "PASS" : "FAIL");
      if (!pass)
        return 1;
    }
    if (lead && s == firstStep && tp.hasGradients) { // gathered on rank 0 only
      const std::vector<std::vector<float>> &grads = result.grads;
      double worst = compareGradients(args.get("expect-grads"), state.params, grads, hfNames,
                                      aliases, true, err);
      if (worst < 0)
        return die(err);
      double tol = args.getDouble("grad-tolerance");
      std::printf("step-%lld gradients vs %s: worst relative L2 error %.3e (tolerance %.1e): %s\n",
                  (long long)s, args.get("expect-grads").c_str(), worst, tol,
                  worst <= tol ? "PASS" : "FAIL");
      if (!(worst <= tol))
        return 1;
    }
    double stepS = std::chrono::duration<double>(Clock::now() - ts).count();
    double wall = std::chrono::duration<double>(Clock::now() - trainStart).count();
    double tokPerS = double(B * T) / stepS;
    double eta = wall / double(s - firstStep + 1) * double(steps - s - 1);
    if (tty)
      std::printf("\r\033[Kstep %lld/%lld  loss %.4f  grad_norm %.3f  lr %.2e  %.0f tok/s  ETA %s",
                  (long long)s + 1, (long long)steps, loss, gnorm, lr, tokPerS,
                  fmtDuration(eta).c_str());
    else if ((s + 1) % std::max<int64_t>(1, args.getInt("print-every")) == 0 || s + 1 == steps)
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
    if (lead && args.has("tensorboard") &&
        !tensorboard.scalars(s, {{"loss", loss}, {"grad_norm", gnorm}, {"lr", lr},
                                 {"tokens_per_s", float(tokPerS)},
                                 {"memory_gib", float(memoryGiB(*runner))}}, err))
      return die(err);
    state.step = s + 1;
    if (args.has("checkpoint-dir") && every > 0 && state.step % every == 0) {
      // What the step pays for the checkpoint: the state brought to the
      // host, plus the write unless it goes to the background.
      auto tc = Clock::now();
      if (!settleCheckpoint())
        return die(err);
      // A write still in flight (checkpoints closer together than the
      // disk writes them) holds training up here; said apart.
      double waitS = std::chrono::duration<double>(Clock::now() - tc).count();
      auto tsync = Clock::now();
      // Asynchronous: the state is set aside where it lives (on a GPU, a
      // device copy) and reaches the host on the writer's thread.
      StateReader read;
      if (async && !runner->snapshotState(state, read, err)) {
        std::printf("checkpoint: %s; bringing the state to the host instead\n", err.c_str());
        read = nullptr;
      }
      if (!read && !runner->syncState(state, err))
        return die(err);
      double syncS = std::chrono::duration<double>(Clock::now() - tsync).count();
      std::string at;
      if (lead && async) {
        writer.start(args.get("checkpoint-dir"), state, int(args.getInt("keep-checkpoints")),
                     std::move(read));
      } else if (lead && !saveCheckpoint(args.get("checkpoint-dir"), state,
                                         int(args.getInt("keep-checkpoints")), at, err)) {
        return die(err);
      }
      double blockedS = std::chrono::duration<double>(Clock::now() - tc).count();
      if (lead && !tty) {
        char waited[64] = "";
        if (waitS >= 0.0005)
          std::snprintf(waited, sizeof waited, ", waiting for the previous write %.3f s", waitS);
        std::printf("checkpoint %s: blocked training %.3f s (state %s %.3f s%s)\n",
                    async ? "writing in the background" : at.c_str(), blockedS,
                    writer.readsSnapshot() ? "set aside" : "to host", syncS, waited);
      }
    }
    if (s == dieAfter) {
      std::fflush(nullptr);
      std::_Exit(86);
    }
  }
  if (!settleCheckpoint())
    return die(err);
  if (tty)
    std::printf("\n");
  double wall = std::chrono::duration<double>(Clock::now() - trainStart).count();
  int64_t done = steps - firstStep;
  if (done > 0)
    std::printf("done: %lld steps in %.2f s (%.2f steps/s, %.0f tokens/s), final loss %.6f\n",
                (long long)done, wall, double(done) / wall, double(done * B * T) / wall, loss);
  if (log)
    std::fclose(log);
  if (lead && tp.pipeline && !reportPipelineRun(tp, *runner, args.get("trace"), err))
    return die(err);
  if (lead && args.has("stage-costs-out") &&
      !writeStageCosts(tp, *runner, args.get("backend"), env.multiProcess ? "socket" : "in-process",
                       stageThreadsPerRank(int(args.getInt("threads")), tp.worldSize()),
                       args.get("stage-costs-out"), err))
    return die(err);
  // Every rank takes part in the last gather; then the ranks leave
  // together (finish), and rank 0 alone writes the exports.
  if (!runner->syncState(state, err) || !runner->finish(err))
    return die(err);
  if (!lead)
    return 0;
  if (args.has("export-weights")) {
    if (!exportWeights(args.get("export-weights"), state.params, hfNames, aliases, err,
                       uint64_t(args.getDouble("export-shard-gb") * 1e9)))
      return die(err);
    std::printf("wrote %s\n", args.get("export-weights").c_str());
  }
  if (args.has("export-onnx")) {
    std::map<std::string, std::vector<float>> values;
    for (const ParamSlot &p : state.params) values[p.name] = p.value;
    if (!exportOnnxWithParameters(args.positional()[0], args.get("export-onnx"), values, err))
      return die(err);
    std::printf("wrote %s\n", args.get("export-onnx").c_str());
  }
  return 0;
}

} // namespace loom::tools
