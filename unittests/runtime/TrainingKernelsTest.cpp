//===- TrainingKernelsTest.cpp - Backward kernels and AdamW ---------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Every backward kernel is checked as a vector-Jacobian product: for a
// forward function f written here in double precision and a fixed random
// cotangent r, the kernel run on dy = r must return the gradient of
//   L(x) = sum_i f(x)_i r_i
// which the test estimates by central differences in double,
//   dL/dx_e ~ (L(x + h e) - L(x - h e)) / 2h,   h = 1e-5,
// accurate to ~1e-9 relative here, far below the f32 kernels' rounding.
// The measure is the relative L2 error ||got - fd|| / ||fd|| over a whole
// gradient tensor; a NaN (an element the kernel never wrote: the executor's
// arena starts as NaN) fails it. AdamW is checked against a scalar double
// reimplementation of torch.optim.AdamW over three steps.
//
// The kernels also run in f64 (the precision of the compiler's gradient
// checks); every finite-difference test runs both, with the same inputs.
//===----------------------------------------------------------------------===//
#include "RuntimeTestUtil.h"

#include "loom/runtime/Artifact.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <unistd.h>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

using Vec = std::vector<double>;
using Forward = std::function<Vec(const Vec &)>;

/// The float types the kernels run in, and the bound on the relative L2
/// error of each: f32 rounding leaves ~1e-7, finite differences ~1e-9; a
/// wrong term is O(1).
const DType kFloatTypes[] = {DType::F32, DType::F64};
double fdTolerance(DType t) { return t == DType::F64 ? 1e-7 : 1e-5; }

/// `v` stored as f32 or f64.
Bytes asBytes(DType t, const std::vector<float> &v) {
  return t == DType::F64 ? toBytes(std::vector<double>(v.begin(), v.end())) : toBytes(v);
}

/// Output k of an f32 or f64 run, as doubles.
Vec outVec(const RunResult &r, size_t k, DType t) {
  return t == DType::F64 ? r.out<double>(k) : toDouble(r.out<float>(k));
}

/// Central-difference gradient of sum(f(x) * r) with respect to x.
Vec numericGrad(const Forward &f, Vec x, const Vec &r, double h = 1e-5) {
  auto loss = [&](const Vec &at) {
    Vec y = f(at);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };
  Vec g(x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    double saved = x[e];
    x[e] = saved + h;
    double up = loss(x);
    x[e] = saved - h;
    double down = loss(x);
    x[e] = saved;
    g[e] = (up - down) / (2 * h);
  }
  return g;
}

/// ||got - want|| / ||want||; NaN if got has a NaN or the sizes differ.
double relL2(const Vec &got, const Vec &want) {
  if (got.size() != want.size())
    return NAN;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

/// Checks a kernel's gradient against finite differences and prints the
/// error (grep "[fd]" in the test log for the measured values).
void expectGradient(const std::string &what, DType t, const Vec &got, const Vec &fd) {
  double err = relL2(got, fd);
  std::string name = what + " " + dtypeName(t);
  std::printf("[fd] %-56s rel L2 error %.3g\n", name.c_str(), err);
  EXPECT_LT(err, fdTolerance(t)) << name; // NaN fails too
}

std::string shapeName(const Shape &s) {
  std::string n = "[";
  for (size_t i = 0; i < s.size(); ++i) n += (i ? "," : "") + std::to_string(s[i]);
  return n + "]";
}

/// Row-major coordinates of flat index `i` in `shape`.
Shape coords(int64_t i, const Shape &shape) {
  Shape c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
  return c;
}

//===--- Reference forward functions (double) -----------------------------===//

Vec rmsNormRef(const Vec &x, const Vec &w, int64_t D, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / D; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += x[r * D + i] * x[r * D + i];
    double inv = 1 / std::sqrt(ss / D + eps);
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = x[r * D + i] * inv * w[i];
  }
  return y;
}

Vec layerNormRef(const Vec &x, const Vec &w, const Vec &b, int64_t D, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / D; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < D; ++i) mean += x[r * D + i];
    mean /= D;
    for (int64_t i = 0; i < D; ++i) var += (x[r * D + i] - mean) * (x[r * D + i] - mean);
    double inv = 1 / std::sqrt(var / D + eps);
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = (x[r * D + i] - mean) * inv * w[i] + b[i];
  }
  return y;
}

struct AttnCase {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  bool causal;
  std::string name() const {
    return "B" + std::to_string(B) + " Hq" + std::to_string(Hq) + " Hkv" + std::to_string(Hkv) +
           " T" + std::to_string(T) + " S" + std::to_string(S) + " D" + std::to_string(D) + " Dv" +
           std::to_string(Dv) + (causal ? " causal" : "");
  }
};

/// The unfused graph: scores, -inf mask, softmax, weighted values, with kv
/// head h / (Hq / Hkv) for query head h.
Vec attentionRef(const AttnCase &c, const Vec &q, const Vec &k, const Vec &v, double scale) {
  Vec out;
  int64_t offset = c.S > c.T ? c.S - c.T : 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      int64_t g = h / (c.Hq / c.Hkv);
      for (int64_t i = 0; i < c.T; ++i) {
        Vec s(size_t(c.S));
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.S; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot +=
                q[((b * c.Hq + h) * c.T + i) * c.D + d] * k[((b * c.Hkv + g) * c.S + j) * c.D + d];
          s[j] = c.causal && j > i + offset ? -INFINITY : scale * dot;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double &x : s) sum += x = std::exp(x - mx);
        for (int64_t d = 0; d < c.Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < c.S; ++j) acc += s[j] * v[((b * c.Hkv + g) * c.S + j) * c.Dv + d];
          out.push_back(acc / sum);
        }
      }
    }
  return out;
}

Vec rotaryRef(const Vec &x, const Shape &xs, const Vec &cs, const Vec &sn, const Shape &ts) {
  int64_t D = xs.back(), half = D / 2;
  Vec y(x.size());
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    int64_t d = i % D, row = i - d, t = broadcastIndex(i, xs, ts);
    double rot = d < half ? -x[row + d + half] : x[row + d - half];
    y[i] = x[i] * cs[t] + rot * sn[t];
  }
  return y;
}

double activationRef(int kind, double x) {
  switch (kind) {
  case 0: return x / (1 + std::exp(-x));
  case 1: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case 3: return x > 0 ? x : 0.0;
  default: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
}

Vec softmaxRef(const Vec &x, const Shape &s, size_t axis) {
  int64_t len = s[axis], inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  Vec y(x.size());
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    int64_t base = (i / (len * inner)) * len * inner + i % inner;
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < len; ++k) mx = std::max(mx, x[base + k * inner]);
    for (int64_t k = 0; k < len; ++k) sum += std::exp(x[base + k * inner] - mx);
    y[i] = std::exp(x[i] - mx) / sum;
  }
  return y;
}

double crossEntropyRef(const Vec &logits, const std::vector<int64_t> &t, int64_t V) {
  int64_t N = int64_t(t.size());
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits[n * V + v]);
    for (int64_t v = 0; v < V; ++v) sum += std::exp(logits[n * V + v] - mx);
    total += mx + std::log(sum) - logits[n * V + t[n]];
  }
  return total / N;
}

/// x[start_d + i_d step_d, ...] for every index i of a window of shape ys.
Vec sliceRef(const Vec &x, const Shape &xs, const Shape &ys, const std::vector<int64_t> &ints) {
  Vec y(size_t(numel(ys)));
  for (int64_t o = 0; o < numel(ys); ++o) {
    Shape c = coords(o, ys);
    int64_t at = 0;
    for (size_t d = 0; d < xs.size(); ++d) at = at * xs[d] + ints[2 * d] + c[d] * ints[2 * d + 1];
    y[o] = x[at];
  }
  return y;
}

//===--- EmbeddingGrad ----------------------------------------------------===//

TEST(TrainingKernels, EmbeddingGradScatterAddsRepeatedIds) {
  Rng rng;
  int64_t V = 7, D = 5; // odd D; ids only in [0, 4]: repeats, and rows 5, 6 stay zero
  Shape ids = {3, 4}, ys = {3, 4, D};
  auto idv = rng.ints(numel(ids), 0, 4);
  idv[0] = idv[5] = idv[11] = 2; // at least one id used three times
  auto table = rng.uniform(V * D), r = rng.uniform(numel(ys));
  Vec fd = numericGrad(
      [&](const Vec &t) {
        Vec y;
        for (int64_t id : idv)
          for (int64_t d = 0; d < D; ++d) y.push_back(t[id * D + d]);
        return y;
      },
      toDouble(table), toDouble(r));
  for (DType dt : kFloatTypes)
    for (DType idType : {DType::I64, DType::I32}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " ids " + dtypeName(idType));
      ProgramBuilder b;
      uint32_t dy = b.input(dt, ys), x = b.input(idType, ids);
      uint32_t o = b.output(dt, {V, D});
      b.instr(OpCode::EmbeddingGrad, {dy, x}, {o});
      Bytes idBytes = idType == DType::I64 ? toBytes(idv)
                                           : toBytes(std::vector<int32_t>(idv.begin(), idv.end()));
      RunResult res = runProgram(b.p, {asBytes(dt, r), idBytes});
      ASSERT_TRUE(res.ok) << res.err;
      Vec got = outVec(res, 0, dt);
      expectGradient(std::string("embedding_grad dtable ids ") + dtypeName(idType), dt, got, fd);
      for (int64_t i = 5 * D; i < V * D; ++i)
        EXPECT_EQ(got[i], 0.0) << "unpicked row, element " << i;
    }
}

TEST(TrainingKernels, EmbeddingGradRejectsOutOfRangeId) {
  ProgramBuilder b;
  uint32_t dy = b.input(DType::F32, {3, 2}), x = b.input(DType::I64, {3});
  uint32_t o = b.output(DType::F32, {4, 2});
  b.instr(OpCode::EmbeddingGrad, {dy, x}, {o});
  RunResult r = runProgram(
      b.p, {toBytes(std::vector<float>(6, 1.0f)), toBytes(std::vector<int64_t>{0, 4, 1})});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.err, "instr 0 (embedding_grad): id 4 at position 1 out of range [0, 4)");
}

TEST(TrainingKernels, EmbeddingGradAddendIsTheAddAfter) {
  Rng rng;
  for (DType dt : {DType::F32, DType::F64})
    for (bool bf16Addend : {false, true}) {
      if (bf16Addend && dt == DType::F64) continue;
      SCOPED_TRACE(std::string(dtypeName(dt)) + (bf16Addend ? ", bf16 addend" : ""));
      int64_t V = 11, D = 24, N = 30;
      std::vector<Bytes> inputs = embeddingGradAddendInputs(rng, V, D, N, dt, bf16Addend);
      Program fused = embeddingGradAddendProgram(V, D, N, dt, true, bf16Addend);
      Program apart = embeddingGradAddendProgram(V, D, N, dt, false, bf16Addend);
      ASSERT_EQ(fused.validate(), "");
      ASSERT_EQ(apart.validate(), "");
      RunResult f = runProgram(fused, inputs), a = runProgram(apart, inputs);
      ASSERT_TRUE(f.ok && a.ok) << f.err << a.err;
      EXPECT_EQ(f.outputs, a.outputs);
    }
}

TEST(TrainingKernels, EmbeddingGradAddendValidation) {
  auto verdict = [](DType addend, const Shape &shape) {
    ProgramBuilder b;
    uint32_t dy = b.input(DType::F32, {6, 4}), ids = b.input(DType::I64, {6}),
             a = b.input(addend, shape);
    b.instr(OpCode::EmbeddingGrad, {dy, ids, a}, {b.output(DType::F32, {5, 4})});
    return b.p.validate();
  };
  EXPECT_EQ(verdict(DType::F32, {5, 4}), "");
  EXPECT_EQ(verdict(DType::BF16, {5, 4}), ""); // bf16 storage of the f32 addend
  EXPECT_NE(verdict(DType::F32, {4, 4}).find("addend"), std::string::npos);
  EXPECT_NE(verdict(DType::F64, {5, 4}), "");
}

//===--- RmsNormGrad, LayerNormGrad ---------------------------------------===//

TEST(TrainingKernels, RmsNormGradMatchesFiniteDifferences) {
  Rng rng;
  double eps = 1e-5;
  for (Shape s : {Shape{3, 4, 7}, Shape{5, 16}, Shape{2, 3}}) {
    SCOPED_TRACE(shapeName(s));
    int64_t D = s.back();
    auto xv = rng.uniform(numel(s), -2, 2), wv = rng.uniform(D, 0.5, 1.5);
    auto r = rng.uniform(numel(s));
    Vec xd = toDouble(xv), wd = toDouble(wv), rd = toDouble(r);
    Vec fdx = numericGrad([&](const Vec &t) { return rmsNormRef(t, wd, D, eps); }, xd, rd);
    Vec fdw = numericGrad([&](const Vec &t) { return rmsNormRef(xd, t, D, eps); }, wd, rd);
    for (DType dt : kFloatTypes) {
      ProgramBuilder b;
      uint32_t x = b.input(dt, s), w = b.input(dt, {D}), dy = b.input(dt, s);
      uint32_t dx = b.output(dt, s), dw = b.output(dt, {D});
      b.instr(OpCode::RmsNormGrad, {x, w, dy}, {dx, dw}, {}, {eps});
      RunResult res = runProgram(b.p, {asBytes(dt, xv), asBytes(dt, wv), asBytes(dt, r)});
      ASSERT_TRUE(res.ok) << res.err;
      expectGradient("rms_norm_grad dx " + shapeName(s), dt, outVec(res, 0, dt), fdx);
      expectGradient("rms_norm_grad dw " + shapeName(s), dt, outVec(res, 1, dt), fdw);
    }
  }
}

TEST(TrainingKernels, LayerNormGradMatchesFiniteDifferences) {
  Rng rng;
  double eps = 1e-5;
  for (Shape s : {Shape{2, 3, 9}, Shape{4, 16}}) {
    SCOPED_TRACE(shapeName(s));
    int64_t D = s.back();
    auto xv = rng.uniform(numel(s), -2, 2), wv = rng.uniform(D, 0.5, 1.5), bv = rng.uniform(D);
    auto r = rng.uniform(numel(s));
    Vec xd = toDouble(xv), wd = toDouble(wv), bd = toDouble(bv), rd = toDouble(r);
    Vec fdx = numericGrad([&](const Vec &t) { return layerNormRef(t, wd, bd, D, eps); }, xd, rd);
    Vec fdw = numericGrad([&](const Vec &t) { return layerNormRef(xd, t, bd, D, eps); }, wd, rd);
    Vec fdb = numericGrad([&](const Vec &t) { return layerNormRef(xd, wd, t, D, eps); }, bd, rd);
    for (DType dt : kFloatTypes) {
      ProgramBuilder b;
      uint32_t x = b.input(dt, s), w = b.input(dt, {D}), dy = b.input(dt, s);
      uint32_t dx = b.output(dt, s), dw = b.output(dt, {D}), db = b.output(dt, {D});
      b.instr(OpCode::LayerNormGrad, {x, w, dy}, {dx, dw, db}, {}, {eps});
      RunResult res = runProgram(b.p, {asBytes(dt, xv), asBytes(dt, wv), asBytes(dt, r)});
      ASSERT_TRUE(res.ok) << res.err;
      expectGradient("layer_norm_grad dx " + shapeName(s), dt, outVec(res, 0, dt), fdx);
      expectGradient("layer_norm_grad dw " + shapeName(s), dt, outVec(res, 1, dt), fdw);
      expectGradient("layer_norm_grad db " + shapeName(s), dt, outVec(res, 2, dt), fdb);
    }
  }
}

//===--- AttentionGrad ----------------------------------------------------===//

void checkAttentionGrad(const AttnCase &c, Rng &rng) {
  SCOPED_TRACE(c.name());
  Shape qs = {c.B, c.Hq, c.T, c.D}, ks = {c.B, c.Hkv, c.S, c.D}, vs = {c.B, c.Hkv, c.S, c.Dv};
  Shape os = {c.B, c.Hq, c.T, c.Dv};
  double scale = 1 / std::sqrt(double(c.D));
  // Scores of a few units: the softmax is far from uniform.
  auto qv = rng.uniform(numel(qs), -2, 2), kv = rng.uniform(numel(ks), -2, 2);
  auto vv = rng.uniform(numel(vs)), r = rng.uniform(numel(os));
  Vec qd = toDouble(qv), kd = toDouble(kv), vd = toDouble(vv), rd = toDouble(r);
  Vec fdq = numericGrad([&](const Vec &t) { return attentionRef(c, t, kd, vd, scale); }, qd, rd);
  Vec fdk = numericGrad([&](const Vec &t) { return attentionRef(c, qd, t, vd, scale); }, kd, rd);
  Vec fdv = numericGrad([&](const Vec &t) { return attentionRef(c, qd, kd, t, scale); }, vd, rd);
  for (DType dt : kFloatTypes) {
    // The backward reads the forward's o and lse (f64 ones in f64: the
    // statistics have the computation's dtype).
    ProgramBuilder pb;
    uint32_t q = pb.input(dt, qs), k = pb.input(dt, ks), v = pb.input(dt, vs);
    uint32_t dy = pb.input(dt, os);
    uint32_t o = pb.temp(dt, os), lse = pb.temp(dt, {c.B, c.Hq, c.T});
    pb.instr(OpCode::Attention, {q, k, v}, {o, lse}, {c.causal}, {scale});
    uint32_t dq = pb.output(dt, qs), dk = pb.output(dt, ks), dv = pb.output(dt, vs);
    pb.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dy}, {dq, dk, dv}, {c.causal}, {scale});
    RunResult res =
        runProgram(pb.p, {asBytes(dt, qv), asBytes(dt, kv), asBytes(dt, vv), asBytes(dt, r)});
    ASSERT_TRUE(res.ok) << res.err;
    expectGradient("attention_grad dq " + c.name(), dt, outVec(res, 0, dt), fdq);
    expectGradient("attention_grad dk " + c.name(), dt, outVec(res, 1, dt), fdk);
    expectGradient("attention_grad dv " + c.name(), dt, outVec(res, 2, dt), fdv);
  }
}

TEST(TrainingKernels, AttentionGradGroupedQueryCausal) {
  Rng rng;
  checkAttentionGrad({2, 4, 2, 5, 5, 3, 3, true}, rng); // GQA, S == T, odd D
}

TEST(TrainingKernels, AttentionGradNotCausalAndMoreKeys) {
  Rng rng;
  checkAttentionGrad({1, 4, 2, 4, 6, 4, 4, false}, rng);
}

TEST(TrainingKernels, AttentionGradCausalOffsetsAndValueWidth) {
  Rng rng;
  checkAttentionGrad({1, 2, 1, 3, 6, 4, 5, true}, rng); // S > T: queries are the last T
  checkAttentionGrad({1, 2, 2, 5, 3, 4, 4, true}, rng); // S < T
  checkAttentionGrad({1, 3, 3, 4, 4, 5, 5, true}, rng); // multi-head, Hkv == Hq
}

//===--- RotaryGrad -------------------------------------------------------===//

TEST(TrainingKernels, RotaryGradWithBroadcastTables) {
  Rng rng;
  Shape xs = {2, 3, 5, 8};
  for (Shape ts : {Shape{5, 8}, Shape{1, 1, 5, 8}, Shape{1, 3, 5, 8}}) {
    SCOPED_TRACE(shapeName(ts));
    auto cv = rng.uniform(numel(ts)), sv = rng.uniform(numel(ts)), r = rng.uniform(numel(xs));
    auto xv = rng.uniform(numel(xs));
    Vec cd = toDouble(cv), sd = toDouble(sv);
    Vec fd = numericGrad([&](const Vec &t) { return rotaryRef(t, xs, cd, sd, ts); }, toDouble(xv),
                         toDouble(r));
    for (DType dt : kFloatTypes) {
      ProgramBuilder b;
      uint32_t dy = b.input(dt, xs), c = b.input(dt, ts), s = b.input(dt, ts);
      uint32_t dx = b.output(dt, xs);
      b.instr(OpCode::RotaryGrad, {dy, c, s}, {dx});
      RunResult res = runProgram(b.p, {asBytes(dt, r), asBytes(dt, cv), asBytes(dt, sv)});
      ASSERT_TRUE(res.ok) << res.err;
      expectGradient("rotary_grad dx tables " + shapeName(ts), dt, outVec(res, 0, dt), fd);
    }
  }
}

//===--- ActivationGrad, SoftmaxGrad --------------------------------------===//

TEST(TrainingKernels, ActivationGradForEveryKind) {
  Rng rng;
  Shape s = {4, 33};
  const char *names[] = {"silu", "gelu erf", "gelu tanh", "relu"};
  for (int kind = 0; kind < 4; ++kind) {
    SCOPED_TRACE(names[kind]);
    auto xv = rng.uniform(numel(s), -4, 4), r = rng.uniform(numel(s));
    if (kind == 3) // relu's kink: keep finite differences off x = 0
      for (float &v : xv) v = v < 0 ? std::min(v, -0.01f) : std::max(v, 0.01f);
    Vec fd = numericGrad(
        [&](const Vec &t) {
          Vec y;
          for (double v : t) y.push_back(activationRef(kind, v));
          return y;
        },
        toDouble(xv), toDouble(r));
    for (DType dt : kFloatTypes) {
      ProgramBuilder b;
      uint32_t x = b.input(dt, s), dy = b.input(dt, s), dx = b.output(dt, s);
      b.instr(OpCode::ActivationGrad, {x, dy}, {dx}, {kind});
      RunResult res = runProgram(b.p, {asBytes(dt, xv), asBytes(dt, r)});
      ASSERT_TRUE(res.ok) << res.err;
      expectGradient(std::string("activation_grad ") + names[kind], dt, outVec(res, 0, dt), fd);
    }
  }
}

TEST(TrainingKernels, SwiGluAndItsGradient) {
  Rng rng;
  Shape s = {3, 40};
  auto gv = rng.uniform(numel(s), -4, 4), uv = rng.uniform(numel(s), -2, 2),
       r = rng.uniform(numel(s));
  Vec g = toDouble(gv), u = toDouble(uv);
  auto silu = [](double x) { return x / (1.0 + std::exp(-x)); };
  auto swiglu = [&](const Vec &gate, const Vec &up) {
    Vec y;
    for (size_t i = 0; i < gate.size(); ++i) y.push_back(silu(gate[i]) * up[i]);
    return y;
  };
  Vec fdGate = numericGrad([&](const Vec &t) { return swiglu(t, u); }, g, toDouble(r));
  Vec fdUp = numericGrad([&](const Vec &t) { return swiglu(g, t); }, u, toDouble(r));
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    ProgramBuilder b;
    uint32_t gate = b.input(dt, s), up = b.input(dt, s), dy = b.input(dt, s);
    b.instr(OpCode::SwiGlu, {gate, up}, {b.output(dt, s)});
    b.instr(OpCode::SwiGluGrad, {gate, up, dy}, {b.output(dt, s), b.output(dt, s)});
    ASSERT_EQ(b.p.validate(), "");
    RunResult res = runProgram(b.p, {asBytes(dt, gv), asBytes(dt, uv), asBytes(dt, r)});
    ASSERT_TRUE(res.ok) << res.err;
    Vec y = outVec(res, 0, dt), want = swiglu(g, u);
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y[i], want[i], (dt == DType::F64 ? 1e-14 : 1e-6) * (1 + std::abs(want[i])));
    expectGradient("swiglu_grad dgate", dt, outVec(res, 1, dt), fdGate);
    expectGradient("swiglu_grad dup", dt, outVec(res, 2, dt), fdUp);
  }
  // Operands of different shapes are refused by name.
  ProgramBuilder bad;
  bad.instr(OpCode::SwiGlu, {bad.input(DType::F32, {3, 4}), bad.input(DType::F32, {3, 5})},
            {bad.output(DType::F32, {3, 4})});
  EXPECT_NE(bad.p.validate().find("up"), std::string::npos) << bad.p.validate();
}

TEST(TrainingKernels, SoftmaxGradAlongEveryAxis) {
  Rng rng;
  Shape s = {3, 5, 7};
  for (int64_t axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    auto xv = rng.uniform(numel(s), -3, 3), r = rng.uniform(numel(s));
    Vec xd = toDouble(xv), yd = softmaxRef(xd, s, size_t(axis));
    Vec fd =
        numericGrad([&](const Vec &t) { return softmaxRef(t, s, size_t(axis)); }, xd, toDouble(r));
    for (DType dt : kFloatTypes) {
      ProgramBuilder b;
      uint32_t y = b.input(dt, s), dy = b.input(dt, s), dx = b.output(dt, s);
      b.instr(OpCode::SoftmaxGrad, {y, dy}, {dx}, {axis});
      // The kernel gets the forward output y, rounded to its dtype.
      Bytes yBytes =
          dt == DType::F64 ? toBytes(yd) : toBytes(std::vector<float>(yd.begin(), yd.end()));
      RunResult res = runProgram(b.p, {yBytes, asBytes(dt, r)});
      ASSERT_TRUE(res.ok) << res.err;
      expectGradient("softmax_grad axis " + std::to_string(axis), dt, outVec(res, 0, dt), fd);
    }
  }
}

//===--- CrossEntropyGrad -------------------------------------------------===//

TEST(TrainingKernels, CrossEntropyGradMatchesFiniteDifferences) {
  Rng rng;
  int64_t N = 6, V = 9;
  auto lv = rng.uniform(N * V, -3, 3), dloss = rng.uniform(1, 0.5, 2);
  auto tv = rng.ints(N, 0, V - 1);
  Vec fd = numericGrad([&](const Vec &x) { return Vec{crossEntropyRef(x, tv, V)}; }, toDouble(lv),
                       Vec{double(dloss[0])});
  for (DType dt : kFloatTypes)
    for (DType tType : {DType::I64, DType::I32}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " targets " + dtypeName(tType));
      ProgramBuilder b;
      uint32_t l = b.input(dt, {N, V}), t = b.input(tType, {N}), g = b.input(dt, {});
      uint32_t o = b.output(dt, {N, V});
      b.instr(OpCode::CrossEntropyGrad, {l, t, g}, {o});
      Bytes tBytes =
          tType == DType::I64 ? toBytes(tv) : toBytes(std::vector<int32_t>(tv.begin(), tv.end()));
      RunResult res = runProgram(b.p, {asBytes(dt, lv), tBytes, asBytes(dt, dloss)});
      ASSERT_TRUE(res.ok) << res.err;
      expectGradient(std::string("cross_entropy_grad targets ") + dtypeName(tType), dt,
                     outVec(res, 0, dt), fd);
    }
}

TEST(TrainingKernels, CrossEntropyGradRejectsOutOfRangeTarget) {
  ProgramBuilder b;
  uint32_t l = b.input(DType::F32, {2, 3}), t = b.input(DType::I64, {2}),
           g = b.input(DType::F32, {});
  uint32_t o = b.output(DType::F32, {2, 3});
  b.instr(OpCode::CrossEntropyGrad, {l, t, g}, {o});
  RunResult r =
      runProgram(b.p, {toBytes(std::vector<float>(6, 0.0f)), toBytes(std::vector<int64_t>{0, -1}),
                       toBytes(std::vector<float>{1})});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.err, "instr 0 (cross_entropy_grad): target -1 at row 1 out of range [0, 3)");
}

TEST(TrainingKernels, CrossEntropyGradWithLossIsThePair) {
  // The fused loss (a second output, loom.cross_entropy_with_grad) is
  // CrossEntropy's bits and the gradient CrossEntropyGrad's, in f32 and f64.
  Rng rng;
  int64_t N = 5, V = 11;
  auto lv = rng.uniform(N * V, -4, 4), dloss = rng.uniform(1, 0.5, 2);
  auto tv = rng.ints(N, 0, V - 1);
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    auto build = [&](bool fused) {
      ProgramBuilder b;
      uint32_t l = b.input(dt, {N, V}), t = b.input(DType::I64, {N}), g = b.input(dt, {});
      uint32_t dx = b.output(dt, {N, V}, "dx"), loss = b.output(dt, {}, "loss");
      if (fused) {
        b.instr(OpCode::CrossEntropyGrad, {l, t, g}, {dx, loss});
      } else {
        b.instr(OpCode::CrossEntropy, {l, t}, {loss});
        b.instr(OpCode::CrossEntropyGrad, {l, t, g}, {dx});
      }
      return b.p;
    };
    std::vector<Bytes> in = {asBytes(dt, lv), toBytes(tv), asBytes(dt, dloss)};
    RunResult fused = runProgram(build(true), in), apart = runProgram(build(false), in);
    ASSERT_TRUE(fused.ok && apart.ok) << fused.err << apart.err;
    EXPECT_EQ(fused.outputs, apart.outputs);
  }
  // A bad target fails the fused instruction as it fails the gradient's.
  ProgramBuilder b;
  uint32_t l = b.input(DType::F32, {2, 3}), t = b.input(DType::I64, {2}),
           g = b.input(DType::F32, {});
  b.instr(OpCode::CrossEntropyGrad, {l, t, g},
          {b.output(DType::F32, {2, 3}), b.output(DType::F32, {})});
  RunResult r =
      runProgram(b.p, {toBytes(std::vector<float>(6, 0.0f)), toBytes(std::vector<int64_t>{3, 0}),
                       toBytes(std::vector<float>{1})});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.err, "instr 0 (cross_entropy_grad): target 3 at row 0 out of range [0, 3)");
}

TEST(TrainingKernels, CrossEntropyGradLossOutputValidation) {
  // The fused loss is a scalar of the loss's dtype; a third output is refused.
  auto verdictFor = [](DType lossType, const Shape &lossShape, bool third) {
    ProgramBuilder b;
    uint32_t l = b.input(DType::F32, {2, 3}), t = b.input(DType::I64, {2}),
             g = b.input(DType::F32, {});
    std::vector<uint32_t> outs = {b.output(DType::F32, {2, 3}), b.output(lossType, lossShape)};
    if (third) outs.push_back(b.output(DType::F32, {}));
    b.instr(OpCode::CrossEntropyGrad, {l, t, g}, outs);
    return b.p.validate();
  };
  EXPECT_EQ(verdictFor(DType::F32, {}, false), "");
  EXPECT_NE(verdictFor(DType::F32, {1}, false).find("loss output has shape [1], expected []"),
            std::string::npos);
  EXPECT_NE(verdictFor(DType::F64, {}, false).find("loss output must be f32"), std::string::npos);
  EXPECT_NE(verdictFor(DType::F32, {}, true).find("takes 1 to 2 outputs, got 3"),
            std::string::npos);
}

//===--- SliceGrad --------------------------------------------------------===//

struct SliceCase {
  Shape x, y;
  std::vector<int64_t> ints; // start, step per dim
};

TEST(TrainingKernels, SliceGradWithNegativeSteps) {
  Rng rng;
  std::vector<SliceCase> cases = {
      {{5, 6, 7}, {3, 3, 7}, {4, -2, 1, 2, 6, -1}}, // reversed last dim, strided others
      {{5, 6, 7}, {5, 2, 3}, {0, 1, 5, -3, 2, 2}},
      {{4, 9}, {4, 4}, {3, -1, 8, -2}},
      {{8}, {0}, {0, 1}}, // an empty window: all zeros
  };
  for (const SliceCase &c : cases) {
    SCOPED_TRACE(shapeName(c.x) + " -> " + shapeName(c.y));
    auto xv = rng.uniform(numel(c.x)), r = rng.uniform(numel(c.y));
    Vec fd = numericGrad([&](const Vec &t) { return sliceRef(t, c.x, c.y, c.ints); }, toDouble(xv),
                         toDouble(r));
    for (DType dt : kFloatTypes) {
      ProgramBuilder b;
      uint32_t dy = b.input(dt, c.y), dx = b.output(dt, c.x);
      b.instr(OpCode::SliceGrad, {dy}, {dx}, c.ints);
      ASSERT_EQ(b.p.validate(), "");
      RunResult res = runProgram(b.p, {asBytes(dt, r)});
      ASSERT_TRUE(res.ok) << res.err;
      if (numel(c.y) == 0) {
        EXPECT_EQ(outVec(res, 0, dt), Vec(size_t(numel(c.x)), 0.0));
        continue;
      }
      expectGradient("slice_grad " + shapeName(c.x) + " <- " + shapeName(c.y), dt,
                     outVec(res, 0, dt), fd);
    }
  }
}

TEST(TrainingKernels, SliceGradMovesAnyDType) {
  // Integers make the check exact: every window element lands in place and
  // everything else is zero.
  Shape xs = {4, 5}, ys = {2, 3};
  std::vector<int64_t> ints = {3, -2, 4, -2}, dy = {1, 2, 3, 4, 5, 6};
  ProgramBuilder b;
  uint32_t in = b.input(DType::I64, ys), o = b.output(DType::I64, xs);
  b.instr(OpCode::SliceGrad, {in}, {o}, ints);
  RunResult r = runProgram(b.p, {toBytes(dy)});
  ASSERT_TRUE(r.ok) << r.err;
  std::vector<int64_t> want(20, 0);
  // Row 3 cols 4, 2, 0, then row 1 cols 4, 2, 0.
  want[3 * 5 + 4] = 1, want[3 * 5 + 2] = 2, want[3 * 5 + 0] = 3;
  want[1 * 5 + 4] = 4, want[1 * 5 + 2] = 5, want[1 * 5 + 0] = 6;
  EXPECT_EQ(r.out<int64_t>(), want);
}

//===--- AdamW ------------------------------------------------------------===//

struct AdamWState {
  Vec p, m, v;
};

/// torch.optim.AdamW (amsgrad off) for one step, in double, element by
/// element: the reference the kernel is held to. `scale` collects, per
/// element, the magnitudes the kernel's f32 roundings are relative to (the
/// terms of each sum), for adamwWithinRounding.
struct AdamWScale {
  Vec p, m, v;
};

AdamWScale adamwRef(AdamWState &s, const Vec &g, double lr, double step, double b1, double b2,
                    double eps, double wd) {
  double t = step + 1;
  double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  AdamWScale sc;
  for (size_t i = 0; i < g.size(); ++i) {
    s.p[i] *= 1 - lr * wd;
    sc.m.push_back(std::fabs(b1 * s.m[i]) + std::fabs((1 - b1) * g[i]));
    s.m[i] = b1 * s.m[i] + (1 - b1) * g[i];
    s.v[i] = b2 * s.v[i] + (1 - b2) * g[i] * g[i];
    sc.v.push_back(s.v[i]);
    double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + eps;
    // The update's error is relative to itself plus what m's cancelling
    // sum carries in (its scale over the denominator).
    double update = lr / bc1 * s.m[i] / denom;
    sc.p.push_back(std::fabs(s.p[i]) + 4 * std::fabs(update) + 2 * lr / bc1 * sc.m[i] / denom);
    s.p[i] -= update;
  }
  return sc;
}

/// The kernel computes in f32 (cpu/AdamWMath.h, as PyTorch's fused AdamW):
/// each output within a few f32 roundings (2^-24 each) of the double
/// reference, counted against the magnitudes the roundings act on, since
/// m's sum (and so the update) cancels.
::testing::AssertionResult adamwWithinRounding(const std::vector<float> &got, const Vec &want,
                                               const Vec &scale) {
  const double u = std::ldexp(1.0, -24);
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= 4 * u * scale[i] + 1e-38))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i] << " (error " << err
             << ", allowed " << 4 * u * scale[i] << ")";
  }
  return ::testing::AssertionSuccess();
}

void checkAdamW(Rng &rng, double gradScale, double eps, double wd) {
  SCOPED_TRACE("grad scale " + std::to_string(gradScale) + " eps " + std::to_string(eps));
  Shape s = {3, 37};
  double b1 = 0.9, b2 = 0.95;
  ProgramBuilder b;
  uint32_t p = b.input(DType::F32, s), g = b.input(DType::F32, s), m = b.input(DType::F32, s);
  uint32_t v = b.input(DType::F32, s), lr = b.input(DType::F32, {}), step = b.input(DType::F32, {});
  uint32_t po = b.output(DType::F32, s), mo = b.output(DType::F32, s), vo = b.output(DType::F32, s);
  b.instr(OpCode::AdamW, {p, g, m, v, lr, step}, {po, mo, vo}, {}, {b1, b2, eps, wd});

  std::vector<float> pv = rng.uniform(numel(s)), mv(size_t(numel(s)), 0.0f), vv = mv;
  const float lrs[] = {1e-2f, 3e-2f, 5e-3f}; // a schedule: lr changes per step
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    auto gv = rng.uniform(numel(s), -gradScale, gradScale);
    RunResult r = runProgram(b.p, {toBytes(pv), toBytes(gv), toBytes(mv), toBytes(vv),
                                   toBytes(std::vector<float>{lrs[k]}),
                                   toBytes(std::vector<float>{float(k)})});
    ASSERT_TRUE(r.ok) << r.err;
    // The reference takes the step from the kernel's own f32 state, so the
    // comparison sees one step's rounding, not the drift of f32 vs double
    // state (m, a sum of cancelling terms, has little relative precision).
    AdamWState ref{toDouble(pv), toDouble(mv), toDouble(vv)};
    AdamWScale sc = adamwRef(ref, toDouble(gv), lrs[k], k, b1, b2, eps, wd);
    pv = r.out<float>(0), mv = r.out<float>(1), vv = r.out<float>(2);
    EXPECT_TRUE(adamwWithinRounding(pv, ref.p, sc.p)) << "param";
    EXPECT_TRUE(adamwWithinRounding(mv, ref.m, sc.m)) << "exp_avg";
    EXPECT_TRUE(adamwWithinRounding(vv, ref.v, sc.v)) << "exp_avg_sq";
  }
}

TEST(TrainingKernels, AdamWMatchesTorchOverThreeSteps) {
  Rng rng;
  checkAdamW(rng, 1.0, 1e-8, 0.1);
  // Gradients at the scale of eps: eps must sit outside the square root
  // (sqrt(v)/sqrt(bc2) + eps), which matters only here.
  checkAdamW(rng, 1e-3, 1e-3, 0.0);
}

// The clip coefficient as AdamW's seventh input: the update must be the
// one AdamW makes from the f32 gradient g * scale (reference: the double
// AdamW above on those rounded products), and bit-for-bit what the
// unfused program (Mul writing the clipped gradient, then AdamW) computes.
TEST(TrainingKernels, AdamWGradScaleIsTheClippedGradient) {
  Rng rng;
  Shape s = {5, 41};
  double b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  ProgramBuilder f, u;
  auto io = [&](ProgramBuilder &b, bool fused) {
    uint32_t p = b.input(DType::F32, s), g = b.input(DType::F32, s), m = b.input(DType::F32, s);
    uint32_t v = b.input(DType::F32, s), lr = b.input(DType::F32, {});
    uint32_t step = b.input(DType::F32, {}), scale = b.input(DType::F32, {});
    std::vector<uint32_t> out = {b.output(DType::F32, s), b.output(DType::F32, s),
                                 b.output(DType::F32, s)};
    if (fused) {
      b.instr(OpCode::AdamW, {p, g, m, v, lr, step, scale}, out, {}, {b1, b2, eps, wd});
    } else {
      uint32_t clipped = b.temp(DType::F32, s);
      b.instr(OpCode::Mul, {g, scale}, {clipped});
      b.instr(OpCode::AdamW, {p, clipped, m, v, lr, step}, out, {}, {b1, b2, eps, wd});
    }
  };
  io(f, true);
  io(u, false);
  ASSERT_EQ(f.p.validate(), "");
  ASSERT_EQ(u.p.validate(), "");

  std::vector<float> pv = rng.uniform(numel(s)), mv = rng.uniform(numel(s), -1e-2, 1e-2);
  std::vector<float> vv = rng.uniform(numel(s), 0, 1e-3);
  // A coefficient that rounds (not a power of two), and 1 (no clipping).
  for (float scale : {0.3712f, 1.0f}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    auto gv = rng.uniform(numel(s), -5, 5);
    std::vector<Bytes> inputs = {toBytes(pv), toBytes(gv), toBytes(mv), toBytes(vv),
                                 toBytes(std::vector<float>{2e-3f}),
                                 toBytes(std::vector<float>{3.0f}),
                                 toBytes(std::vector<float>{scale})};
    RunResult r = runProgram(f.p, inputs), ur = runProgram(u.p, inputs);
    ASSERT_TRUE(r.ok) << r.err;
    ASSERT_TRUE(ur.ok) << ur.err;
    EXPECT_EQ(r.outputs, ur.outputs);

    Vec clipped;
    for (float g : gv) clipped.push_back(double(g * scale)); // the f32 product
    AdamWState ref{toDouble(pv), toDouble(mv), toDouble(vv)};
    AdamWScale sc = adamwRef(ref, clipped, 2e-3f, 3.0, b1, b2, eps, wd);
    EXPECT_TRUE(adamwWithinRounding(r.out<float>(0), ref.p, sc.p)) << "param";
    EXPECT_TRUE(adamwWithinRounding(r.out<float>(1), ref.m, sc.m)) << "exp_avg";
    EXPECT_TRUE(adamwWithinRounding(r.out<float>(2), ref.v, sc.v)) << "exp_avg_sq";
  }
}

//===--- Forward kernels in f64 -------------------------------------------===//

/// Largest |got - want|, NaN if any got is NaN.
double maxAbsDiff(const Vec &got, const Vec &want) {
  if (got.size() != want.size())
    return NAN;
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = std::fabs(got[i] - want[i]);
    if (!(d <= m))
      m = d; // NaN sticks
  }
  return m;
}

/// Runs a one-instruction f64 program on `inputs` and returns output k.
Vec runF64(ProgramBuilder &b, const std::vector<Vec> &inputs, size_t k = 0) {
  std::vector<Bytes> bytes;
  for (const Vec &v : inputs) bytes.push_back(toBytes(v));
  RunResult r = runProgram(b.p, bytes);
  EXPECT_TRUE(r.ok) << r.err;
  return r.ok ? r.out<double>(k) : Vec();
}

TEST(TrainingKernels, ForwardKernelsRunInF64) {
  // The compiler's gradient checks run whole forward-and-backward graphs in
  // f64; the forward kernels must match an fp64 reference to double rounding.
  Rng rng;
  const DType F64 = DType::F64;
  constexpr double kTol = 1e-13;
  auto uni = [&](int64_t n, double lo = -1, double hi = 1) {
    return toDouble(rng.uniform(n, lo, hi));
  };
  {
    Shape s = {3, 7};
    Vec x = uni(21, -2, 2), w = uni(7), bias = uni(7);
    ProgramBuilder rb;
    rb.instr(OpCode::RmsNorm, {rb.input(F64, s), rb.input(F64, {7})}, {rb.output(F64, s)}, {},
             {1e-6});
    EXPECT_LT(maxAbsDiff(runF64(rb, {x, w}), rmsNormRef(x, w, 7, 1e-6)), kTol) << "rms_norm";
    ProgramBuilder lb;
    lb.instr(OpCode::LayerNorm, {lb.input(F64, s), lb.input(F64, {7}), lb.input(F64, {7})},
             {lb.output(F64, s)}, {}, {1e-5});
    EXPECT_LT(maxAbsDiff(runF64(lb, {x, w, bias}), layerNormRef(x, w, bias, 7, 1e-5)), kTol)
        << "layer_norm";
    ProgramBuilder sb;
    sb.instr(OpCode::Softmax, {sb.input(F64, s)}, {sb.output(F64, s)}, {0});
    EXPECT_LT(maxAbsDiff(runF64(sb, {x}), softmaxRef(x, s, 0)), kTol) << "softmax";
    ProgramBuilder db;
    db.instr(OpCode::Reduce, {db.input(F64, s)}, {db.output(F64, {})}, {0, 0, 1});
    double sum = 0;
    for (double v : x) sum += v;
    EXPECT_LT(maxAbsDiff(runF64(db, {x}), {sum}), kTol) << "reduce";
  }
  {
    AttnCase c = {1, 4, 2, 3, 3, 2, 2, true};
    Shape qs = {1, 4, 3, 2}, ks = {1, 2, 3, 2};
    Vec q = uni(24, -1.5, 1.5), k = uni(12, -1.5, 1.5), v = uni(12);
    ProgramBuilder b;
    b.instr(OpCode::Attention, {b.input(F64, qs), b.input(F64, ks), b.input(F64, ks)},
            {b.output(F64, qs), b.output(F64, {1, 4, 3})}, {1}, {0.7});
    EXPECT_LT(maxAbsDiff(runF64(b, {q, k, v}), attentionRef(c, q, k, v, 0.7)), kTol) << "attention";
  }
  {
    Shape xs = {1, 2, 3, 4}, ts = {3, 4};
    Vec x = uni(24), cs = uni(12), sn = uni(12);
    ProgramBuilder b;
    b.instr(OpCode::Rotary, {b.input(F64, xs), b.input(F64, ts), b.input(F64, ts)},
            {b.output(F64, xs)});
    EXPECT_LT(maxAbsDiff(runF64(b, {x, cs, sn}), rotaryRef(x, xs, cs, sn, ts)), kTol) << "rotary";
  }
  {
    Vec logits = uni(24, -2, 2);
    std::vector<int64_t> t = {0, 5, 2, 2};
    ProgramBuilder b;
    uint32_t l = b.input(F64, {4, 6}), tt = b.input(DType::I64, {4}), o = b.output(F64, {});
    b.instr(OpCode::CrossEntropy, {l, tt}, {o});
    RunResult r = runProgram(b.p, {toBytes(logits), toBytes(t)});
    ASSERT_TRUE(r.ok) << r.err;
    EXPECT_LT(std::fabs(r.out<double>()[0] - crossEntropyRef(logits, t, 6)), kTol)
        << "cross_entropy";
  }
  // MatMul: transposes and batch broadcasts, against a triple loop.
  struct MM {
    Shape a, b, out;
    bool ta, tb;
  };
  for (const MM &c :
       {MM{{2, 3, 4}, {4, 5}, {2, 3, 5}, false, false},
        MM{{2, 4, 3}, {2, 5, 4}, {2, 3, 5}, true, true},
        MM{{4, 3}, {2, 4, 5}, {2, 3, 5}, true, false}, MM{{6, 3}, {6, 5}, {3, 5}, true, false}}) {
    SCOPED_TRACE("matmul " + shapeName(c.a) + " x " + shapeName(c.b));
    Vec a = uni(numel(c.a)), bv = uni(numel(c.b));
    ProgramBuilder b;
    b.instr(OpCode::MatMul, {b.input(F64, c.a), b.input(F64, c.b)}, {b.output(F64, c.out)},
            {c.ta, c.tb});
    Vec got = runF64(b, {a, bv});
    size_t ra = c.a.size(), ro = c.out.size();
    int64_t M = c.out[ro - 2], N = c.out[ro - 1], K = c.ta ? c.a[ra - 2] : c.a[ra - 1];
    Shape batch(c.out.begin(), c.out.end() - 2);
    Vec want;
    for (int64_t bi = 0; bi < numel(batch); ++bi) {
      const double *A =
          a.data() + broadcastIndex(bi, batch, Shape(c.a.begin(), c.a.end() - 2)) * M * K;
      const double *B =
          bv.data() + broadcastIndex(bi, batch, Shape(c.b.begin(), c.b.end() - 2)) * K * N;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < K; ++p)
            sum += (c.ta ? A[p * M + i] : A[i * K + p]) * (c.tb ? B[j * K + p] : B[p * N + j]);
          want.push_back(sum);
        }
    }
    EXPECT_LT(maxAbsDiff(got, want), kTol);
  }
}

//===--- Determinism ------------------------------------------------------===//

/// Runs `p` with several thread counts; the outputs must be bitwise equal.
void expectSameForAnyThreadCount(const Program &p, const std::vector<Bytes> &in) {
  RunResult one = runProgram(p, in, 1);
  ASSERT_TRUE(one.ok) << one.err;
  for (int threads : {2, 5, 8}) {
    RunResult many = runProgram(p, in, threads);
    ASSERT_TRUE(many.ok) << many.err;
    for (size_t k = 0; k < one.outputs.size(); ++k)
      EXPECT_EQ(one.outputs[k], many.outputs[k]) << "output " << k << ", " << threads << " threads";
  }
}

TEST(TrainingKernels, ReductionsDoNotDependOnThreadCount) {
  Rng rng;
  {
    SCOPED_TRACE("embedding_grad");
    int64_t N = 600, V = 20, D = 70;
    ProgramBuilder b;
    uint32_t dy = b.input(DType::F32, {N, D}), ids = b.input(DType::I64, {N});
    b.instr(OpCode::EmbeddingGrad, {dy, ids}, {b.output(DType::F32, {V, D})});
    expectSameForAnyThreadCount(b.p, {toBytes(rng.uniform(N * D)), toBytes(rng.ints(N, 0, V - 1))});
  }
  Shape s = {300, 70};
  for (OpCode op : {OpCode::RmsNormGrad, OpCode::LayerNormGrad}) {
    SCOPED_TRACE(opcodeName(op));
    ProgramBuilder b;
    uint32_t x = b.input(DType::F32, s), w = b.input(DType::F32, {70}), dy = b.input(DType::F32, s);
    std::vector<uint32_t> outs = {b.output(DType::F32, s), b.output(DType::F32, {70})};
    if (op == OpCode::LayerNormGrad)
      outs.push_back(b.output(DType::F32, {70}));
    b.instr(op, {x, w, dy}, outs, {}, {1e-5});
    expectSameForAnyThreadCount(b.p, {toBytes(rng.uniform(numel(s))), toBytes(rng.uniform(70)),
                                      toBytes(rng.uniform(numel(s)))});
  }
  {
    SCOPED_TRACE("attention and attention_grad");
    Shape qs = {2, 4, 33, 16}, ks = {2, 2, 33, 16};
    ProgramBuilder b;
    uint32_t q = b.input(DType::F32, qs), k = b.input(DType::F32, ks), v = b.input(DType::F32, ks);
    uint32_t dy = b.input(DType::F32, qs);
    uint32_t o = b.output(DType::F32, qs), lse = b.output(DType::F32, {2, 4, 33});
    b.instr(OpCode::Attention, {q, k, v}, {o, lse}, {1}, {0.25});
    b.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dy},
            {b.output(DType::F32, qs), b.output(DType::F32, ks), b.output(DType::F32, ks)}, {1},
            {0.25});
    expectSameForAnyThreadCount(b.p,
                                {toBytes(rng.uniform(numel(qs))), toBytes(rng.uniform(numel(ks))),
                                 toBytes(rng.uniform(numel(ks))), toBytes(rng.uniform(numel(qs)))});
  }
}

//===--- validate(), the executor and the artifact ------------------------===//

/// One valid instance of every training opcode, in one program.
Program trainingOpsProgram() {
  ProgramBuilder b;
  auto in = [&](Shape s, DType t = DType::F32) { return b.input(t, s); };
  auto out = [&](Shape s, DType t = DType::F32) { return b.output(t, s); };
  uint32_t dy = in({2, 3, 4}), ids = in({2, 3}, DType::I64);
  b.instr(OpCode::EmbeddingGrad, {dy, ids}, {out({10, 4})});
  uint32_t x = in({2, 3, 4}), w = in({4});
  b.instr(OpCode::RmsNormGrad, {x, w, dy}, {out({2, 3, 4}), out({4})}, {}, {1e-6});
  b.instr(OpCode::LayerNormGrad, {x, w, dy}, {out({2, 3, 4}), out({4}), out({4})}, {}, {1e-5});
  uint32_t q = in({1, 4, 3, 4}), k = in({1, 2, 3, 4}), v = in({1, 2, 3, 4}), dyq = in({1, 4, 3, 4});
  uint32_t o = in({1, 4, 3, 4}), lse = in({1, 4, 3});
  b.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dyq},
          {out({1, 4, 3, 4}), out({1, 2, 3, 4}), out({1, 2, 3, 4})}, {1}, {0.5});
  uint32_t cs = in({3, 4}), sn = in({3, 4});
  b.instr(OpCode::RotaryGrad, {dyq, cs, sn}, {out({1, 4, 3, 4})});
  // From here on each instruction has inputs of its own, so that breaking
  // one input's shape breaks only that instruction.
  b.instr(OpCode::ActivationGrad, {in({2, 3, 4}), in({2, 3, 4})}, {out({2, 3, 4})}, {2});
  b.instr(OpCode::SoftmaxGrad, {in({2, 3, 4}), in({2, 3, 4})}, {out({2, 3, 4})}, {2});
  uint32_t logits = in({3, 5}), targets = in({3}, DType::I32), dloss = in({});
  b.instr(OpCode::CrossEntropyGrad, {logits, targets, dloss}, {out({3, 5})});
  b.instr(OpCode::SliceGrad, {in({2, 3, 4})}, {out({4, 3, 9})}, {3, -1, 0, 1, 8, -2});
  uint32_t p = in({6}), g = in({6}), m = in({6}), vv = in({6}), lr = in({}), step = in({});
  b.instr(OpCode::AdamW, {p, g, m, vv, lr, step}, {out({6}), out({6}), out({6})}, {},
          {0.9, 0.95, 1e-8, 0.1});
  // Gradient clipping fused into the step: AdamW with a grad scale, and
  // the norm's sum of squares.
  uint32_t p2 = in({5}), g2 = in({5}), m2 = in({5}), v2 = in({5}), scale = in({});
  b.instr(OpCode::AdamW, {p2, g2, m2, v2, lr, step, scale}, {out({5}), out({5}), out({5})}, {},
          {0.9, 0.95, 1e-8, 0.1});
  b.instr(OpCode::SumSquares, {in({2, 3, 4})}, {out({})});
  return b.p;
}

TEST(TrainingKernels, EveryOpcodeValidatesRunsAndRoundTrips) {
  Program p = trainingOpsProgram();
  ASSERT_EQ(p.validate(), "");
  const char *names[] = {
      "embedding_grad",  "rms_norm_grad", "layer_norm_grad",    "attention_grad", "rotary_grad",
      "activation_grad", "softmax_grad",  "cross_entropy_grad", "slice_grad",     "adamw"};
  for (int op = 80; op <= 89; ++op) EXPECT_STREQ(opcodeName(OpCode(op)), names[op - 80]);
  EXPECT_STREQ(opcodeName(OpCode(56)), "sum_squares");

  // Runs on the CPU backend (ids and targets must be in range).
  std::vector<Bytes> inputs;
  for (uint32_t id : p.inputs) {
    const BufferDesc &d = p.buffers[id];
    if (d.dtype == DType::I64)
      inputs.push_back(toBytes(std::vector<int64_t>(size_t(d.numElements()), 1)));
    else if (d.dtype == DType::I32)
      inputs.push_back(toBytes(std::vector<int32_t>(size_t(d.numElements()), 2)));
    else
      inputs.push_back(toBytes(std::vector<float>(size_t(d.numElements()), 0.5f)));
  }
  RunResult r = runProgram(p, inputs);
  ASSERT_TRUE(r.ok) << r.err;
  for (size_t k = 0; k < r.outputs.size(); ++k)
    for (float f : fromBytes<float>(r.outputs[k])) ASSERT_FALSE(std::isnan(f)) << "output " << k;

  // The artifact keeps the opcodes and their attributes.
  namespace fs = std::filesystem;
  std::string file =
      (fs::path(::testing::TempDir()) / ("loom-training-" + std::to_string(::getpid()) + ".loom"))
          .string();
  std::string err;
  ASSERT_TRUE(writeArtifact(p, file, err)) << err;
  Program q;
  ASSERT_TRUE(readArtifact(file, q, err)) << err;
  fs::remove(file);
  ASSERT_EQ(q.instrs.size(), p.instrs.size());
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    EXPECT_EQ(q.instrs[i].op, p.instrs[i].op);
    EXPECT_EQ(q.instrs[i].in, p.instrs[i].in);
    EXPECT_EQ(q.instrs[i].out, p.instrs[i].out);
    EXPECT_EQ(q.instrs[i].ints, p.instrs[i].ints);
    EXPECT_EQ(q.instrs[i].floats, p.instrs[i].floats);
  }
  RunResult r2 = runProgram(q, inputs);
  ASSERT_TRUE(r2.ok) << r2.err;
  EXPECT_EQ(r.outputs, r2.outputs);
}

/// Breaks instruction `index` of the training program with `edit` and
/// expects validate() to name it and the problem.
template <typename Edit>
void expectBroken(size_t index, const std::string &message, Edit edit) {
  Program p = trainingOpsProgram();
  edit(p, p.instrs[index]);
  std::string e = p.validate();
  EXPECT_NE(e.find("instr " + std::to_string(index) + " ("), std::string::npos) << "got: " << e;
  EXPECT_NE(e.find(message), std::string::npos) << "got: " << e;
}

/// Gives buffer `id` a new shape (and the matching byte count, placed at
/// the end of the arena so nothing overlaps).
void reshape(Program &p, uint32_t id, const Shape &s) {
  BufferDesc &b = p.buffers[id];
  b.shape = s;
  b.bytes = uint64_t(numel(s)) * dtypeSize(b.dtype);
  b.offset = (p.arenaBytes + 63) / 64 * 64;
  p.arenaBytes = b.offset + b.bytes;
}

TEST(TrainingKernels, ValidateRejectsWrongArityShapesAndAttributes) {
  // Arity and attributes.
  expectBroken(0, "takes 2 to 3 inputs, got 1", [](Program &, Instr &I) { I.in.pop_back(); });
  expectBroken(1, "takes 2 outputs, got 1", [](Program &, Instr &I) { I.out.pop_back(); });
  expectBroken(1, "takes 1 float attributes, got 0", [](Program &, Instr &I) { I.floats.clear(); });
  expectBroken(2, "takes 3 outputs, got 2", [](Program &, Instr &I) { I.out.pop_back(); });
  expectBroken(3, "takes 6 inputs, got 5", [](Program &, Instr &I) { I.in.pop_back(); });
  expectBroken(3, "takes 1 to 4 int attributes, got 0", [](Program &, Instr &I) { I.ints.clear(); });
  expectBroken(4, "takes 3 inputs, got 2", [](Program &, Instr &I) { I.in.pop_back(); });
  expectBroken(5, "ints[0] must be the kind", [](Program &, Instr &I) { I.ints = {4}; });
  expectBroken(6, "axis 3 out of range for rank 3", [](Program &, Instr &I) { I.ints = {3}; });
  expectBroken(7, "takes 3 inputs, got 2", [](Program &, Instr &I) { I.in.pop_back(); });
  expectBroken(8, "takes 6 int attributes", [](Program &, Instr &I) { I.ints.pop_back(); });
  expectBroken(9, "takes 6 to 7 inputs, got 5", [](Program &, Instr &I) { I.in.pop_back(); });
  expectBroken(11, "takes 1 inputs, got 2",
               [](Program &, Instr &I) { I.in.push_back(I.in[0]); });
  expectBroken(9, "takes 3 to 4 outputs, got 2", [](Program &, Instr &I) { I.out.pop_back(); });
  expectBroken(9, "takes 4 float attributes, got 3",
               [](Program &, Instr &I) { I.floats.pop_back(); });

  // Shapes and dtypes.
  expectBroken(0, "ids must be i64 or i32", [](Program &p, Instr &I) {
    p.buffers[I.in[1]].dtype = DType::F32;
    p.buffers[I.in[1]].bytes /= 2;
  });
  expectBroken(0, "output has shape [10,5], expected [V, 4]", [](Program &p, Instr &I) {
    reshape(p, I.out[0], {10, 5});
  });
  expectBroken(0, "must be the ids' shape", [](Program &p, Instr &I) {
    reshape(p, I.in[1], {3, 2});
  });
  expectBroken(1, "weight has shape [5], expected [4]",
               [](Program &p, Instr &I) { reshape(p, I.in[1], {5}); });
  expectBroken(1, "output 1 has shape [3], expected [4]",
               [](Program &p, Instr &I) { reshape(p, I.out[1], {3}); });
  expectBroken(2, "output 2 has shape [1], expected [4]",
               [](Program &p, Instr &I) { reshape(p, I.out[2], {1}); });
  expectBroken(3, "output gradient has shape", [](Program &p, Instr &I) {
    reshape(p, I.in[5], {1, 2, 3, 4});
  });
  expectBroken(3, "output has shape [1,4,3,5], expected [1,4,3,4]", [](Program &p, Instr &I) {
    reshape(p, I.in[3], {1, 4, 3, 5});
  });
  expectBroken(3, "lse has shape [1,4,3,1], expected [1,4,3]", [](Program &p, Instr &I) {
    reshape(p, I.in[4], {1, 4, 3, 1});
  });
  // lse is never bf16 storage, and has the computation's dtype.
  expectBroken(3, "lse must be f32 (the computation's dtype), got bf16", [](Program &p, Instr &I) {
    p.buffers[I.in[4]].dtype = DType::BF16;
    p.buffers[I.in[4]].bytes /= 2;
  });
  expectBroken(3, "output 1 has shape [1,4,3,4], expected [1,2,3,4]", [](Program &p, Instr &I) {
    reshape(p, I.out[1], {1, 4, 3, 4});
  });
  expectBroken(3, "query heads are not a multiple", [](Program &p, Instr &I) {
    reshape(p, I.in[1], {1, 3, 3, 4});
    reshape(p, I.in[2], {1, 3, 3, 4});
  });
  expectBroken(4, "does not broadcast to", [](Program &p, Instr &I) {
    reshape(p, I.in[1], {2, 4});
  });
  expectBroken(5, "gradient has shape [4], expected [2,3,4]",
               [](Program &p, Instr &I) { reshape(p, I.in[1], {4}); });
  expectBroken(7, "loss gradient has shape [1], expected []",
               [](Program &p, Instr &I) { reshape(p, I.in[2], {1}); });
  expectBroken(7, "targets must be i64 or i32",
               [](Program &p, Instr &I) { p.buffers[I.in[1]].dtype = DType::F32; });
  expectBroken(8, "dim 2 window (start 8, count 4, step -3) leaves [0, 9)",
               [](Program &, Instr &I) { I.ints[5] = -3; });
  expectBroken(8, "differs from output rank", [](Program &p, Instr &I) {
    reshape(p, I.in[0], {6, 4});
  });
  expectBroken(9, "lr has shape [1], expected []",
               [](Program &p, Instr &I) { reshape(p, I.in[4], {1}); });
  expectBroken(9, "exp_avg has shape [5], expected [6]",
               [](Program &p, Instr &I) { reshape(p, I.in[2], {5}); });
  expectBroken(9, "step must be f32, got i32",
               [](Program &p, Instr &I) { p.buffers[I.in[5]].dtype = DType::I32; });
  expectBroken(9, "output 2 must be f32, got i32",
               [](Program &p, Instr &I) { p.buffers[I.out[2]].dtype = DType::I32; });
  expectBroken(10, "grad_scale has shape [5], expected []",
               [](Program &p, Instr &I) { reshape(p, I.in[6], {5}); });
  expectBroken(10, "grad_scale must be f32, got i32",
               [](Program &p, Instr &I) { p.buffers[I.in[6]].dtype = DType::I32; });
  expectBroken(11, "output 0 has shape [1], expected []",
               [](Program &p, Instr &I) { reshape(p, I.out[0], {1}); });
}

TEST(TrainingKernels, CrossEntropyLossIsF64OnlyForF64Logits) {
  for (DType logits : {DType::F32, DType::F64}) {
    ProgramBuilder b;
    uint32_t l = b.input(logits, {2, 3}), t = b.input(DType::I64, {2});
    b.instr(OpCode::CrossEntropy, {l, t}, {b.output(DType::F64, {})});
    std::string e = b.p.validate();
    if (logits == DType::F64)
      EXPECT_EQ(e, "");
    else
      EXPECT_NE(e.find("output must be f32 (or f64 with f64 logits), got f64"), std::string::npos)
          << e;
  }
}

} // namespace
