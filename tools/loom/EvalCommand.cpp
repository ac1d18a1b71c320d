//===- EvalCommand.cpp - `loom eval` --------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Runs the forward pass once: logits for a batch of tokens, the mean
// next-token cross-entropy when targets are known, and an optional check
// against reference logits.
//===----------------------------------------------------------------------===//
#include "Args.h"
#include "Commands.h"
#include "ModelLoading.h"
#include "Npy.h"
#include "TokenData.h"
#include "loom/runtime/Executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

namespace loom::tools {
namespace {

/// Mean over rows of logsumexp(row) - row[target], in double.
double meanCrossEntropy(const std::vector<float> &logits, const std::vector<int64_t> &targets,
                        int64_t vocab) {
  double total = 0;
  int64_t rows = int64_t(targets.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = logits.data() + r * vocab;
    double mx = *std::max_element(row, row + vocab), sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
    total += mx + std::log(sum) - double(row[targets[r]]);
  }
  return total / double(rows);
}

} // namespace

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
  if (args.has("tokens")) {
    NpyArray t;
    if (!readNpy(args.get("tokens"), t, err))
      return fail("eval", err);
    if (t.shape.size() != 2)
      return fail("eval", args.get("tokens") + ": tokens must be [B, T]");
    batch = t.shape[0], seq = t.shape[1];
    ids = t.asInts();
  } else {
    if (batch <= 0 || seq <= 0)
      return fail("eval", "--data needs --batch and --seq");
    TokenFile f;
    Batch b;
    if (!f.load(args.get("data"), err) ||
        !makeBatch(f, args.getInt("step"), batch, seq, b, err))
      return fail("eval", err);
    ids = b.inputs;
    targets = b.targets;
  }

  auto program = std::make_shared<rt::Program>();
  auto t0 = std::chrono::steady_clock::now();
  if (!loadProgram(args.positional()[0], batch, seq, *program, err))
    return fail("eval", err);
  if (program->inputs.size() != 1 || program->outputs.size() != 1)
    return fail("eval", "the model must take token ids and return logits");
  const rt::BufferDesc &in = program->buffers[program->inputs[0]];
  const rt::BufferDesc &out = program->buffers[program->outputs[0]];
  if (in.numElements() != int64_t(ids.size()) || in.dtype != rt::DType::I64)
    return fail("eval", "the model takes " + std::to_string(in.numElements()) +
                            " int64 token ids; the batch holds " + std::to_string(ids.size()));
  if (out.dtype != rt::DType::F32 || out.shape.size() != 3)
    return fail("eval", "the model's output is not float32 logits [B, T, V]");
  auto exec = rt::createExecutor(program, args.get("backend"), int(args.getInt("threads")), err);
  if (!exec)
    return fail("eval", err);
  auto t1 = std::chrono::steady_clock::now();
  std::vector<float> logits(out.numElements());
  if (!exec->setInput(0, ids.data(), ids.size() * sizeof(int64_t), err) || !exec->run(err) ||
      !exec->getOutput(0, logits.data(), logits.size() * sizeof(float), err))
    return fail("eval", err);
  auto t2 = std::chrono::steady_clock::now();
  double compileS = std::chrono::duration<double>(t1 - t0).count();
  double runS = std::chrono::duration<double>(t2 - t1).count();
  int64_t vocab = out.shape[2];
  std::printf("model %s: batch %lld x seq %lld -> logits [%lld, %lld, %lld] "
              "(load/compile %.2f s, forward %.3f s on cpu)\n",
              args.positional()[0].c_str(), (long long)batch, (long long)seq,
              (long long)out.shape[0], (long long)out.shape[1], (long long)vocab, compileS, runS);
  if (!targets.empty())
    std::printf("loss %.6f (mean next-token cross-entropy over %zu positions)\n",
                meanCrossEntropy(logits, targets, vocab), targets.size());
  if (args.has("dump-logits")) {
    NpyArray a{"<f4", out.shape, {}};
    a.data.resize(logits.size() * sizeof(float));
    std::memcpy(a.data.data(), logits.data(), a.data.size());
    if (!writeNpy(args.get("dump-logits"), a, err))
      return fail("eval", err);
  }
  if (args.has("expect-logits")) {
    NpyArray ref;
    if (!readNpy(args.get("expect-logits"), ref, err))
      return fail("eval", err);
    if (ref.shape != out.shape)
      return fail("eval", "reference logits have a different shape");
    std::vector<double> r = ref.asDoubles();
    double maxDiff = 0, maxRef = 0, sq = 0, sqRef = 0;
    bool finite = true;
    for (size_t k = 0; k < r.size(); ++k) {
      double d = std::fabs(double(logits[k]) - r[k]);
      finite = finite && std::isfinite(logits[k]);
      maxDiff = std::max(maxDiff, d);
      maxRef = std::max(maxRef, std::fabs(r[k]));
      sq += d * d;
      sqRef += r[k] * r[k];
    }
    double rel = maxDiff / maxRef, tol = args.getDouble("tolerance");
    bool pass = finite && rel <= tol;
    std::printf("logits vs %s: max|diff|/max|ref| = %.3e, ||diff||/||ref|| = %.3e "
                "(tolerance %.1e): %s\n",
                args.get("expect-logits").c_str(), rel, std::sqrt(sq / sqRef), tol,
                pass ? "PASS" : "FAIL");
    if (!pass)
      return 1;
  }
  return 0;
}

} // namespace loom::tools
