//===- TrainCommand.cpp - `loom train` ------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Compile-then-run training: the whole step (forward, loss, backward,
// clipping, schedule, AdamW) is compiled by compiler::compileTrainStep and
// run by the training runtime (loom/train/TrainJob.h): this command parses
// the flags, launches or joins the ranks, and prints and exports.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "compiler/CompileTrainStep.h"
#include "compiler/PipelineProgram.h"
#include "compiler/PrecisionFlags.h"
#include "compiler/RecomputeFlags.h"
#include "compiler/SpmdPlan.h"
#include "frontends/onnx/OnnxExporter.h"
#include "loom/runtime/LaunchEnv.h"
#include "loom/runtime/ProgramStats.h"
#include "loom/train/JobProcess.h"
#include "loom/train/Launcher.h"
#include "loom/train/PipelineRunner.h"
#include "loom/train/PipelineStageCosts.h"
#include "loom/train/TrainJob.h"
#include "loom/train/WeightFiles.h"
#include "planner/Plan.h"
#include "planner/ir/PipelineCuts.h"

#include <chrono>
#include <cstdio>
#include <map>

namespace loom::tools {
using namespace compiler;
using namespace train;
using Clock = std::chrono::steady_clock;

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
  args.flag("pin-ranks", "--nproc: each rank on CPUs of its own (auto, on, off)", false, "auto");
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
  args.flag("pp-split", "pipeline cuts: balanced[:PROFILE], even or layers (2,4,6)", false, "balanced");
  args.flag("trace", "pipeline plans: write every rank's actions as chrome-tracing JSON to this file");
  args.flag("stage-costs-out", "pipeline plans: write the measured per-stage action and transfer "
                               "times (medians after step 0) for loom plan --stage-costs");
  args.flag("die-after-step", "testing: exit abruptly (code 86) after this step completes");
  args.flag("fail-rank", "testing: this simulated rank gets invalid token ids at --fail-step");
  args.flag("fail-step", "testing: the step at which --fail-rank fails", false, "0");
  args.flag("ac", "activation checkpointing: none, full (keep each layer's input), selective "
                  "(torchtitan's op save list) or budget (fit --ac-memory-budget)",
            false, "none");
  args.flag("ac-layers", "every=N: checkpoint only the N-th, 2N-th, ... layer", false, "every=1");
  args.flag("ac-memory-budget", "--ac budget: GiB the step may take on the device (arena, "
                                "constants, the backend's workspace)");
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
  if (!readPrecisionFlags(precision, args.get("fp8"), args.has("fp8-lm-head"), opts, err))
    return fail("train", err);
  opts.returnGradients = args.has("expect-grads");
  planner::Plan plan;
  if (!parseSpmdPlan(args.get("plan"), args.has("world-size") ? int(args.getInt("world-size")) : 0,
                     plan, err))
    return fail("train", err);
  applyPlan(plan, opts);
  if (args.getDouble("ddp-bucket-mib") < 0)
    return fail("train", "--ddp-bucket-mib must not be negative");
  opts.ddpBucketBytes = int64_t(args.getDouble("ddp-bucket-mib") * (1 << 20));
  opts.fsdpPrefetch = args.getInt("fsdp-prefetch");
  opts.fsdpReshardAfterForward = !args.has("fsdp-keep-gathered");
  opts.ppSplit = args.get("pp-split");
  if (opts.fsdpPrefetch < 0)
    return fail("train", "--fsdp-prefetch must not be negative");
  if (!readRecomputeFlags(args.get("ac"), args.get("ac-layers"), args.get("ac-memory-budget"),
                          args.get("backend"), opts, err))
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
  if (!checkLocalRanks(nproc, env, plan.gpus(), args.get("plan"), args.get("pin-ranks"), err))
    return fail("train", err);
  if (nproc > 1)
    return launchPinnedLocalRanks("train", int(nproc), argsWithout(argc, argv, 1, "nproc"),
                                  args.get("pin-ranks"), int(args.getInt("threads")));
  JobProcess job;
  if (!joinJob(env, plan.gpus(), args.get("plan"), args.getDouble("rendezvous-timeout"), job, err))
    return fail("train", err);
  const bool lead = job.lead;
  std::unique_ptr<StepRunner> runner;
  // A rank that stops because another rank failed exits with
  // kExitPeerFailed, so the launcher names the rank that failed first.
  auto die = [&](const std::string &msg) {
    fail("train", job.rankPrefix + msg);
    return runner && runner->peerFailed() ? kExitPeerFailed : 1;
  };

  auto t0 = Clock::now();
  TrainProgram tp;
  if (!planner::compileTrainStepWithCuts(args.positional()[0], B, T, opts, tp, err))
    return die(err);
  std::printf("%s", recomputeSummary(opts, tp).c_str());
  if (args.has("print-program-stats"))
    std::printf("%s", rt::formatProgramStats(rt::programStats(*tp.program)).c_str());
  TrainLoopOptions loop;
  if (args.has("init-weights") &&
      !loadInitWeights(args.get("init-weights"), tp.params, loop.hfNames, loop.aliases, err))
    return die(err);

  TrainState state = initialTrainState(tp, B, T, batching);
  if (!restoreTrainState(state, args.get("resume"), args.get("checkpoint-dir"), lead, err))
    return die(err);

  runner = createJobRunner(tp, job, int(args.getInt("threads")), args.get("backend"),
                           args.getDouble("collective-timeout"), err);
  if (!runner)
    return die(err);
  double compileS = std::chrono::duration<double>(Clock::now() - t0).count();
  printTrainHeader(args.positional()[0], tp, state,
                   opts.fp8.empty() ? precision : precision + " + fp8 " + opts.fp8, steps, compileS);
  printRunnerSummary(plan, tp, *runner, args.get("backend"), job.env.multiProcess);
  if (args.has("fail-rank") &&
      !runner->injectRankFailure(args.getInt("fail-rank"), args.getInt("fail-step"), err))
    return die(err);

  loop.batch = B, loop.seq = T, loop.steps = steps, loop.rule = rule, loop.lead = lead;
  loop.logPath = args.get("log");
  loop.tensorboardDir = args.get("tensorboard");
  loop.checkpointDir = args.get("checkpoint-dir");
  loop.checkpointEvery = args.getInt("checkpoint-every");
  loop.keepCheckpoints = int(args.getInt("keep-checkpoints"));
  loop.asyncCheckpoint = args.has("async-checkpoint");
  if (args.has("expect-loss"))
    loop.expectLoss = args.getDouble("expect-loss");
  loop.lossTolerance = args.getDouble("loss-tolerance");
  loop.expectGrads = args.get("expect-grads");
  loop.gradTolerance = args.getDouble("grad-tolerance");
  loop.printEvery = args.getInt("print-every");
  loop.dieAfterStep = args.has("die-after-step") ? args.getInt("die-after-step") : -1;
  TrainLoopStatus status = runTrainLoop(*runner, tp, data, state, loop, err);
  if (status == TrainLoopStatus::CheckFailed)
    return 1;
  if (status == TrainLoopStatus::Error)
    return die(err);
  if (lead && tp.pipeline && !reportPipelineRun(tp, *runner, args.get("trace"), err))
    return die(err);
  if (lead && args.has("stage-costs-out") &&
      !writeStageCosts(tp, *runner, args.get("backend"), env.multiProcess,
                       int(args.getInt("threads")), args.get("stage-costs-out"), err))
    return die(err);
  // Every rank takes part in the last gather; then the ranks leave
  // together (finish), and rank 0 alone writes the exports.
  if (!runner->syncState(state, err) || !runner->finish(err))
    return die(err);
  if (!lead)
    return 0;
  if (args.has("export-weights")) {
    if (!exportWeights(args.get("export-weights"), state.params, loop.hfNames, loop.aliases, err,
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
