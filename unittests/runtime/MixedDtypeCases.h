//===- MixedDtypeCases.h - Instructions on bf16 storage, and their unfused twins -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Codegen folds autocast's f32 <-> bf16 casts into the kernels around them
// (codegen/FoldCasts.cpp), relying on Program.h's promise: an instruction
// that reads a bf16 operand or writes a bf16 result computes exactly what
// the f32 instruction between two Casts computes. Each case here builds
// both programs from one description, so a test can run them and demand the
// same bits: the "fused" one (bf16 buffers in the instruction's slots) and
// the "unfused" one (Cast, f32 instruction, Cast). Inputs are fresh random
// values every run; bf16 inputs are random bf16 values (and so are f32
// ones where the case says so).
//===----------------------------------------------------------------------===//
#ifndef LOOM_UNITTESTS_RUNTIME_MIXEDDTYPECASES_H
#define LOOM_UNITTESTS_RUNTIME_MIXEDDTYPECASES_H

#include "RuntimeTestUtil.h"

namespace loom::rt::test {

struct Operand {
  Shape shape;
  bool bf16 = false;
  double lo = -1, hi = 1; // inputs: the range of the random values
};

struct MixedCase {
  std::string name;
  OpCode op = OpCode::Add;
  std::vector<Operand> in, out;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  // The CUDA results' distance from the CPU reference (CudaMixedDtypeTest).
  double rtol = 1e-5, atol = 1e-6;
  // The f32 inputs hold bf16 values too (attention's bf16_operands promise).
  bool bf16Values = false;
};

/// bf16 bits of f32 values, truncated: any bf16 pattern is a valid input.
inline std::vector<uint16_t> toBf16Bits(const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    h[i] = uint16_t(u >> 16);
  }
  return h;
}

/// The two programs of a case and their (shared) inputs.
struct MixedPrograms {
  Program fused, unfused;
  std::vector<Bytes> inputs;
};

inline MixedPrograms buildMixed(const MixedCase &c, Rng &rng) {
  MixedPrograms m;
  ProgramBuilder f, u;
  std::vector<uint32_t> fin, fout, uin, uout;
  for (const Operand &o : c.in) {
    DType t = o.bf16 ? DType::BF16 : DType::F32;
    std::vector<float> v = rng.uniform(numel(o.shape), o.lo, o.hi);
    if (c.bf16Values) v = toBf16Values(std::move(v));
    m.inputs.push_back(o.bf16 ? toBytes(toBf16Bits(v)) : toBytes(v));
    fin.push_back(f.input(t, o.shape));
    uint32_t x = u.input(t, o.shape);
    if (o.bf16) { // unfused: widen first
      uint32_t w = u.temp(DType::F32, o.shape);
      u.instr(OpCode::Cast, {x}, {w});
      x = w;
    }
    uin.push_back(x);
  }
  std::vector<std::pair<uint32_t, uint32_t>> narrow; // unfused: f32 temp -> bf16 output
  for (const Operand &o : c.out) {
    DType t = o.bf16 ? DType::BF16 : DType::F32;
    fout.push_back(f.output(t, o.shape));
    uint32_t y = u.output(t, o.shape);
    if (o.bf16) {
      uint32_t w = u.temp(DType::F32, o.shape);
      narrow.push_back({w, y});
      y = w;
    }
    uout.push_back(y);
  }
  f.instr(c.op, fin, fout, c.ints, c.floats);
  u.instr(c.op, uin, uout, c.ints, c.floats);
  for (auto [w, y] : narrow) u.instr(OpCode::Cast, {w}, {y});
  m.fused = f.p;
  m.unfused = u.p;
  return m;
}

/// Attention and its gradient on bf16 storage, every slot in some case:
/// grouped-query (4 query heads on 2 kv heads), causal and not, S > T (the
/// offset mask). Head dim 64 with bf16_operands is what the CUDA flash
/// kernels take (T = 130 and 40 leave partial 64-row tiles); head dim 16
/// with exact products takes the f32 kernels, staged. lse is always f32.
/// The gradient's o and lse are random like its other inputs (the fold
/// does not care whether they came from a forward); lse is drawn near
/// log S, where a forward's lse of these scores lies, so that P = exp(s -
/// lse) has the forward's size.
inline std::vector<MixedCase> attentionMixedCases() {
  struct Dims {
    int64_t B, Hq, Hkv, T, S, D;
    bool causal, bf16Operands;
  };
  const Dims dims[] = {{1, 4, 2, 130, 130, 64, true, true},
                       {2, 4, 2, 40, 100, 64, true, true},
                       {2, 4, 2, 37, 37, 16, true, false},
                       {1, 4, 2, 21, 29, 16, false, false}};
  std::vector<MixedCase> cases;
  for (const Dims &d : dims) {
    Shape q = {d.B, d.Hq, d.T, d.D}, kv = {d.B, d.Hkv, d.S, d.D}, rows = {d.B, d.Hq, d.T};
    Operand lse = {rows, false, std::log(double(d.S)), std::log(double(d.S)) + 1};
    std::string n = " (T " + std::to_string(d.T) + ", S " + std::to_string(d.S) + ", D " +
                    std::to_string(d.D) + (d.causal ? ", causal" : "") +
                    (d.bf16Operands ? ", bf16 operands)" : ")");
    std::vector<int64_t> ints = {d.causal, d.bf16Operands};
    std::vector<double> scale = {1 / std::sqrt(double(d.D))};
    // bf16 products round P and dS as FlashAttention does: the GPU stays
    // within bf16 precision of the CPU's exact products (CudaBackendTest).
    double rtol = d.bf16Operands ? 2e-2 : 1e-4, atol = d.bf16Operands ? 1e-2 : 1e-5;
    auto add = [&](const std::string &name, OpCode op, std::vector<Operand> in,
                   std::vector<Operand> out) {
      cases.push_back({name + n, op, std::move(in), std::move(out), ints, scale, rtol, atol,
                       d.bf16Operands});
    };
    add("attention bf16 -> bf16", OpCode::Attention, {{q, true}, {kv, true}, {kv, true}},
        {{q, true}, {rows, false}});
    add("attention q f32, k v bf16 -> f32", OpCode::Attention,
        {{q, false}, {kv, true}, {kv, true}}, {{q, false}, {rows, false}});
    add("attention f32 -> bf16", OpCode::Attention, {{q, false}, {kv, false}, {kv, false}},
        {{q, true}, {rows, false}});
    add("attention_grad bf16 -> bf16", OpCode::AttentionGrad,
        {{q, true}, {kv, true}, {kv, true}, {q, true}, lse, {q, true}},
        {{q, true}, {kv, true}, {kv, true}});
    add("attention_grad dy bf16 -> dq bf16, dk f32, dv bf16", OpCode::AttentionGrad,
        {{q, false}, {kv, false}, {kv, false}, {q, false}, lse, {q, true}},
        {{q, true}, {kv, false}, {kv, true}});
    add("attention_grad q k o bf16 -> dq f32, dk bf16, dv f32", OpCode::AttentionGrad,
        {{q, true}, {kv, true}, {kv, false}, {q, true}, lse, {q, false}},
        {{q, false}, {kv, true}, {kv, false}});
  }
  return cases;
}

/// Every slot Program.h lets hold bf16 storage, in a few combinations
/// (attention's in attentionMixedCases, tested on their own: the CUDA tests
/// run them through each attention implementation). Shapes are odd to reach the kernels' edges; broadcasting and more than
/// 64 rows (the norms' column chunks) included.
inline std::vector<MixedCase> mixedCases() {
  std::vector<MixedCase> cases;
  Shape big = {3, 5, 37};
  for (OpCode op : {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div, OpCode::Max, OpCode::Min,
                    OpCode::Pow}) {
    double lo = op == OpCode::Pow ? 0.1 : -2;
    std::string n = opcodeName(op);
    cases.push_back({n + " bf16 x f32 -> bf16", op, {{big, true, lo, 2}, {{5, 1}, false, 0.5, 2}},
                     {{big, true}}});
    cases.push_back({n + " f32 x bf16 -> f32", op, {{big, false, lo, 2}, {big, true, 0.5, 2}},
                     {{big, false}}});
    cases.push_back({n + " bf16 x bf16 -> bf16", op, {{{37}, true, lo, 2}, {big, true, 0.5, 2}},
                     {{big, true}}});
  }
  for (OpCode op : {OpCode::Neg, OpCode::Sqrt, OpCode::Rsqrt, OpCode::Reciprocal, OpCode::Exp,
                    OpCode::Tanh, OpCode::Sigmoid, OpCode::Silu, OpCode::GeluTanh,
                    OpCode::GeluErf, OpCode::Cos, OpCode::Sin, OpCode::Log, OpCode::Relu,
                    OpCode::Erf, OpCode::Softplus}) {
    std::string n = opcodeName(op);
    cases.push_back({n + " bf16 -> f32", op, {{{999}, true, 0.05, 4}}, {{{999}, false}}});
    cases.push_back({n + " f32 -> bf16", op, {{{999}, false, 0.05, 4}}, {{{999}, true}}});
  }
  for (int64_t kind : {0, 1, 2, 3}) {
    std::string n = "activation_grad " + std::to_string(kind);
    cases.push_back({n + " bf16 x bf16 -> bf16", OpCode::ActivationGrad,
                     {{{7, 129}, true, -4, 4}, {{7, 129}, true}}, {{{7, 129}, true}}, {kind}});
    cases.push_back({n + " f32 x bf16 -> f32", OpCode::ActivationGrad,
                     {{{7, 129}, false, -4, 4}, {{7, 129}, true}}, {{{7, 129}, false}}, {kind}});
  }
  cases.push_back({"transpose bf16 -> f32", OpCode::Transpose, {{{2, 5, 3, 7}, true}},
                   {{{2, 3, 5, 7}, false}}, {0, 2, 1, 3}});
  cases.push_back({"transpose f32 -> bf16", OpCode::Transpose, {{{2, 5, 3, 7}, false}},
                   {{{7, 3, 5, 2}, true}}, {3, 2, 1, 0}});
  for (OpCode op : {OpCode::Rotary, OpCode::RotaryGrad}) {
    std::string n = opcodeName(op);
    Shape x = {2, 3, 5, 8}, table = {1, 1, 5, 8};
    cases.push_back({n + " bf16 -> bf16", op, {{x, true}, {table, false}, {table, false}},
                     {{x, true}}});
    cases.push_back({n + " f32 -> bf16", op, {{x, false}, {table, false}, {table, false}},
                     {{x, true}}});
    cases.push_back({n + " bf16 -> f32", op, {{x, true}, {table, false}, {table, false}},
                     {{x, false}}});
  }
  cases.push_back({"rms_norm bf16 -> bf16", OpCode::RmsNorm, {{{7, 33}, true}, {{33}, false, 0.5, 1.5}},
                   {{{7, 33}, true}}, {}, {1e-5}});
  cases.push_back({"rms_norm f32 -> bf16", OpCode::RmsNorm, {{{7, 33}, false}, {{33}, false, 0.5, 1.5}},
                   {{{7, 33}, true}}, {}, {1e-5}});
  cases.push_back({"rms_norm_grad dy bf16, dx bf16", OpCode::RmsNormGrad,
                   {{{70, 33}, false}, {{33}, false, 0.5, 1.5}, {{70, 33}, true}},
                   {{{70, 33}, true}, {{33}, false}}, {}, {1e-5}});
  cases.push_back({"rms_norm_grad dy bf16, dx f32", OpCode::RmsNormGrad,
                   {{{2, 35, 33}, false}, {{33}, false, 0.5, 1.5}, {{2, 35, 33}, true}},
                   {{{2, 35, 33}, false}, {{33}, false}}, {}, {1e-5}});
  // GPT-2's LayerNorm writing the bf16 input of a GEMM, and its gradient
  // reading the GEMM's bf16 dx (with and without the bias).
  cases.push_back({"layer_norm f32 -> bf16", OpCode::LayerNorm,
                   {{{7, 33}, false}, {{33}, false, 0.5, 1.5}, {{33}, false}},
                   {{{7, 33}, true}}, {}, {1e-5}});
  cases.push_back({"layer_norm bf16 -> bf16, no bias", OpCode::LayerNorm,
                   {{{2, 5, 33}, true}, {{33}, false, 0.5, 1.5}}, {{{2, 5, 33}, true}}, {}, {1e-5}});
  cases.push_back({"layer_norm_grad dy bf16, dx f32", OpCode::LayerNormGrad,
                   {{{70, 33}, false}, {{33}, false, 0.5, 1.5}, {{70, 33}, true}},
                   {{{70, 33}, false}, {{33}, false}, {{33}, false}}, {}, {1e-5}});
  cases.push_back({"layer_norm_grad dy bf16, dx bf16", OpCode::LayerNormGrad,
                   {{{2, 35, 33}, false}, {{33}, false, 0.5, 1.5}, {{2, 35, 33}, true}},
                   {{{2, 35, 33}, true}, {{33}, false}, {{33}, false}}, {}, {1e-5}});
  // A gradient norm's term read straight from a bf16 gradient; the larger
  // one spans several 64K-element slices on the GPU.
  cases.push_back({"sum_squares bf16 -> f32", OpCode::SumSquares, {{{7, 129}, true, -3, 3}},
                   {{{}, false}}});
  cases.push_back({"sum_squares bf16 -> f32, sliced", OpCode::SumSquares,
                   {{{2, 70001}, true, -3, 3}}, {{{}, false}}});
  // A bias gradient read straight from a bf16 dy: sums over the leading
  // axes (the GPU's column sums, 2-D and 3-D), and over a trailing axis.
  cases.push_back({"reduce bf16 -> f32, bias gradient", OpCode::Reduce,
                   {{{300, 130}, true, -3, 3}}, {{{130}, false}}, {0, 0}});
  cases.push_back({"reduce bf16 -> f32, bias gradient of [B, T, N]", OpCode::Reduce,
                   {{{2, 150, 96}, true, -3, 3}}, {{{1, 1, 96}, false}}, {0, 0, 1}});
  cases.push_back({"reduce bf16 -> f32, rows", OpCode::Reduce, {{{7, 129}, true, -3, 3}},
                   {{{7, 1}, false}}, {0, 1}});
  // AdamW reading a bf16 gradient, with and without the clip scale.

  Shape w = {7, 129};
  std::vector<Operand> adam = {{w, false}, {w, true, -3, 3}, {w, false, -1e-2, 1e-2},
                               {w, false, 0, 1e-3}, {{}, false, 1e-3, 3e-3}, {{}, false, 0, 9}};
  cases.push_back({"adamw g bf16", OpCode::AdamW, adam, {{w, false}, {w, false}, {w, false}}, {},
                   {0.9, 0.95, 1e-8, 0.1}});
  adam.push_back({{}, false, 0.2, 1});
  cases.push_back({"adamw g bf16, grad scale", OpCode::AdamW, adam,
                   {{w, false}, {w, false}, {w, false}}, {}, {0.9, 0.95, 1e-8, 0.1}});
  return cases; // attention's: attentionMixedCases()
}

} // namespace loom::rt::test

#endif
