//===- ProgramCost.cpp - Pricing a compiled program per instruction -------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/ProgramCost.h"
#include "loom/runtime/AdamWGroups.h"
#include "loom/runtime/AttentionLayout.h"
#include "loom/runtime/GemmStaging.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loom::planner {

using rt::DType;
using rt::OpCode;

namespace {

bool isGemm(OpCode op) { return op == OpCode::MatMul || op == OpCode::ScaledMatMul; }

std::string gbps(double bytesPerSecond) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f GB/s", bytesPerSecond / 1e9);
  return buf;
}

/// A bf16 product of training from the profile's token grid: token rows
/// times a weight (M >= K: the grid's rows table at K, N) or a weight
/// gradient contracting the tokens (K > M: its reduce tables at M, N),
/// when the token dim is within 4x of the grid's; false otherwise (the
/// cube curve then prices it).
bool tokenGrid(const InstrWork &w, const HardwareProfile &hw, double &eff) {
  const HardwareProfile::TokenGrid &g = hw.gemmTokens;
  if (g.empty())
    return false;
  bool rows = w.m >= w.k;
  double tokens = rows ? w.m : w.k;
  if (tokens < g.tokens / 4 || tokens > g.tokens * 4)
    return false;
  eff = rows ? g.at(g.rowsBf16, w.k, w.n)
             : g.at(w.rate == GemmRate::Bf16F32Out ? g.reduceF32 : g.reduceBf16, w.m, w.n);
  return true;
}

} // namespace

std::string instrClass(const rt::Program &p, const rt::Instr &I) {
  std::string name = rt::opcodeName(I.op);
  if (isGemm(I.op))
    name += std::string(" ") + rt::dtypeName(p.buffers[I.out[0]].dtype);
  return name;
}

double instrBytes(const rt::Program &p, const rt::Instr &I) {
  auto bytesOf = [&](uint32_t id) { return double(p.buffers[id].bytes); };
  if (I.op == OpCode::Embedding && I.in.size() >= 2 && !I.out.empty()) {
    // A gather touches the rows it copies, not the whole table (a
    // 128k-row vocabulary would otherwise count 1 GiB per lookup).
    double out = bytesOf(I.out[0]);
    return bytesOf(I.in[1]) + 2 * out;
  }
  double bytes = 0;
  for (uint32_t id : I.in) bytes += bytesOf(id);
  for (uint32_t id : I.out) bytes += bytesOf(id);
  return bytes;
}

const std::vector<std::string> &calibratedMemoryClasses() {
  static const std::vector<std::string> classes = {
      "adamw",         "sum_squares",        "global_sum_squares", "embedding", "embedding_grad",
      "cross_entropy", "cross_entropy_grad", "rms_norm",       "rms_norm_grad",
      "add_rms_norm",
      "layer_norm",    "layer_norm_grad",    "rotary",         "rotary_grad",
      "swiglu",        "swiglu_grad",        "gelu_tanh",      "gelu_erf",
      "activation_grad", "add",              "mul",            "cast",
      "transpose",     "split",              "concat",         "reduce",
      "fp8_scale",     "fp8_cast"};
  return classes;
}

InstrWork describeInstr(const rt::Program &p, const rt::Instr &I) {
  InstrWork w;
  w.cls = instrClass(p, I);
  w.bytes = instrBytes(p, I);
  if (isGemm(I.op)) {
    // ints[0] transposes a: its contracted dim is then the next-to-last.
    const rt::BufferDesc &a = p.buffers[I.in[0]], &out = p.buffers[I.out[0]];
    double k = a.shape.empty() ? 1
               : !I.ints.empty() && I.ints[0] && a.shape.size() >= 2
                   ? double(a.shape[a.shape.size() - 2])
                   : double(a.shape.back());
    double mn = double(out.numElements());
    w.kind = InstrKind::Gemm;
    w.flops = 2 * mn * k;
    w.cube = std::max(1.0, std::cbrt(mn * k));
    w.n = out.shape.empty() ? 1 : double(out.shape.back());
    w.m = mn / std::max(1.0, w.n);
    w.k = k;
    DType at = a.dtype, bt = p.buffers[I.in[1]].dtype;
    w.rate = I.op == OpCode::ScaledMatMul                ? GemmRate::Fp8
             : at == DType::F32 && bt == DType::F32      ? GemmRate::F32
             : out.dtype == DType::F32                   ? GemmRate::Bf16F32Out
                                                         : GemmRate::Bf16;
    w.stagingBytes = double(rt::planGemmStaging(p, I).copyBytes());
    if (I.op == OpCode::MatMul && rt::matMulSumsB(I))
      w.columnSumBytes = double(p.buffers[I.in[1]].bytes + p.buffers[I.out[1]].bytes);
    return w;
  }
  if (I.op == OpCode::Attention || I.op == OpCode::AttentionGrad) {
    // q [B, Hq, T, D], k [B, Hkv, S, D]: QK^T and PV are 2 B Hq T S D each
    // forward; the backward redoes QK^T and adds dV, dP, dQ, dK (2.5x);
    // a causal mask halves both (CostModel.cpp, Calibration.cpp).
    // (Either layout: AttentionLayout.h gives the heads-major dims.)
    rt::AttentionLayout l = rt::attentionLayout(I);
    std::vector<int64_t> q = rt::headsMajorDims(p.buffers[I.in[0]].shape, l),
                         k = rt::headsMajorDims(p.buffers[I.in[1]].shape, l);
    if (q.size() == 4 && k.size() == 4) {
      double fwd = 4.0 * double(q[0]) * double(q[1]) * double(q[2]) * double(k[2]) * double(q[3]);
      bool causal = !I.ints.empty() && I.ints[0];
      w.backward = I.op == OpCode::AttentionGrad;
      w.kind = InstrKind::Attention;
      w.flops = fwd * (causal ? 0.5 : 1.0) * (w.backward ? 2.5 : 1.0);
      w.seq = double(q[2]);
      w.headDim = double(q[3]);
    }
  }
  return w;
}

std::vector<InstrWork> describeProgram(const rt::Program &p) {
  std::vector<InstrWork> work;
  work.reserve(p.instrs.size());
  for (const rt::Instr &I : p.instrs) work.push_back(describeInstr(p, I));
  // The CUDA backend runs each group of small AdamWs as one launch.
  for (const rt::AdamWGroup &g : rt::smallAdamWGroups(p))
    for (size_t k = 1; k < g.members.size(); ++k) work[g.members[k]].sharesLaunch = true;
  return work;
}

double instrSeconds(const InstrWork &w, const HardwareProfile &hw, std::string *rate,
                    bool *fallback) {
  auto say = [&](std::string r, bool f) {
    if (rate) *rate = std::move(r);
    if (fallback) *fallback = f;
  };
  switch (w.kind) {
  case InstrKind::Gemm: {
    double peak = hw.peakBf16, eff = 0;
    switch (w.rate) {
    case GemmRate::Fp8:
      peak = hw.peakFp8;
      eff = hw.fp8GemmEfficiency(w.cube);
      say(hw.gemmFp8.points.empty() ? "fp8 = bf16 curve x fp8_efficiency_ratio (no fp8 GEMM timing)"
                                    : "calibrated fp8 GEMM curve",
          hw.gemmFp8.points.empty());
      break;
    case GemmRate::F32:
      eff = hw.gemmF32.points.empty() ? hw.gemm.at(w.cube) : hw.gemmF32.at(w.cube);
      say(hw.gemmF32.points.empty() ? "bf16 GEMM curve (no f32 GEMM timing)" : "calibrated f32 GEMM curve",
          hw.gemmF32.points.empty());
      break;
    case GemmRate::Bf16F32Out:
      if (tokenGrid(w, hw, eff)) {
        say("calibrated token-row GEMM grid", false);
        break;
      }
      eff = hw.gemmF32Out.points.empty() ? hw.gemm.at(w.cube) : hw.gemmF32Out.at(w.cube);
      say(hw.gemmF32Out.points.empty() ? "bf16 GEMM curve (no f32-output GEMM timing)"
                                       : "calibrated bf16 -> f32 GEMM curve",
          hw.gemmF32Out.points.empty());
      break;
    case GemmRate::Bf16:
      if (tokenGrid(w, hw, eff)) {
        say("calibrated token-row GEMM grid", false);
        break;
      }
      eff = hw.gemm.at(w.cube);
      say("calibrated bf16 GEMM curve", false);
      break;
    }
    // A skinny product is bound by its bytes instead. A product run padded
    // (GemmStaging.h) adds its row-by-row copies, priced at the calibrated
    // figure of the nearest such copy, Concat's pieces.
    auto classRate = [&](const char *cls) {
      auto it = hw.classBandwidth.find(cls);
      return it != hw.classBandwidth.end() ? it->second : hw.hbmBandwidth;
    };
    double staging = w.stagingBytes > 0 ? w.stagingBytes / classRate("concat") : 0;
    // A bias's gradient summed beside its weight gradient (the CUDA
    // backend's columnSumsBf16 pass over B): at the column sums' own
    // calibrated figure, Reduce's.
    double sums = w.columnSumBytes > 0 ? w.columnSumBytes / classRate("reduce") : 0;
    return std::max(w.flops / (peak * eff), w.bytes / hw.hbmBandwidth) + staging + sums;
  }
  case InstrKind::Attention: {
    // The table of the nearest calibrated head dim, else the default one.
    const EfficiencyCurve *curve = &hw.attention;
    double factor = hw.attentionBackwardFactor;
    int nearest = 0;
    for (const auto &[d, tables] : hw.attentionByHeadDim)
      if (!nearest || std::abs(d - w.headDim) < std::abs(nearest - w.headDim)) {
        nearest = d;
        curve = &tables.efficiency;
        factor = tables.backwardFactor;
      }
    double eff = curve->at(std::max(1.0, w.seq));
    if (w.backward)
      eff *= factor;
    if (nearest)
      say("calibrated attention curve, head dim " + std::to_string(nearest), false);
    else
      say("calibrated attention curve (no per-head-dim tables)", w.headDim != 64);
    return std::max(w.flops / (hw.peakBf16 * eff), w.bytes / hw.hbmBandwidth);
  }
  case InstrKind::MemoryBound:
    break;
  }
  auto it = hw.classBandwidth.find(w.cls);
  // A profile calibrated before global_sum_squares existed prices it at
  // sum_squares' rate: every slice runs SumSquares' kernel body. One
  // calibrated before add_rms_norm prices it at rms_norm's: the same kernel
  // with the add inside.
  const char *aliasOf = w.cls == "global_sum_squares" ? "sum_squares"
                        : w.cls == "add_rms_norm"     ? "rms_norm"
                                                      : nullptr;
  bool alias = it == hw.classBandwidth.end() && aliasOf;
  if (alias)
    it = hw.classBandwidth.find(aliasOf);
  bool own = it != hw.classBandwidth.end();
  double bw = own ? it->second : hw.hbmBandwidth;
  say(own ? std::string("calibrated ") + (alias ? std::string(aliasOf) + " " : "") + gbps(bw)
          : "copy bandwidth " + gbps(bw),
      !own);
  return w.bytes / bw + (w.sharesLaunch ? 0.0 : hw.kernelOverhead);
}

ProgramTime priceProgram(const std::vector<InstrWork> &work, const HardwareProfile &hw) {
  ProgramTime t;
  for (const InstrWork &w : work) {
    ClassTime &c = t.classes[w.cls];
    bool fallback = false;
    std::string rate;
    double s = instrSeconds(w, hw, &rate, &fallback);
    c.fallback = c.fallback || fallback;
    // A class priced at more than one rate (GEMMs on and off the grid) says so.
    if (c.rate.empty())
      c.rate = rate;
    else if (c.rate.find(rate) == std::string::npos)
      c.rate += "; " + rate;
    ++c.instrs;
    c.seconds += s;
    c.bytes += w.bytes;
    c.flops += w.flops;
    t.seconds += s;
    if (w.cls == "adamw" || w.cls == "sum_squares" || w.cls == "global_sum_squares")
      t.optimizer += s;
  }
  return t;
}

std::vector<std::string> ProgramTime::fallbacks() const {
  std::vector<std::string> out;
  for (const auto &[cls, c] : classes)
    if (c.fallback)
      out.push_back(cls);
  return out;
}

} // namespace loom::planner
