//===- Fp8AmaxCases.h - Producers with fused amax outputs, for both backends -===//
//
// Part of loom, under the Apache License v2.0.
//
// Each case is one producing instruction (loom/runtime/Fp8Amax.h) with its
// regular outputs and its amax outputs all program outputs. The amax must
// equal max |stored value| taken afterwards over the very bytes the backend
// stored (what a separate Fp8Amax over the output reads), bit for bit:
// Fp8AmaxTest.cpp runs them on the CPU, Fp8AmaxCudaTest.cpp on a GPU, where
// the kernels find the maximum while they store. Data: random values of
// many magnitudes, all zeros, subnormals only, and values whose largest
// magnitude is negative or an infinity (NaN-free: NaN payloads are not
// values, and the backends' arithmetic NaNs differ).
//===----------------------------------------------------------------------===//
#ifndef LOOM_UNITTESTS_RUNTIME_FP8AMAXCASES_H
#define LOOM_UNITTESTS_RUNTIME_FP8AMAXCASES_H

#include "RuntimeTestUtil.h"
#include "loom/runtime/Fp8.h"
#include "loom/runtime/Fp8Amax.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

namespace loom::rt::test {

struct AmaxCase {
  std::string name;
  Program p;
  std::vector<Bytes> inputs;
};

inline Bytes amaxInputBytes(DType t, const std::vector<float> &v) {
  if (t == DType::F32)
    return toBytes(v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = uint16_t(fp8FloatBits(toBf16Values({v[i]})[0]) >> 16);
  return toBytes(h);
}

/// max |x| bits over the stored values of an f32 or bf16 output.
inline uint32_t storedAmaxBits(DType t, const Bytes &b) {
  uint32_t m = 0;
  if (t == DType::F32) {
    for (size_t i = 0; i + 4 <= b.size(); i += 4) {
      uint32_t u;
      std::memcpy(&u, b.data() + i, 4);
      m = std::max(m, u & 0x7fffffffu);
    }
  } else {
    for (size_t i = 0; i + 2 <= b.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, b.data() + i, 2);
      m = std::max(m, (uint32_t(h) << 16) & 0x7fffffffu);
    }
  }
  return m;
}

/// The data sets, n values each.
inline std::vector<std::pair<std::string, std::vector<float>>> amaxData(Rng &rng, int64_t n) {
  std::vector<float> wide = rng.uniform(n, -3, 3);
  for (float &v : wide) v *= std::exp2(float(rng.ints(1, -30, 20)[0]));
  std::vector<float> sub = rng.uniform(n, -1, 1);
  for (float &v : sub) v *= std::numeric_limits<float>::min() / 4; // subnormal f32 and bf16
  std::vector<float> neg = rng.uniform(n, -1, 1);
  neg[size_t(n / 3)] = -40.0f; // the largest magnitude is negative
  std::vector<float> inf = rng.uniform(n, -1, 1);
  inf[size_t(n / 2)] = -INFINITY;
  return {{"wide", wide}, {"zeros", std::vector<float>(size_t(n), 0.0f)}, {"subnormal", sub},
          {"negative", neg}, {"infinity", inf}};
}

/// Every producer kind, in f32 and bf16 storage, packed and element-wise
/// paths, with each data set in its first input (the others random).
inline std::vector<AmaxCase> amaxCases(Rng &rng) {
  std::vector<AmaxCase> cases;
  struct Spec {
    std::string name;
    OpCode op;
    std::vector<Shape> in;
    std::vector<DType> inTypes;
    std::vector<Shape> out;
    std::vector<DType> outTypes;
    size_t amaxes;
    std::vector<int64_t> ints;
    std::vector<double> floats;
  };
  const DType f = DType::F32, h = DType::BF16;
  std::vector<Spec> specs = {
      {"add", OpCode::Add, {{64, 128}, {64, 128}}, {f, f}, {{64, 128}}, {f}, 1, {}, {}},
      {"add bf16", OpCode::Add, {{64, 128}, {64, 128}}, {h, f}, {{64, 128}}, {h}, 1, {}, {}},
      {"add broadcast", OpCode::Add, {{37, 53}, {1, 53}}, {f, f}, {{37, 53}}, {h}, 1, {}, {}},
      {"mul", OpCode::Mul, {{37, 53}, {37, 53}}, {f, f}, {{37, 53}}, {f}, 1, {}, {}},
      {"swiglu", OpCode::SwiGlu, {{64, 176}, {64, 176}}, {f, f}, {{64, 176}}, {f}, 1, {}, {}},
      {"swiglu bf16", OpCode::SwiGlu, {{64, 176}, {64, 176}}, {h, h}, {{64, 176}}, {h}, 1, {}, {}},
      {"swiglu ragged", OpCode::SwiGlu, {{37, 53}, {37, 53}}, {h, h}, {{37, 53}}, {h}, 1, {}, {}},
      {"swiglu_grad", OpCode::SwiGluGrad, {{64, 176}, {64, 176}, {64, 176}}, {h, h, h},
       {{64, 176}, {64, 176}}, {h, h}, 2, {}, {}},
      {"swiglu_grad dgate only", OpCode::SwiGluGrad, {{37, 53}, {37, 53}, {37, 53}}, {f, f, f},
       {{37, 53}, {37, 53}}, {f, f}, 1, {}, {}},
      {"rms_norm", OpCode::RmsNorm, {{64, 128}, {128}}, {f, f}, {{64, 128}}, {h}, 1, {}, {1e-6}},
      {"rms_norm ragged", OpCode::RmsNorm, {{37, 53}, {53}}, {f, f}, {{37, 53}}, {f}, 1, {}, {1e-6}},
      {"rms_norm_grad", OpCode::RmsNormGrad, {{64, 128}, {128}, {64, 128}}, {f, f, h},
       {{64, 128}, {128}}, {h, f}, 1, {}, {1e-6}},
      {"transpose heads bf16", OpCode::Transpose, {{2, 4, 8, 16}}, {h}, {{2, 8, 4, 16}}, {h}, 1,
       {0, 2, 1, 3}, {}},
      {"transpose heads f32", OpCode::Transpose, {{2, 4, 8, 16}}, {f}, {{2, 8, 4, 16}}, {f}, 1,
       {0, 2, 1, 3}, {}},
      {"transpose heads f32 -> bf16", OpCode::Transpose, {{2, 4, 8, 16}}, {f}, {{2, 8, 4, 16}},
       {h}, 1, {0, 2, 1, 3}, {}},
      {"transpose 2d", OpCode::Transpose, {{37, 53}}, {h}, {{53, 37}}, {h}, 1, {1, 0}, {}},
      {"transpose 2d f32 -> bf16", OpCode::Transpose, {{37, 53}}, {f}, {{53, 37}}, {h}, 1,
       {1, 0}, {}},
  };
  for (const Spec &s : specs) {
    int64_t n0 = numel(s.in[0]);
    for (auto &[dataName, data] : amaxData(rng, n0)) {
      AmaxCase c;
      c.name = s.name + ", " + dataName;
      ProgramBuilder b;
      std::vector<uint32_t> ins, outs;
      for (size_t k = 0; k < s.in.size(); ++k) {
        ins.push_back(b.input(s.inTypes[k], s.in[k]));
        bool norm = (s.op == OpCode::RmsNorm || s.op == OpCode::RmsNormGrad) && k == 1;
        std::vector<float> v = k == 0 ? data : norm ? rng.uniform(numel(s.in[k]), 0.5, 1.5)
                                                     : rng.uniform(numel(s.in[k]), -2, 2);
        c.inputs.push_back(amaxInputBytes(s.inTypes[k], v));
      }
      for (size_t k = 0; k < s.out.size(); ++k) outs.push_back(b.output(s.outTypes[k], s.out[k]));
      for (size_t k = 0; k < s.amaxes; ++k) outs.push_back(b.output(DType::F32, {1, 1}, "amax"));
      b.instr(s.op, ins, outs, s.ints, s.floats);
      c.p = b.p;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

/// Runs every case on `backend`; each amax output must equal the stored
/// amax of its output, bit for bit.
inline void expectFusedAmaxExact(const std::string &backend, int threads) {
  Rng rng;
  for (const AmaxCase &c : amaxCases(rng)) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.p.validate(), "");
    RunResult r = runProgram(c.p, c.inputs, threads, backend);
    ASSERT_TRUE(r.ok) << r.err;
    const Instr &I = c.p.instrs[0];
    size_t regular = fusedAmaxRegularOutputs(I.op);
    for (size_t k = 0; k < fusedAmaxCount(I); ++k) {
      uint32_t want = storedAmaxBits(c.p.buffers[I.out[k]].dtype, r.outputs[k]), got;
      std::memcpy(&got, r.outputs[regular + k].data(), 4);
      EXPECT_EQ(got, want) << "amax of output " << k << ": 0x" << std::hex << got << " ("
                           << fp8BitsFloat(got) << "), stored values' 0x" << want << " ("
                           << fp8BitsFloat(want) << ")";
    }
  }
}

} // namespace loom::rt::test

#endif
