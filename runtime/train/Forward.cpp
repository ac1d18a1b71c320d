//===- Forward.cpp --------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/Forward.h"
#include "loom/runtime/Executor.h"
#include "loom/train/Npy.h"
#include "loom/train/TokenData.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace loom::train {

bool readEvalTokens(const std::string &tokensPath, const std::string &dataPath, int64_t step,
                    int64_t &batch, int64_t &seq, std::vector<int64_t> &ids,
                    std::vector<int64_t> &targets, std::string &err) {
  if (!tokensPath.empty()) {
    NpyArray t;
    if (!readNpy(tokensPath, t, err))
      return false;
    if (t.shape.size() != 2) {
      err = tokensPath + ": tokens must be [B, T]";
      return false;
    }
    batch = t.shape[0], seq = t.shape[1];
    ids = t.asInts();
    return true;
  }
  TokenFile f;
  Batch b;
  if (!f.load(dataPath, err) || !makeBatch(f, step, batch, seq, b, err))
    return false;
  ids = b.inputs;
  targets = b.targets;
  return true;
}

bool runForward(const std::shared_ptr<rt::Program> &program, const std::vector<int64_t> &ids,
                const std::string &backend, int threads, ForwardResult &out, std::string &err) {
  if (program->inputs.size() != 1 || program->outputs.size() != 1) {
    err = "the model must take token ids and return logits";
    return false;
  }
  const rt::BufferDesc &in = program->buffers[program->inputs[0]];
  const rt::BufferDesc &logits = program->buffers[program->outputs[0]];
  if (in.numElements() != int64_t(ids.size()) || in.dtype != rt::DType::I64) {
    err = "the model takes " + std::to_string(in.numElements()) +
          " int64 token ids; the batch holds " + std::to_string(ids.size());
    return false;
  }
  if (logits.dtype != rt::DType::F32 || logits.shape.size() != 3) {
    err = "the model's output is not float32 logits [B, T, V]";
    return false;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto exec = rt::createExecutor(program, backend, threads, err);
  if (!exec)
    return false;
  auto t1 = std::chrono::steady_clock::now();
  out.shape = logits.shape;
  out.logits.resize(size_t(logits.numElements()));
  if (!exec->setInput(0, ids.data(), ids.size() * sizeof(int64_t), err) || !exec->run(err) ||
      !exec->getOutput(0, out.logits.data(), out.logits.size() * sizeof(float), err))
    return false;
  auto t2 = std::chrono::steady_clock::now();
  out.setupSeconds = std::chrono::duration<double>(t1 - t0).count();
  out.runSeconds = std::chrono::duration<double>(t2 - t1).count();
  return true;
}

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

bool writeLogits(const ForwardResult &r, const std::string &path, std::string &err) {
  NpyArray a{"<f4", r.shape, {}};
  a.data.resize(r.logits.size() * sizeof(float));
  std::memcpy(a.data.data(), r.logits.data(), a.data.size());
  return writeNpy(path, a, err);
}

bool compareLogits(const ForwardResult &r, const std::string &refPath, LogitsError &out,
                   std::string &err) {
  NpyArray ref;
  if (!readNpy(refPath, ref, err))
    return false;
  if (ref.shape != r.shape) {
    err = "reference logits have a different shape";
    return false;
  }
  std::vector<double> want = ref.asDoubles();
  double maxDiff = 0, maxRef = 0, sq = 0, sqRef = 0;
  out.finite = true;
  for (size_t k = 0; k < want.size(); ++k) {
    double d = std::fabs(double(r.logits[k]) - want[k]);
    out.finite = out.finite && std::isfinite(r.logits[k]);
    maxDiff = std::max(maxDiff, d);
    maxRef = std::max(maxRef, std::fabs(want[k]));
    sq += d * d;
    sqRef += want[k] * want[k];
  }
  out.maxRel = maxDiff / maxRef;
  out.l2Rel = std::sqrt(sq / sqRef);
  return true;
}

} // namespace loom::train
