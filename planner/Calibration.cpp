//===- Calibration.cpp - What `loom calibrate` measures -------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Measures what the planner's hardware profile claims, through loom's own
// runtime (the kernels loom will actually run), and writes a profile:
//   - GEMM efficiency by size: bf16 [n, n] x [n, n] products, FLOPs
//     2 n^3 over the time, as a fraction of the base profile's bf16 peak;
//   - attention efficiency by sequence length, forward and backward, with
//     the planner's FLOP convention (CostModel.cpp): forward 4 B H T^2 D,
//     backward 10 B H T^2 D, halved for the causal mask;
//   - HBM: a device-to-device copy, bytes read + written over the time, as
//     a fraction of the base profile's bandwidth;
//   - kernel overhead: the time per instruction of a program of tiny adds
//     (with the CUDA backend's graph replay, what one launch costs);
//   - bf16 -> f32 and f32 GEMM curves, as the bf16 one;
//   - per memory-bound opcode class (adamw, embedding_grad, norms, ...;
//     ProgramCost.h), one representative instruction large enough to be
//     bound by memory: its effective bandwidth, the bytes the planner
//     charges it over its time less one launch. No figure is fitted to a
//     training step: the planner prices steps from these kernel timings.
// Each figure is timed as a program of several identical instructions, run
// once to warm up (and, on the GPU, to capture the graph) and then `reps`
// times; run() waits for the device, so wall-clock time is device time.
// Collectives need several GPUs; with one, the links (and memory capacity,
// spec peaks) stay as in the base profile, and the output says so.
//===----------------------------------------------------------------------===//
#include "planner/Calibration.h"
#include "loom/io/Json.h"
#include "loom/runtime/Executor.h"
#include "loom/runtime/Fp8.h"
#include "planner/HardwareProfile.h"
#include "planner/ProgramCost.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

namespace loom::planner {
namespace {

using rt::BufferKind;
using rt::DType;
using rt::OpCode;

/// Buffers laid out one after another in the arena (no reuse): calibration
/// programs are a handful of instructions.
struct CalibrationProgram {
  rt::Program p;
  // Integer inputs (token ids, targets) draw uniformly from [0, bound):
  // all-zero ids would gather one row and pile every gradient onto it.
  std::map<uint32_t, int64_t> idBound;
  uint32_t ids(std::vector<int64_t> shape, int64_t bound) {
    uint32_t id = add(DType::I64, std::move(shape), BufferKind::Input);
    idBound[id] = bound;
    return id;
  }
  uint32_t add(DType t, std::vector<int64_t> shape, BufferKind kind) {
    rt::BufferDesc b;
    b.dtype = t;
    b.shape = std::move(shape);
    b.kind = kind;
    b.bytes = uint64_t(b.numElements()) * rt::dtypeSize(t);
    b.offset = p.arenaBytes;
    p.arenaBytes += (std::max<uint64_t>(b.bytes, 1) + 255) / 256 * 256;
    p.buffers.push_back(b);
    uint32_t id = uint32_t(p.buffers.size() - 1);
    if (kind == BufferKind::Input) p.inputs.push_back(id);
    if (kind == BufferKind::Output) p.outputs.push_back(id);
    return id;
  }
  void instr(OpCode op, std::vector<uint32_t> in, std::vector<uint32_t> out,
             std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
    p.instrs.push_back(rt::Instr{op, std::move(in), std::move(out), std::move(ints), std::move(floats)});
  }
};

struct Timer {
  std::string backend;
  int reps;
  std::string device;

  /// Seconds per run of `p`, inputs filled with small random values
  /// (integer inputs below their bound in `idBound`).
  bool time(const rt::Program &p, double &seconds, std::string &err,
            const std::map<uint32_t, int64_t> &idBound = {}) {
    auto exec = rt::createExecutor(std::make_shared<rt::Program>(p), backend, 0, err);
    if (!exec)
      return false;
    device = exec->deviceName();
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const rt::BufferDesc &b = p.buffers[p.inputs[i]];
      std::vector<uint8_t> bytes(b.bytes, 0);
      for (int64_t k = 0; k < b.numElements(); ++k) {
        float v = dist(gen);
        if (b.dtype == DType::F32)
          std::memcpy(&bytes[size_t(k) * 4], &v, 4);
        else if (b.dtype == DType::BF16) {
          uint32_t u;
          std::memcpy(&u, &v, 4);
          uint16_t h = uint16_t(u >> 16); // truncation: any bf16 value will do
          std::memcpy(&bytes[size_t(k) * 2], &h, 2);
        } else if (b.dtype == DType::I64 && idBound.count(p.inputs[i])) {
          int64_t id = int64_t(gen() % uint64_t(idBound.at(p.inputs[i])));
          std::memcpy(&bytes[size_t(k) * 8], &id, 8);
        } else if (rt::isFp8(b.dtype)) {
          bytes[size_t(k)] = rt::floatToFp8(v * 100, b.dtype == DType::F8E5M2 ? rt::Fp8Format::E5M2
                                                                              : rt::Fp8Format::E4M3);
        }
      }
      if (!exec->setInput(i, bytes.data(), bytes.size(), err))
        return false;
    }
    if (!exec->run(err))
      return false;
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r)
      if (!exec->run(err))
        return false;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    return true;
  }
};

/// R products [n, n] x [n, n] in one program, operands of dtype `in`,
/// results of dtype `out`.
rt::Program typedGemmProgram(int64_t n, int copies, DType in, DType out) {
  CalibrationProgram c;
  uint32_t a = c.add(in, {n, n}, BufferKind::Input);
  uint32_t b = c.add(in, {n, n}, BufferKind::Input);
  for (int r = 0; r < copies; ++r)
    c.instr(OpCode::MatMul, {a, b},
            {c.add(out, {n, n}, r + 1 == copies ? BufferKind::Output : BufferKind::Temp)}, {0, 0});
  return c.p;
}
rt::Program gemmProgram(int64_t n, int copies) {
  return typedGemmProgram(n, copies, DType::BF16, DType::BF16);
}
/// bf16 operands, f32 results: the weight gradients autocast accumulates
/// in f32 (LOOM_CUDA_PROFILE's "matmul f32").
rt::Program f32OutGemmProgram(int64_t n, int copies) {
  return typedGemmProgram(n, copies, DType::BF16, DType::F32);
}
rt::Program f32GemmProgram(int64_t n, int copies) {
  return typedGemmProgram(n, copies, DType::F32, DType::F32);
}

/// A training step's products, which are not cubes: `rows` token rows
/// times a weight, a [rows, k] x [k, n] -> bf16 (forward and input
/// gradients), or the weight gradient, a [rows, m]^T x [rows, n] (the
/// tokens contracted) -> `out`.
rt::Program tokenGemmProgram(bool reduceRows, int64_t rows, int64_t d0, int64_t d1, DType out,
                             int copies) {
  CalibrationProgram c;
  uint32_t a = c.add(DType::BF16, {rows, d0}, BufferKind::Input);
  uint32_t b = c.add(DType::BF16, reduceRows ? std::vector<int64_t>{rows, d1} : std::vector<int64_t>{d0, d1},
                     BufferKind::Input);
  std::vector<int64_t> shape = reduceRows ? std::vector<int64_t>{d0, d1} : std::vector<int64_t>{rows, d1};
  for (int r = 0; r < copies; ++r)
    c.instr(OpCode::MatMul, {a, b}, {c.add(out, shape, r + 1 == copies ? BufferKind::Output : BufferKind::Temp)},
            {reduceRows ? 1 : 0, 0});
  return c.p;
}

/// R fp8 products as loom's fp8 training runs them: e4m3 a [n, n] times
/// b [n, n]^T (K-major, the layout cuBLASLt takes), one scale per tensor,
/// bf16 results.
rt::Program fp8GemmProgram(int64_t n, int copies) {
  CalibrationProgram c;
  uint32_t a = c.add(DType::F8E4M3, {n, n}, BufferKind::Input);
  uint32_t b = c.add(DType::F8E4M3, {n, n}, BufferKind::Input);
  uint32_t da = c.add(DType::F32, {1, 1}, BufferKind::Input);
  uint32_t db = c.add(DType::F32, {1, 1}, BufferKind::Input);
  for (int r = 0; r < copies; ++r)
    c.instr(OpCode::ScaledMatMul, {a, b, da, db},
            {c.add(DType::BF16, {n, n}, r + 1 == copies ? BufferKind::Output : BufferKind::Temp)},
            {0, 1, 0});
  return c.p;
}

/// Causal GQA attention, forward or backward, as autocast training runs it
/// after codegen folds its casts: q, k, v, o, dy and the gradients in bf16
/// storage (bf16_operands = 1), lse in f32; B sequences, 32 query heads, 8
/// kv heads of `headDim`.
rt::Program attentionProgram(int64_t B, int64_t T, bool backward, int64_t headDim = 64) {
  CalibrationProgram c;
  std::vector<int64_t> qs = {B, 32, T, headDim}, ks = {B, 8, T, headDim}, rows = {B, 32, T};
  uint32_t q = c.add(DType::BF16, qs, BufferKind::Input), k = c.add(DType::BF16, ks, BufferKind::Input);
  uint32_t v = c.add(DType::BF16, ks, BufferKind::Input);
  if (!backward) {
    c.instr(OpCode::Attention, {q, k, v},
            {c.add(DType::BF16, qs, BufferKind::Output), c.add(DType::F32, rows, BufferKind::Output)},
            {1, 1}, {0.125});
  } else {
    // The forward's o and lse as inputs: the backward is timed alone, and
    // its cost does not depend on their values.
    uint32_t o = c.add(DType::BF16, qs, BufferKind::Input);
    uint32_t lse = c.add(DType::F32, rows, BufferKind::Input);
    uint32_t dy = c.add(DType::BF16, qs, BufferKind::Input);
    c.instr(OpCode::AttentionGrad, {q, k, v, o, lse, dy},
            {c.add(DType::BF16, qs, BufferKind::Output), c.add(DType::BF16, ks, BufferKind::Output),
             c.add(DType::BF16, ks, BufferKind::Output)},
            {1, 1}, {0.125});
  }
  return c.p;
}

rt::Program copyProgram(int64_t elements) {
  CalibrationProgram c;
  uint32_t x = c.add(DType::F32, {elements}, BufferKind::Input);
  c.instr(OpCode::Cast, {x}, {c.add(DType::F32, {elements}, BufferKind::Output)});
  return c.p;
}

rt::Program tinyAddsProgram(int count) {
  CalibrationProgram c;
  uint32_t x = c.add(DType::F32, {1}, BufferKind::Input);
  uint32_t prev = x;
  for (int i = 0; i < count; ++i) {
    uint32_t y = c.add(DType::F32, {1}, i + 1 == count ? BufferKind::Output : BufferKind::Temp);
    c.instr(OpCode::Add, {prev, x}, {y});
    prev = y;
  }
  return c.p;
}

/// One representative instruction of a memory-bound opcode class,
/// `copies` times (each writing its own results), at a size where it is
/// bound by memory: R = 8192 token rows of width D = 4096 (the 8B layer's
/// activations, 32M elements), a 128256-row vocabulary for the embedding
/// gradient (whose cost is its zeroed [V, D] result), 32768 for the
/// loss. Each operand takes the dtype the bf16 training step gives it:
/// bf16 storage in the slots rt::bf16StorageAllowed opens to it, f32 in
/// the others (parameters, moments, gradients, norm statistics).
bool memoryClassProgram(const std::string &cls, bool quick, int copies, CalibrationProgram &c) {
  const int64_t R = quick ? 32 : 8192, D = quick ? 64 : 4096, N = quick ? 2048 : (int64_t(1) << 26);
  const int64_t V = quick ? 96 : 128256, VLoss = quick ? 96 : 32768;
  const int64_t H = quick ? 2 : 16, T = quick ? 16 : 2048, Dh = quick ? 16 : 128, Bt = quick ? 1 : 4;
  auto in = [&](DType t, std::vector<int64_t> shape) { return c.add(t, std::move(shape), BufferKind::Input); };
  using Shape = std::vector<int64_t>;
  auto emit = [&](OpCode op, std::vector<uint32_t> ins, std::vector<std::pair<DType, Shape>> outs,
                  std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
    for (int r = 0; r < copies; ++r) {
      std::vector<uint32_t> o;
      for (auto &[t, shape] : outs)
        o.push_back(c.add(t, shape, r + 1 == copies ? BufferKind::Output : BufferKind::Temp));
      c.instr(op, ins, o, ints, floats);
    }
  };
  const DType F = DType::F32, B = DType::BF16;
  const Shape rd = {R, D}, rope = {Bt, H, T, Dh};
  if (cls == "adamw") {
    uint32_t p = in(F, {N}), g = in(F, {N}), m = in(F, {N}), v = in(F, {N});
    emit(OpCode::AdamW, {p, g, m, v, in(F, {}), in(F, {})}, {{F, {N}}, {F, {N}}, {F, {N}}}, {},
         {0.9, 0.95, 1e-8, 0.1});
  } else if (cls == "sum_squares") {
    emit(OpCode::SumSquares, {in(F, {N})}, {{F, {}}});
  } else if (cls == "global_sum_squares") {
    // The gradient norm's form: a few large tensors and many small ones.
    emit(OpCode::GlobalSumSquares,
         {in(F, {N / 2}), in(F, {N / 4}), in(F, {N / 8}), in(F, {N / 16}), in(F, {N / 64}),
          in(F, {N / 64}), in(F, {N / 256}), in(F, {N / 256})},
         {{F, {}}});
  } else if (cls == "embedding") {
    emit(OpCode::Embedding, {in(F, {V, D}), c.ids({R}, V)}, {{F, rd}});
  } else if (cls == "embedding_grad") {
    emit(OpCode::EmbeddingGrad, {in(F, rd), c.ids({R}, V)}, {{F, {V, D}}});
  } else if (cls == "cross_entropy") {
    emit(OpCode::CrossEntropy, {in(F, {R, VLoss}), c.ids({R}, VLoss)}, {{F, {}}});
  } else if (cls == "cross_entropy_grad") {
    emit(OpCode::CrossEntropyGrad, {in(F, {R, VLoss}), c.ids({R}, VLoss), in(F, {})}, {{F, {R, VLoss}}});
  } else if (cls == "rms_norm") {
    emit(OpCode::RmsNorm, {in(B, rd), in(F, {D})}, {{B, rd}}, {}, {1e-5});
  } else if (cls == "add_rms_norm") { // the bf16 step's: f32 residual, bf16 sublayer and norm
    emit(OpCode::AddRmsNorm, {in(F, rd), in(B, rd), in(F, {D})}, {{F, rd}, {B, rd}}, {}, {1e-5});
  } else if (cls == "rms_norm_grad") {
    emit(OpCode::RmsNormGrad, {in(F, rd), in(F, {D}), in(B, rd)}, {{B, rd}, {F, {D}}}, {}, {1e-5});
  } else if (cls == "layer_norm") {
    emit(OpCode::LayerNorm, {in(B, rd), in(F, {D}), in(F, {D})}, {{B, rd}}, {}, {1e-5});
  } else if (cls == "layer_norm_grad") {
    emit(OpCode::LayerNormGrad, {in(F, rd), in(F, {D}), in(B, rd)}, {{B, rd}, {F, {D}}, {F, {D}}}, {},
         {1e-5});
  } else if (cls == "rotary" || cls == "rotary_grad") {
    emit(cls == "rotary" ? OpCode::Rotary : OpCode::RotaryGrad, {in(B, rope), in(F, {T, Dh}), in(F, {T, Dh})},
         {{B, rope}});
  } else if (cls == "swiglu") {
    emit(OpCode::SwiGlu, {in(B, rd), in(B, rd)}, {{B, rd}});
  } else if (cls == "swiglu_grad") {
    emit(OpCode::SwiGluGrad, {in(B, rd), in(B, rd), in(B, rd)}, {{B, rd}, {B, rd}});
  } else if (cls == "gelu_tanh" || cls == "gelu_erf") {
    emit(cls == "gelu_tanh" ? OpCode::GeluTanh : OpCode::GeluErf, {in(B, rd)}, {{B, rd}});
  } else if (cls == "activation_grad") {
    emit(OpCode::ActivationGrad, {in(B, rd), in(B, rd)}, {{B, rd}}, {2}); // gelu (tanh)
  } else if (cls == "add" || cls == "mul") {
    emit(cls == "add" ? OpCode::Add : OpCode::Mul, {in(B, rd), in(B, rd)}, {{B, rd}});
  } else if (cls == "cast") {
    emit(OpCode::Cast, {in(F, rd)}, {{B, rd}}); // autocast's f32 -> bf16
  } else if (cls == "transpose") {
    // [B, T, H, Dh] -> [B, H, T, Dh]: the head split before attention.
    emit(OpCode::Transpose, {in(B, {Bt, T, H, Dh})}, {{B, rope}}, {0, 2, 1, 3});
  } else if (cls == "split" || cls == "concat") {
    // A fused qkv projection's output into q, k, v and back (GPT-2's c_attn).
    Shape whole = {R, 3 * D};
    if (cls == "split")
      emit(OpCode::Split, {in(B, whole)}, {{B, rd}, {B, rd}, {B, rd}}, {1});
    else
      emit(OpCode::Concat, {in(B, rd), in(B, rd), in(B, rd)}, {{B, whole}}, {1});
  } else if (cls == "reduce") {
    emit(OpCode::Reduce, {in(B, rd)}, {{F, {1, D}}}, {0, 0}); // a bias gradient
  } else if (cls == "fp8_scale") {
    emit(OpCode::Fp8Scale, {in(B, rd)}, {{F, {1, 1}}, {F, {1, 1}}}, {0, 0});
  } else if (cls == "fp8_cast") {
    emit(OpCode::Fp8Cast, {in(B, rd), in(F, {1, 1})}, {{DType::F8E4M3, rd}, {DType::F8E4M3, {D, R}}}, {2});
  } else {
    return false;
  }
  return true;
}

/// A fraction of peak for the profile: four significant digits, inside the
/// (0, 1] the profile format requires (a tiny measurement stays positive).
double fraction(double y) {
  y = std::clamp(y, 1e-9, 1.0);
  double scale = std::pow(10.0, 3 - std::floor(std::log10(y)));
  return std::round(y * scale) / scale;
}

json::Value point(double x, double y) {
  json::Value p = json::Value::array();
  p.push(x);
  p.push(fraction(y));
  return p;
}

/// Replaces member `path` ("a.b") of `v`, creating objects on the way.
void setPath(json::Value &v, const std::string &path, json::Value x) {
  size_t dot = path.find('.');
  if (dot == std::string::npos) {
    v.set(path, std::move(x));
    return;
  }
  std::string head = path.substr(0, dot);
  json::Value child = v.get(head) ? *v.get(head) : json::Value::object();
  setPath(child, path.substr(dot + 1), std::move(x));
  v.set(head, std::move(child));
}

double numberAt(const json::Value &v, const std::string &path) {
  const json::Value *cur = &v;
  size_t start = 0;
  while (cur && start <= path.size()) {
    size_t dot = path.find('.', start);
    cur = cur->get(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur && cur->isNumber() ? cur->number() : 0;
}

/// The HBM copy, the launch overhead and each memory-bound opcode class.
struct MemoryBound {
  double copyBytesPerS = 0, overheadS = 0;
  json::Value classGbps = json::Value::object();
};

constexpr int kTinyAdds = 256;

bool measureMemoryBound(Timer &timer, bool quick, double hbmSpec, MemoryBound &m,
                        std::string &err) {
  double copyS = 0, addS = 0;
  int64_t copyElems = quick ? (1 << 16) : (int64_t(1) << 28);
  if (!timer.time(copyProgram(copyElems), copyS, err) ||
      !timer.time(tinyAddsProgram(kTinyAdds), addS, err)) {
    err = "copy: " + err;
    return false;
  }
  m.copyBytesPerS = 2.0 * 4.0 * double(copyElems) / copyS;
  m.overheadS = addS / kTinyAdds;
  std::printf("hbm copy: %.0f GB/s (%.3f of %.0f)\nkernel overhead: %.2f us per instruction\n",
              m.copyBytesPerS / 1e9, m.copyBytesPerS / hbmSpec, hbmSpec / 1e9, m.overheadS * 1e6);
  // Each memory-bound class at its own effective bandwidth: the bytes
  // ProgramCost charges its instruction over the time of one instruction
  // less one launch, so that the planner's bytes / bandwidth + launch
  // gives back the measured time of this instance.
  for (const std::string &cls : calibratedMemoryClasses()) {
    CalibrationProgram c;
    int copies = quick ? 2 : 4;
    if (!memoryClassProgram(cls, quick, copies, c)) {
      err = "no representative program for opcode class '" + cls + "'";
      return false;
    }
    double t = 0;
    if (!timer.time(c.p, t, err, c.idBound)) {
      // A kernel the backend lacks in this form: the class keeps the copy
      // bandwidth (the planner notes it), the rest of the profile stands.
      std::printf("memory-bound %-20s not measured: %s\n", cls.c_str(), err.c_str());
      err.clear();
      continue;
    }
    double per = t / copies, bytes = instrBytes(c.p, c.p.instrs[0]);
    // A launch longer than the whole instruction is a noisy overhead
    // figure: keep at least a tenth of the time for the bytes.
    double busy = std::max(per - m.overheadS, 0.1 * per);
    double classGbps = bytes / busy / 1e9;
    double scale = std::pow(10.0, 3 - std::floor(std::log10(classGbps))); // four digits, never 0
    m.classGbps.set(cls, json::Value(std::round(classGbps * scale) / scale));
    std::printf("memory-bound %-20s %8.0f GB/s  (%.3f ms per instruction, %.1f MiB)\n", cls.c_str(),
                classGbps, per * 1e3, bytes / (1 << 20));
  }
  return true;
}

} // namespace

bool calibrateProfile(const CalibrationOptions &o, std::string &out, std::string &err) {
  auto fail = [&](const std::string &msg) {
    err = msg;
    return false;
  };
  bool attentionOnly = o.attentionOnly;
  const std::string &base = o.base;
  std::string text = builtinProfileText(base);
  if (text.empty()) {
    std::ifstream in(base);
    if (!in)
      return fail("base profile '" + base + "' is neither h100, h200 nor a readable file");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  HardwareProfile check;
  json::Value profile;
  if (!parseProfile(text, base, check, err) || !json::parse(text, profile, err))
    return false;
  double peak = numberAt(profile, "gemm.peak_tflops.bf16") * 1e12;
  double hbmSpec = numberAt(profile, "hbm.bandwidth_gbps") * 1e9;

  bool quick = o.quick;
  Timer timer{o.backend, std::max(1, o.reps), ""};
  if (o.memoryOnly) {
    MemoryBound mem;
    return measureMemoryBound(timer, quick, hbmSpec, mem, err);
  }
  auto measure = [&](const rt::Program &p, const std::string &what, double &s,
                     const std::map<uint32_t, int64_t> &idBound = {}) {
    if (timer.time(p, s, err, idBound))
      return true;
    err = what + ": " + err;
    return false;
  };

  int64_t batch = quick ? 1 : 4;
  std::vector<int64_t> seqs = quick ? std::vector<int64_t>{16, 32}
                                    : std::vector<int64_t>{512, 1024, 2048, 4096};
  // Head dims 64 (Llama-3.2-1B, GPT-2) and 128 (Qwen, Llama-3-8B): the
  // kernels reach different fractions of peak at each.
  json::Value byHeadDim = json::Value::object(), attn;
  double backwardFactor = 0;
  for (int64_t headDim : {int64_t(64), int64_t(128)}) {
    json::Value curve = json::Value::array();
    double ratioSum = 0;
    for (int64_t T : seqs) {
      // Causal: half of the 4 B H T^2 D products' FLOPs; the backward does 2.5x.
      double fwdFlops = 0.5 * 4.0 * double(batch) * 32 * double(T) * double(T) * double(headDim);
      double fwd = 0, bwd = 0;
      std::string what = "attention d=" + std::to_string(headDim) + " T=" + std::to_string(T);
      if (!measure(attentionProgram(batch, T, false, headDim), what, fwd) ||
          !measure(attentionProgram(batch, T, true, headDim), what + " backward", bwd))
        return false;
      double effF = fwdFlops / fwd / peak, effB = 2.5 * fwdFlops / bwd / peak;
      curve.push(point(double(T), effF));
      ratioSum += effB / effF;
      std::printf("attention B=%lld T=%5lld d=%lld: forward %.3f ms (%.4f of peak), backward %.3f ms "
                  "(%.4f), forward+backward %.3f ms, %.1f TFLOP/s\n",
                  (long long)batch, (long long)T, (long long)headDim, fwd * 1e3, effF, bwd * 1e3, effB,
                  (fwd + bwd) * 1e3, 3.5 * fwdFlops / (fwd + bwd) / 1e12);
    }
    double factor = std::round(ratioSum / double(seqs.size()) * 1e4) / 1e4;
    json::Value entry = json::Value::object();
    entry.set("efficiency_by_seq", curve);
    entry.set("backward_factor", json::Value(factor));
    byHeadDim.set(std::to_string(headDim), entry);
    if (headDim == 64) { // the default tables, as before (the IR cost model reads them)
      attn = curve;
      backwardFactor = factor;
    }
  }
  if (attentionOnly)
    return true;
  json::Value measured = json::Value::array();
  std::vector<int64_t> sizes = quick ? std::vector<int64_t>{16, 32}
                                     : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096, 8192};
  // n^3 products of one kind, as fractions of `peakFlops`; about `work`
  // FLOPs per run (~ms of work).
  auto gemmCurve = [&](rt::Program (*program)(int64_t, int), const char *label, double peakFlops,
                       double work, json::Value &curve) {
    curve = json::Value::array();
    for (int64_t n : sizes) {
      double flops = 2.0 * double(n) * double(n) * double(n), s = 0;
      int copies = int(std::clamp(work / flops, 1.0, 64.0));
      if (!measure(program(n, copies), std::string(label) + " gemm " + std::to_string(n), s))
        return false;
      double eff = flops * copies / s / peakFlops;
      curve.push(point(double(n), eff));
      std::printf("gemm %-4s %5lld^3: %8.1f TFLOP/s  (%.3f of %.0f)\n", label, (long long)n,
                  flops * copies / s / 1e12, eff, peakFlops / 1e12);
    }
    return true;
  };
  // fp8 GEMMs (issue 17): what the planner costs fp8 plans with, in place
  // of the assumed ratio to bf16.
  double peakFp8 = numberAt(profile, "gemm.peak_tflops.fp8") * 1e12;
  json::Value gemm, gemmFp8, gemmF32Out, gemmF32;
  if (!gemmCurve(gemmProgram, "bf16", peak, 4e9, gemm) ||
      !gemmCurve(f32OutGemmProgram, "bf16->f32", peak, 4e9, gemmF32Out) ||
      !gemmCurve(f32GemmProgram, "f32", peak, 1e9, gemmF32) ||
      !gemmCurve(fp8GemmProgram, "fp8", peakFp8, 8e9, gemmFp8))
    return false;
  // The products of training at their own shapes, T token rows against
  // weights of every pair of widths in `dims`: the cube curve missed the
  // 8B layer's GEMMs by 13% (docs/planner.md).
  const int64_t tokens = quick ? 64 : 8192;
  std::vector<int64_t> dims = quick ? std::vector<int64_t>{16, 32}
                                    : std::vector<int64_t>{1024, 2048, 4096, 8192, 16384};
  json::Value grid = json::Value::object();
  struct Family { const char *key, *label; bool reduceRows; DType out; };
  for (Family f : {Family{"rows_bf16", "[T, k] x [k, n] -> bf16", false, DType::BF16},
                   Family{"reduce_bf16", "[T, m]^T x [T, n] -> bf16", true, DType::BF16},
                   Family{"reduce_f32", "[T, m]^T x [T, n] -> f32", true, DType::F32}}) {
    json::Value table = json::Value::array();
    for (int64_t d0 : dims) {
      json::Value row = json::Value::array();
      std::printf("gemm %-26s T=%lld %6lld x n:", f.label, (long long)tokens, (long long)d0);
      for (int64_t d1 : dims) {
        double flops = 2.0 * double(tokens) * double(d0) * double(d1), t = 0;
        int copies = int(std::clamp(4e9 / flops, 1.0, 64.0));
        if (!measure(tokenGemmProgram(f.reduceRows, tokens, d0, d1, f.out, copies),
                     std::string("gemm ") + f.key + " " + std::to_string(d0) + "x" + std::to_string(d1), t))
          return false;
        double eff = flops * copies / t / peak;
        row.push(json::Value(fraction(eff)));
        std::printf(" %.3f", eff);
      }
      std::printf("\n");
      table.push(row);
    }
    grid.set(f.key, table);
  }
  {
    json::Value d = json::Value::array();
    for (int64_t x : dims) d.push(x);
    grid.set("tokens", tokens);
    grid.set("dims", d);
  }
  MemoryBound mem;
  if (!measureMemoryBound(timer, quick, hbmSpec, mem, err))
    return false;
  double bw = mem.copyBytesPerS, addS = mem.overheadS * kTinyAdds;
  json::Value classBw = mem.classGbps;

  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const json::Value *baseName = profile.get("name");
  std::string name = !o.name.empty() ? o.name : (baseName ? baseName->str() : base) + "+calibrated";
  profile.set("name", name);
  profile.set("source", "loom calibrate on " + timer.device + " (" + date + ", backend " +
                            timer.backend + (quick ? ", --quick: not a measurement" : "") +
                            "): GEMMs, attention, HBM copy, each memory-bound opcode class and launch overhead measured through "
                            "loom's runtime; links, memory and spec peaks from base profile '" +
                            base + "' (one GPU: no collective measured)");
  setPath(profile, "gemm.efficiency_by_min_dim", gemm);
  setPath(profile, "gemm.fp8_efficiency_by_min_dim", gemmFp8);
  setPath(profile, "gemm.f32_out_efficiency_by_min_dim", gemmF32Out);
  setPath(profile, "gemm.f32_efficiency_by_min_dim", gemmF32);
  setPath(profile, "gemm.token_grid", grid);
  setPath(profile, "hbm.bandwidth_gbps_by_class", classBw);
  setPath(profile, "attention.efficiency_by_seq", attn);
  setPath(profile, "attention.backward_factor", json::Value(backwardFactor));
  setPath(profile, "attention.by_head_dim", byHeadDim);
  setPath(profile, "hbm.achieved_fraction", json::Value(fraction(bw / hbmSpec)));
  setPath(profile, "kernel_overhead_us", json::Value(std::round(addS / kTinyAdds * 1e8) / 100));
  for (const char *m : {"gemm.efficiency_by_min_dim: bf16 n^3 products through loom's GEMMs (cuBLASLt)",
                        "gemm.fp8_efficiency_by_min_dim: e4m3 n^3 products (tensorwise scales, bf16 out) through loom's scaled GEMMs (cuBLASLt), of the fp8 peak; the planner uses it instead of gemm.fp8_efficiency_ratio",
                        "attention.efficiency_by_seq, attention.backward_factor: loom's attention kernels under autocast (bf16 operands), causal, B=4, 32/8 heads of 64",
                        "attention.by_head_dim: the same with heads of 64 and of 128 (the planner's program pricing takes the entry of the nearest head dim)",
                        "gemm.f32_out_efficiency_by_min_dim, gemm.f32_efficiency_by_min_dim: bf16 x bf16 -> f32 and f32 x f32 -> f32 n^3 products through loom's GEMMs, of the bf16 peak",
                        "gemm.token_grid: bf16 products of T token rows as training runs them, fractions of the bf16 peak: rows_bf16[i][j] = [T, dims[i]] x [dims[i], dims[j]] -> bf16; reduce_bf16/reduce_f32[i][j] = [T, dims[i]]^T x [T, dims[j]] (weight gradients) -> bf16/f32",
                        "hbm.achieved_fraction: a device-to-device copy through loom's runtime",
                        "hbm.bandwidth_gbps_by_class: per memory-bound opcode class, one representative instruction (8192 x 4096 activations, bf16 where autocast stores bf16; AdamW of 64M parameters; a 128256-row embedding gradient; a 32768-column loss), bytes moved (operands read once, results written once; an embedding only its gathered rows) over its time less one launch",
                        "kernel_overhead_us: per instruction, 256 tiny adds in one program"})
    measured.push(json::Value(std::string(m)));
  json::Value prov = json::Value::object();
  prov.set("measured_by_loom_calibrate", measured);
  if (const json::Value *old = profile.get("provenance"))
    prov.set("base_profile_provenance", *old);
  profile.set("provenance", prov);

  // The result must load as a profile before it replaces anything.
  out = profile.dump(2) + "\n";
  HardwareProfile parsed;
  if (!parseProfile(out, o.outputName, parsed, err))
    return fail("the calibrated profile does not parse: " + err);
  return true;
}

} // namespace loom::planner
