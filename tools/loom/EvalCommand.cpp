//===- EvalCommand.cpp - `loom eval` --------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Runs the forward pass once (loom/train/Forward.h): logits for a batch of
// tokens, the mean next-token cross-entropy when targets are known, and an
// optional check against reference logits.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "compiler/CompileTrainStep.h"
#include "compiler/ModelLoading.h"
#include "loom/train/Forward.h"
#include "loom/train/TokenData.h"

#include <chrono>
#include <cstdio>
#include <memory>

namespace loom::tools {
using namespace compiler;
using namespace train;

int runEval(int argc, char **argv) {
  Args args("eval", "MODEL.onnx|ARTIFACT (--tokens X.npy | --data TOKENS.bin) [options]");
  args.flag("batch", "batch size (with --data, or to specialize an ONNX model)");
  args.flag("seq", "sequence length (with --data, or to specialize an ONNX model)");
  args.flag("tokens", "token ids as an integer .npy of shape [B, T]");
  args.flag("data", "token file (uint16, uint32 if named *.u32.bin, or a 1-D .npy of integer ids)");
  args.flag("step", "which batch of --data to take (fixtures' rule)", false, "0");
  args.flag("dump-logits", "write the logits to this .npy file");
  args.flag("expect-logits", "compare against reference logits in this .npy file");
  args.flag("tolerance", "max relative error allowed by --expect-logits", false, "1e-5");
  args.flag("threads", "CPU threads (0: all)", false, "0");
  args.flag("backend", "where the program runs: cpu or cuda", false, "cpu");
  if (!args.parse(argc, argv, 2))
    return args.wantsHelp() ? 0 : 1;
  if (args.positional().size() != 1)
    return fail("eval", "expected one model or artifact (see loom eval --help)");
  if (args.has("tokens") == args.has("data"))
    return fail("eval", "give exactly one of --tokens and --data");
  std::string err;
  std::vector<int64_t> ids, targets;
  int64_t batch = args.getInt("batch"), seq = args.getInt("seq");
  if (args.has("data") && (batch <= 0 || seq <= 0))
    return fail("eval", "--data needs --batch and --seq");
  if (!readEvalTokens(args.get("tokens"), args.get("data"), args.getInt("step"), batch, seq, ids,
                      targets, err))
    return fail("eval", err);

  auto program = std::make_shared<rt::Program>();
  auto t0 = std::chrono::steady_clock::now();
  if (!loadProgram(args.positional()[0], batch, seq, *program, err))
    return fail("eval", err);
  double loadS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ForwardResult r;
  if (!runForward(program, ids, args.get("backend"), int(args.getInt("threads")), r, err))
    return fail("eval", err);
  int64_t vocab = r.shape[2];
  std::printf("model %s: batch %lld x seq %lld -> logits [%lld, %lld, %lld] "
              "(load/compile %.2f s, forward %.3f s on cpu)\n",
              args.positional()[0].c_str(), (long long)batch, (long long)seq,
              (long long)r.shape[0], (long long)r.shape[1], (long long)vocab,
              loadS + r.setupSeconds, r.runSeconds);
  if (!targets.empty())
    std::printf("loss %.6f (mean next-token cross-entropy over %zu positions)\n",
                meanCrossEntropy(r.logits, targets, vocab), targets.size());
  if (args.has("dump-logits") && !writeLogits(r, args.get("dump-logits"), err))
    return fail("eval", err);
  if (args.has("expect-logits")) {
    LogitsError e;
    if (!compareLogits(r, args.get("expect-logits"), e, err))
      return fail("eval", err);
    double tol = args.getDouble("tolerance");
    bool pass = e.finite && e.maxRel <= tol;
    std::printf("logits vs %s: max|diff|/max|ref| = %.3e, ||diff||/||ref|| = %.3e "
                "(tolerance %.1e): %s\n",
                args.get("expect-logits").c_str(), e.maxRel, e.l2Rel, tol, pass ? "PASS" : "FAIL");
    if (!pass)
      return 1;
  }
  return 0;
}

} // namespace loom::tools
