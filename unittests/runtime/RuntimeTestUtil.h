//===- RuntimeTestUtil.h - Building and running small programs in tests ---===//
//
// Part of loom, under the Apache License v2.0.
//
// Tests build one- or few-instruction programs, fill inputs with fresh random
// values (seeded per test; set LOOM_TEST_SEED to replay a failure, the seed
// is printed with every failing assertion), run them on the CPU backend and
// compare against a straightforward fp64 reference written in the test.
// Executors start with a 0xff-filled arena, so an output element a kernel
// forgets to write reads as NaN and fails the comparison.
//===----------------------------------------------------------------------===//
#ifndef LOOM_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H
#define LOOM_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H

#include "loom/runtime/Executor.h"
#include "loom/runtime/Program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace loom::rt::test {

using Shape = std::vector<int64_t>;
using Bytes = std::vector<uint8_t>;

inline int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// A random source seeded once per test, from LOOM_TEST_SEED if set.
class Rng {
public:
  Rng() : seed_(pickSeed()), gen_(seed_), trace_(__FILE__, __LINE__, "seed " + std::to_string(seed_)) {}
  uint64_t seed() const { return seed_; }
  std::vector<float> uniform(int64_t n, double lo = -1, double hi = 1) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v) x = float(d(gen_));
    return v;
  }
  std::vector<int64_t> ints(int64_t n, int64_t lo, int64_t hi) { // [lo, hi]
    std::uniform_int_distribution<int64_t> d(lo, hi);
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t &x : v) x = d(gen_);
    return v;
  }
  std::mt19937_64 &gen() { return gen_; }

private:
  static uint64_t pickSeed() {
    if (const char *s = std::getenv("LOOM_TEST_SEED"))
      return std::strtoull(s, nullptr, 10);
    return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  uint64_t seed_;
  std::mt19937_64 gen_;
  ::testing::ScopedTrace trace_;
};

/// n values for the certified activations' tests: edge cases first (zeros,
/// the fast paths' input limits, the zeros of SiLU's and GELU's
/// derivatives, tiny and subnormal values), then +-e^U(lo, hi).
inline std::vector<float> logUniformWithEdges(std::mt19937 &gen, int64_t n, double lo, double hi) {
  std::vector<float> v = {0.0f,   -0.0f,   64.0f,  -64.0f, 64.5f,      -64.5f,      100.0f,
                          -100.0f, -1.2785f, -0.7518f, 1e-30f, -1e-30f, 0x1p-100f, -0x1p-101f,
                          1e-38f, -1e-40f, 3e-45f, 88.0f, -88.0f};
  std::uniform_real_distribution<double> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  while (int64_t(v.size()) < n) v.push_back(float((neg(gen) ? -1 : 1) * std::exp(mag(gen))));
  v.resize(size_t(n));
  return v;
}

template <typename T> Bytes toBytes(const std::vector<T> &v) {
  Bytes b(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <typename T> std::vector<T> fromBytes(const Bytes &b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty())
    std::memcpy(v.data(), b.data(), b.size());
  return v;
}

/// Flat index into a tensor of shape `in` of the element that NumPy
/// broadcasting pairs with flat element `i` of a tensor of shape `out`.
inline int64_t broadcastIndex(int64_t i, const Shape &out, const Shape &in) {
  int64_t idx = 0, stride = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    size_t od = out.size() - 1 - d;
    int64_t coord = i % out[od];
    i /= out[od];
    if (d < in.size()) {
      int64_t dim = in[in.size() - 1 - d];
      idx += (dim == 1 ? 0 : coord) * stride;
      stride *= dim;
    }
  }
  return idx;
}

inline std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

/// Builds a program buffer by buffer. Arena buffers are laid out one after
/// another (64-byte aligned, no reuse); constants go into the blob.
class ProgramBuilder {
public:
  uint32_t input(DType t, const Shape &s, const std::string &name = "in") {
    uint32_t id = add(BufferKind::Input, t, s, name);
    p.inputs.push_back(id);
    return id;
  }
  uint32_t output(DType t, const Shape &s, const std::string &name = "out") {
    uint32_t id = add(BufferKind::Output, t, s, name);
    p.outputs.push_back(id);
    return id;
  }
  uint32_t temp(DType t, const Shape &s) { return add(BufferKind::Temp, t, s, "tmp"); }
  uint32_t constant(DType t, const Shape &s, const Bytes &data, const std::string &name = "c") {
    uint32_t id = add(BufferKind::Constant, t, s, name);
    p.buffers[id].offset = (p.constants.size() + 63) / 64 * 64;
    p.constants.resize(p.buffers[id].offset);
    p.constants.insert(p.constants.end(), data.begin(), data.end());
    return id;
  }
  void instr(OpCode op, std::vector<uint32_t> in, std::vector<uint32_t> out,
             std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
    p.instrs.push_back(Instr{op, std::move(in), std::move(out), std::move(ints), std::move(floats)});
  }

  Program p;

private:
  uint32_t add(BufferKind kind, DType t, const Shape &s, const std::string &name) {
    BufferDesc b;
    b.name = name;
    b.dtype = t;
    b.shape = s;
    b.kind = kind;
    b.bytes = uint64_t(numel(s)) * dtypeSize(t);
    if (kind != BufferKind::Constant) {
      b.offset = p.arenaBytes;
      p.arenaBytes += (std::max<uint64_t>(b.bytes, 1) + 63) / 64 * 64;
    }
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  }
};

/// f32 values truncated to bf16 values (still f32).
inline std::vector<float> toBf16Values(std::vector<float> v) {
  for (float &x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u &= 0xffff0000u;
    std::memcpy(&x, &u, 4);
  }
  return v;
}

/// The unfused form of SumSquares over x of `shape`: a squared copy, then a
/// sum over every axis.
inline Program sumSquaresUnfused(const Shape &shape) {
  ProgramBuilder u;
  uint32_t x = u.input(DType::F32, shape), sq = u.temp(DType::F32, shape);
  u.instr(OpCode::Mul, {x, x}, {sq});
  std::vector<int64_t> ints = {0};
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) ints.push_back(d);
  u.instr(OpCode::Reduce, {sq}, {u.output(DType::F32, {})}, ints);
  return u.p;
}

/// A norm's gradient with the residual stream's gradient added to dx:
/// fused, one RmsNormGrad (or LayerNormGrad) with the addend as its fourth
/// input; or unfused, the norm's gradient into a temporary, then Add(a, dx)
/// (loom-fuse-norm-grad-accumulate's two forms). Inputs x, w, dy, a of
/// `dtype` (f32 or f64), [rows, D]. With `bf16`, dy is bf16 storage and the
/// sum is stored as bf16 (fused: dx's bf16 storage; unfused: a Cast after
/// the Add), then widened to the output. Outputs the sum, dw (and db).
inline Program normGradAddendProgram(bool layerNorm, int64_t rows, int64_t D, DType dtype,
                                     bool fused, bool bf16 = false) {
  ProgramBuilder b;
  Shape s = {rows, D}, d = {D};
  uint32_t x = b.input(dtype, s), w = b.input(dtype, d),
           dy = b.input(bf16 ? DType::BF16 : dtype, s), a = b.input(dtype, s);
  uint32_t result = b.output(dtype, s); // first in both forms: the same output order
  uint32_t dx = bf16 ? b.temp(fused ? DType::BF16 : dtype, s) : (fused ? result : b.temp(dtype, s));
  std::vector<uint32_t> outs = {dx, b.output(dtype, d)};
  if (layerNorm) outs.push_back(b.output(dtype, d));
  std::vector<uint32_t> ins = {x, w, dy};
  if (fused) ins.push_back(a);
  b.instr(layerNorm ? OpCode::LayerNormGrad : OpCode::RmsNormGrad, ins, outs, {},
          {layerNorm ? 1e-5 : 1e-6});
  uint32_t stored = dx;
  if (!fused) {
    uint32_t sum = bf16 ? b.temp(dtype, s) : result;
    b.instr(OpCode::Add, {a, dx}, {sum});
    stored = sum;
    if (bf16) {
      stored = b.temp(DType::BF16, s);
      b.instr(OpCode::Cast, {sum}, {stored});
    }
  }
  if (bf16) b.instr(OpCode::Cast, {stored}, {result});
  return b.p;
}

/// A residual add and its RmsNorm: with `fused` one AddRmsNorm (loom-fuse-
/// add-rms-norm), else Add then RmsNorm. Outputs: the sum, the norm. With
/// `bf16`, the sublayer's output b is bf16 storage and so is the norm (as
/// in autocast's step), read and written by the instructions themselves.
inline Program addRmsNormProgram(int64_t rows, int64_t D, DType dtype, bool fused,
                                 bool bf16 = false) {
  ProgramBuilder b;
  Shape s = {rows, D};
  DType low = bf16 ? DType::BF16 : dtype;
  uint32_t a = b.input(dtype, s), x = b.input(low, s), w = b.input(dtype, {D});
  uint32_t sum = b.output(dtype, s, "sum"), y = b.output(low, s, "y");
  if (fused) {
    b.instr(OpCode::AddRmsNorm, {a, x, w}, {sum, y}, {}, {1e-5});
  } else {
    b.instr(OpCode::Add, {a, x}, {sum});
    b.instr(OpCode::RmsNorm, {sum, w}, {y}, {}, {1e-5});
  }
  return b.p;
}

/// A norm gradient (RmsNormGrad, or LayerNormGrad with `layerNorm`) with
/// an addend, its dx also wanted rounded to bf16 for the GEMMs below: with
/// `fused` the gradient stores that copy itself (ints [1], storesRoundedDx)
/// and reads x as bf16 storage when `bf16X`; else Casts around it, as
/// codegen lowers them before its folds. Inputs x ([rows, D], bf16 with
/// `bf16X`, else f32), w [D], dy (bf16), addend (f32); outputs dx (f32),
/// the weight gradients, the copy (bf16).
inline Program normGradCopyProgram(int64_t rows, int64_t D, bool layerNorm, bool fused,
                                   bool bf16X) {
  ProgramBuilder b;
  Shape s = {rows, D};
  uint32_t x = b.input(bf16X ? DType::BF16 : DType::F32, s), w = b.input(DType::F32, {D}),
           dy = b.input(DType::BF16, s), a = b.input(DType::F32, s);
  std::vector<uint32_t> outs = {b.output(DType::F32, s, "dx"), b.output(DType::F32, {D}, "dw")};
  if (layerNorm) outs.push_back(b.output(DType::F32, {D}, "db"));
  uint32_t copy = b.output(DType::BF16, s, "copy");
  OpCode op = layerNorm ? OpCode::LayerNormGrad : OpCode::RmsNormGrad;
  if (fused) {
    outs.push_back(copy);
    b.instr(op, {x, w, dy, a}, outs, {1}, {1e-5});
    return b.p;
  }
  uint32_t xf = x;
  if (bf16X) {
    xf = b.temp(DType::F32, s);
    b.instr(OpCode::Cast, {x}, {xf});
  }
  b.instr(op, {xf, w, dy, a}, outs, {}, {1e-5});
  b.instr(OpCode::Cast, {outs[0]}, {copy});
  return b.p;
}

/// A table's two gradients summed: with `fused` one EmbeddingGrad with the
/// addend as its third input (loom-fuse-embedding-grad-accumulate), else
/// EmbeddingGrad then Add(addend, table gradient), as BuildTrainStep emits
/// them. Inputs dy [N, D] of `dtype`, ids [N] (i64), the addend [V, D] of
/// `dtype` or, with `bf16Addend`, bf16 storage of it (a tied head's bf16
/// weight gradient); one output, the sum.
inline Program embeddingGradAddendProgram(int64_t V, int64_t D, int64_t N, DType dtype,
                                          bool fused, bool bf16Addend = false) {
  ProgramBuilder b;
  uint32_t dy = b.input(dtype, {N, D}), ids = b.input(DType::I64, {N}),
           a = b.input(bf16Addend ? DType::BF16 : dtype, {V, D});
  uint32_t result = b.output(dtype, {V, D});
  if (fused) {
    b.instr(OpCode::EmbeddingGrad, {dy, ids, a}, {result});
  } else {
    uint32_t table = b.temp(dtype, {V, D});
    b.instr(OpCode::EmbeddingGrad, {dy, ids}, {table});
    b.instr(OpCode::Add, {a, table}, {result});
  }
  return b.p;
}

/// The gradient norm over tensors of `shapes`, each input of `dtype`
/// (f32, bf16 storage or f64): fused, one GlobalSumSquares; or chained, a
/// SumSquares per tensor and the Adds of BuildTrainStep's chain, ((s0 + s1)
/// + s2) + ... The sums are f64 for f64 inputs, else f32.
inline Program globalSumSquaresProgram(const std::vector<Shape> &shapes, DType dtype,
                                       bool chained) {
  ProgramBuilder b;
  DType sum = dtype == DType::F64 ? DType::F64 : DType::F32;
  std::vector<uint32_t> xs;
  for (const Shape &s : shapes) xs.push_back(b.input(dtype, s));
  if (!chained) {
    b.instr(OpCode::GlobalSumSquares, xs, {b.output(sum, {})});
    return b.p;
  }
  uint32_t total = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    bool last = k + 1 == xs.size();
    uint32_t s = xs.size() == 1 ? b.output(sum, {}) : b.temp(sum, {});
    b.instr(OpCode::SumSquares, {xs[k]}, {s});
    if (k == 0) {
      total = s;
      continue;
    }
    uint32_t t = last ? b.output(sum, {}) : b.temp(sum, {});
    b.instr(OpCode::Add, {total, s}, {t});
    total = t;
  }
  return b.p;
}

/// Values as bf16 storage bytes (each rounded toward zero to bf16).
inline Bytes bf16StorageBytes(const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    h[i] = uint16_t(u >> 16);
  }
  return toBytes(h);
}

/// Random inputs for normGradCopyProgram: x in [-2, 2) (bf16 storage with
/// `bf16X`), w in [0.5, 1.5), dy (bf16) in [-1, 1), the addend within
/// +-addendScale.
inline std::vector<Bytes> normGradCopyInputs(Rng &rng, int64_t rows, int64_t D, bool bf16X,
                                             float addendScale) {
  std::vector<float> x = rng.uniform(rows * D, -2, 2);
  return {bf16X ? bf16StorageBytes(x) : toBytes(x), toBytes(rng.uniform(D, 0.5, 1.5)),
          bf16StorageBytes(rng.uniform(rows * D, -1, 1)),
          toBytes(rng.uniform(rows * D, -addendScale, addendScale))};
}

/// The inputs of embeddingGradAddendProgram: ids in [0, V / 2) (repeats, and
/// rows no id picks), an addend with -0 and +0 entries (an unpicked -0 row
/// element becomes +0, as the Add made it) and, for f64, bits f32 lacks.
inline std::vector<Bytes> embeddingGradAddendInputs(Rng &rng, int64_t V, int64_t D, int64_t N,
                                                    DType dt, bool bf16Addend) {
  std::vector<float> dy = rng.uniform(N * D, -1, 1), a = rng.uniform(V * D, -1e3, 1e3);
  for (int64_t i = 0; i < V * D; i += 7) a[size_t(i)] = (i / 7) % 2 ? -0.0f : 0.0f;
  auto bytes = [&](const std::vector<float> &v) {
    if (dt != DType::F64) return toBytes(v);
    std::vector<double> d(v.begin(), v.end());
    for (double &x : d) x *= 1.0 + 1e-9;
    return toBytes(d);
  };
  return {bytes(dy), toBytes(rng.ints(N, 0, V / 2 - 1)),
          bf16Addend ? bf16StorageBytes(a) : bytes(a)};
}

/// neg(x) viewed as [3, 4], then exp: a program with one reshape view
/// (Program::views) of the [2, 6] temporary.
inline Program viewProgram() {
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {2, 6}), t = b.temp(DType::F32, {2, 6});
  uint32_t v = b.temp(DType::F32, {3, 4}), o = b.output(DType::F32, {3, 4});
  b.p.buffers[v].offset = b.p.buffers[t].offset;
  b.p.views.push_back({v, t});
  b.instr(OpCode::Neg, {x}, {t});
  b.instr(OpCode::Exp, {v}, {o});
  return b.p;
}

/// A small decoder-like program: ids -> embedding -> rms_norm -> matmul ->
/// gelu -> logits, and cross-entropy against targets. Weights are random
/// constants. Inputs: ids[N] (i64), targets[N] (i64); outputs: logits[N, V],
/// loss[].
inline Program tinyLanguageModel(Rng &rng, int64_t N = 6, int64_t V = 11, int64_t D = 8) {
  ProgramBuilder b;
  uint32_t ids = b.input(DType::I64, {N}, "input_ids");
  uint32_t targets = b.input(DType::I64, {N}, "targets");
  uint32_t wte = b.constant(DType::F32, {V, D}, toBytes(rng.uniform(V * D)), "wte");
  uint32_t norm = b.constant(DType::F32, {D}, toBytes(rng.uniform(D, 0.5, 1.5)), "norm.weight");
  uint32_t head = b.constant(DType::F32, {V, D}, toBytes(rng.uniform(V * D)), "lm_head");
  uint32_t h = b.temp(DType::F32, {N, D}), hn = b.temp(DType::F32, {N, D});
  uint32_t z = b.temp(DType::F32, {N, V});
  uint32_t logits = b.output(DType::F32, {N, V}, "logits");
  uint32_t loss = b.output(DType::F32, {}, "loss");
  b.instr(OpCode::Embedding, {wte, ids}, {h});
  b.instr(OpCode::RmsNorm, {h, norm}, {hn}, {}, {1e-6});
  b.instr(OpCode::MatMul, {hn, head}, {z}, {0, 1});
  b.instr(OpCode::GeluTanh, {z}, {logits});
  b.instr(OpCode::CrossEntropy, {logits, targets}, {loss});
  return b.p;
}

/// Runs `p` on a backend (the CPU by default); returns the outputs, or why
/// not.
struct RunResult {
  bool ok = false;
  std::string err;
  std::vector<Bytes> outputs;
  template <typename T> std::vector<T> out(size_t k = 0) const { return fromBytes<T>(outputs[k]); }
};

inline RunResult runProgram(const Program &p, const std::vector<Bytes> &inputs, int threads = 3,
                            const std::string &backend = "cpu") {
  RunResult r;
  auto exec = createExecutor(std::make_shared<Program>(p), backend, threads, r.err);
  if (!exec)
    return r;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!exec->setInput(i, inputs[i].data(), inputs[i].size(), r.err))
      return r;
  if (!exec->run(r.err))
    return r;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    r.outputs.emplace_back(p.buffers[p.outputs[i]].bytes);
    if (!exec->getOutput(i, r.outputs.back().data(), r.outputs.back().size(), r.err))
      return r;
  }
  r.ok = true;
  return r;
}

/// An AdamW step program (inputs p, g, m, v, lr, step) run four times on
/// one executor with its state resident: m and v start at zero, run r's
/// step is r, and p is set again to `restored` before run 2 (as a resumed
/// job sets it). `after(r)` reads run r's outputs; false (or a failed call)
/// stops, with the reason in err.
template <typename After>
bool runAdamWFourTimes(Executor &exec, const std::vector<float> &p0, const std::vector<float> &g,
                       const std::vector<float> &restored, After &&after, std::string &err) {
  size_t bytes = p0.size() * 4;
  std::vector<float> zeros(p0.size(), 0.f);
  float lr = 3e-2f;
  bool ok = exec.setInput(0, p0.data(), bytes, err) && exec.setInput(1, g.data(), bytes, err) &&
            exec.setInput(2, zeros.data(), bytes, err) &&
            exec.setInput(3, zeros.data(), bytes, err) && exec.setInput(4, &lr, 4, err);
  for (int r = 0; r < 4 && ok; ++r) {
    float s = float(r);
    if (r == 2)
      ok = exec.setInput(0, restored.data(), bytes, err);
    ok = ok && exec.setInput(5, &s, 4, err) && exec.run(err) && after(r);
  }
  return ok;
}

/// Every element within atol + rtol * |want|; NaN never passes. Reports
/// the worst element rather than every one.
inline ::testing::AssertionResult allClose(const std::vector<float> &got,
                                           const std::vector<double> &want, double rtol,
                                           double atol = 0) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  size_t worst = 0, bad = 0;
  double worstExcess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]), limit = atol + rtol * std::fabs(want[i]);
    if (err <= limit)
      continue; // NaN fails here
    ++bad;
    double excess = std::isnan(err) ? INFINITY : err - limit;
    if (!(excess <= worstExcess)) {
      worstExcess = excess;
      worst = i;
    }
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements off; worst at " << worst << ": got "
         << got[worst] << ", want " << want[worst] << " (rtol " << rtol << ", atol " << atol << ")";
}

/// Sixteen inputs for which rounding each square to f32 before adding
/// changes the f32 sum of squares (drawn until the two sums disagree). The
/// squares lie in [1.44, 1.96] and add up exactly in double, in any order,
/// so a sum-of-squares kernel that rounds like the Mul it replaces has one
/// right answer for them: `rounded`. False if none were drawn.
inline bool squaresThatRoundDifferently(Rng &rng, std::vector<float> &xv, float &rounded) {
  float exact = 0;
  rounded = 0;
  for (int tries = 0; tries < 10000 && rounded == exact; ++tries) {
    xv = rng.uniform(16, 1.2, 1.4);
    double sumRounded = 0, sumExact = 0;
    for (float v : xv) {
      float sq = v * v;
      sumRounded += sq;
      sumExact += double(v) * v;
    }
    rounded = float(sumRounded), exact = float(sumExact);
  }
  return rounded != exact;
}

} // namespace loom::rt::test

#endif
