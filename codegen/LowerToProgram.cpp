//===- LowerToProgram.cpp - loom IR to a runtime program ------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "codegen/LowerToProgram.h"
#include "codegen/ArenaPlanner.h"
#include "codegen/FoldBiasGradients.h"
#include "codegen/JoinSiblingInputGradients.h"
#include "codegen/FoldCasts.h"
#include "codegen/FoldNormGradRounding.h"
#include "codegen/FoldWeightAmax.h"
#include "codegen/FoldWeightRounding.h"
#include "loom/runtime/RoundedCopies.h"
#include "codegen/FuseFp8Amax.h"
#include "codegen/ReshapeViews.h"
#include "ir/LoomOps.h"
#include "ir/Sharding.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstdlib>
#include <cstring>
#include <optional>

using namespace mlir;

namespace loom {
namespace {

constexpr uint64_t kAlignment = 64;

/// The A/B switches of codegen's folds: on unless the variable is "0".
bool switchedOn(const char *env) {
  const char *v = std::getenv(env);
  return !v || std::string(v) != "0";
}

bool dtypeOf(Type t, rt::DType &out) {
  if (t.isF32()) out = rt::DType::F32;
  else if (t.isF64()) out = rt::DType::F64;
  else if (t.isBF16()) out = rt::DType::BF16;
  else if (t.isInteger(64)) out = rt::DType::I64;
  else if (t.isInteger(32)) out = rt::DType::I32;
  else if (t.isInteger(1)) out = rt::DType::Bool;
  else if (isa<Float8E4M3FNType>(t)) out = rt::DType::F8E4M3;
  else if (isa<Float8E5M2Type>(t)) out = rt::DType::F8E5M2;
  else return false;
  return true;
}

std::string opName(Operation *op) {
  std::string s = op->getName().getStringRef().str();
  if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
    s += " ('" + loc.getName().str() + "')";
  return s;
}

/// The attention opcodes' ints: [causal], plus a 1 when every operand that
/// enters a product (q, k, v, and dy for the gradient) was widened from bf16
/// (autocast's rounding), which lets a backend use bf16 tensor cores
/// (Program.h), plus the sliding window when there is one, plus a 1 after
/// the window (0 or not) for tokens-major operands (AttentionLayout.h). The
/// gradient's o and lse only enter f32 row statistics.
std::vector<int64_t> attentionInts(ValueRange products, bool causal, int64_t window,
                                   AttentionLayout layout) {
  bool bf16 = llvm::all_of(products, [](Value v) {
    auto c = v.getDefiningOp<CastOp>();
    return c && cast<RankedTensorType>(c.getInput().getType()).getElementType().isBF16();
  });
  if (layout == AttentionLayout::tokens_major)
    return {causal, bf16, window, 1};
  if (window > 0)
    return {causal, bf16, window};
  if (bf16)
    return {causal, 1};
  return {causal};
}

/// The attention opcodes' floats: [scale], plus the softcap when there is one.
std::vector<double> attentionFloats(double scale, double softcap) {
  if (softcap > 0)
    return {scale, softcap};
  return {scale};
}

/// Lifetimes: inputs live from the start, outputs to the end; everything
/// else from its defining instruction to its last reader. An output that
/// updates an input in place takes the input's bytes instead.
void placeBuffers(rt::Program &p) {
  int64_t end = int64_t(p.instrs.size());
  std::vector<int64_t> first(p.buffers.size(), -1), last(p.buffers.size(), -1);
  // A view is not placed: its base stays live until the view's last read.
  std::vector<uint32_t> base = rt::viewBases(p);
  for (int64_t i = 0; i < end; ++i) {
    for (uint32_t id : p.instrs[i].out) {
      first[id] = i;
      // A column block's base lives from the first write of any block.
      if (base[id] != id && first[base[id]] < 0)
        first[base[id]] = i;
    }
    for (uint32_t id : p.instrs[i].in) last[id] = last[base[id]] = i;
  }
  // AdamW's rounded copies and amaxes keep their bytes from one run to the
  // next (a copy that is a column block: its base).
  for (const rt::RoundedCopy &c : rt::roundedCopies(p)) {
    first[c.copy] = first[base[c.copy]] = -1;
    last[c.copy] = last[base[c.copy]] = end;
  }
  std::vector<Lifetime> lifetimes;
  std::vector<uint32_t> placed;
  std::vector<bool> aliased(p.buffers.size(), false);
  for (const rt::InPlaceUpdate &u : p.updates) aliased[u.output] = true;
  for (const rt::BufferView &v : p.views) aliased[v.view] = true;
  for (uint32_t id = 0; id < p.buffers.size(); ++id) {
    rt::BufferDesc &d = p.buffers[id];
    if (d.kind == rt::BufferKind::Constant || aliased[id])
      continue;
    Lifetime l{d.bytes, d.kind == rt::BufferKind::Input ? -1 : first[id],
               d.kind == rt::BufferKind::Output || d.kind == rt::BufferKind::Input
                   ? end
                   : std::max(last[id], first[id])};
    lifetimes.push_back(l);
    placed.push_back(id);
  }
  std::vector<uint64_t> offsets = planArena(lifetimes, kAlignment, p.arenaBytes);
  for (size_t k = 0; k < placed.size(); ++k) p.buffers[placed[k]].offset = offsets[k];
  for (const rt::InPlaceUpdate &u : p.updates) p.buffers[u.output].offset = p.buffers[u.input].offset;
  for (const rt::BufferView &v : p.views)
    p.buffers[v.view].offset =
        p.buffers[v.base].offset +
        (v.column > 0 ? uint64_t(v.column) * rt::dtypeSize(p.buffers[v.view].dtype) : 0);
}

class ProgramBuilder {
public:
  explicit ProgramBuilder(rt::Program &p) : p(p) {}

  bool build(func::FuncOp func, std::string &err);

private:
  uint32_t newBuffer(Value v, rt::BufferKind kind, const std::string &name);
  bool constantBuffer(ConstantOp op, std::string &err);
  bool lowerOp(Operation *op, std::string &err);
  void planInPlaceUpdates(func::FuncOp func, func::ReturnOp ret);
  void emit(rt::OpCode code, Operation *op, std::vector<int64_t> ints = {},
            std::vector<double> floats = {});
  uint32_t idOf(Value v) { return ids.lookup(v); }
  bool emitCollective(rt::OpCode code, Operation *op, ReduceKind kind, int64_t dim,
                      ArrayAttr axes, std::string &err);

  void findWideningCasts(Block &body);
  void emitFp8Cast(Fp8CastOp c);

  rt::Program &p;
  llvm::DenseMap<Value, uint32_t> ids;
  // bf16 -> f32 casts feeding matmuls of two such casts: the matmul reads
  // the bf16 buffers (a bf16 GEMM with an f32 result). Maps the cast's
  // result to its bf16 input.
  llvm::DenseMap<Value, Value> widenedFrom;
  // fp8 casts already emitted as the second output of their partner's
  // instruction (emitFp8Cast).
  llvm::DenseSet<Operation *> pairedFp8Casts;
  // The casts above whose every reader is such a matmul: never emitted.
  llvm::DenseSet<Value> unemittedCasts;
  std::string lastError;
};

uint32_t ProgramBuilder::newBuffer(Value v, rt::BufferKind kind, const std::string &name) {
  auto t = cast<RankedTensorType>(v.getType());
  rt::BufferDesc d;
  d.name = name;
  dtypeOf(t.getElementType(), d.dtype);
  d.shape.assign(t.getShape().begin(), t.getShape().end());
  d.kind = kind;
  d.bytes = uint64_t(d.numElements()) * rt::dtypeSize(d.dtype);
  p.buffers.push_back(d);
  uint32_t id = uint32_t(p.buffers.size() - 1);
  if (v)
    ids[v] = id;
  return id;
}

bool ProgramBuilder::constantBuffer(ConstantOp op, std::string &err) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense) {
    err = "constant " + opName(op) + " is not dense";
    return false;
  }
  std::string name = op.getName() ? op.getName()->str() : "const";
  uint32_t id = newBuffer(op.getResult(), rt::BufferKind::Constant, name);
  rt::BufferDesc &d = p.buffers[id];
  uint64_t at = (p.constants.size() + kAlignment - 1) / kAlignment * kAlignment;
  p.constants.resize(at + d.bytes);
  d.offset = at;
  char *dst = reinterpret_cast<char *>(p.constants.data() + at);
  int64_t n = d.numElements();
  size_t es = rt::dtypeSize(d.dtype);
  if (d.dtype == rt::DType::Bool) {
    int64_t k = 0;
    for (bool b : dense.getValues<bool>()) dst[k++] = b;
  } else if (!dense.isSplat()) {
    ArrayRef<char> raw = dense.getRawData();
    std::memcpy(dst, raw.data(), d.bytes);
  } else {
    // A splat stores one element; replicate it.
    ArrayRef<char> raw = dense.getRawData();
    for (int64_t k = 0; k < n; ++k) std::memcpy(dst + k * es, raw.data(), es);
  }
  return true;
}

void ProgramBuilder::emit(rt::OpCode code, Operation *op, std::vector<int64_t> ints,
                          std::vector<double> floats) {
  rt::Instr in;
  in.op = code;
  for (Value v : op->getOperands()) in.in.push_back(idOf(v));
  for (Value r : op->getResults()) in.out.push_back(newBuffer(r, rt::BufferKind::Temp, ""));
  in.ints = std::move(ints);
  in.floats = std::move(floats);
  p.instrs.push_back(std::move(in));
}

/// Collectives carry the whole mesh (Program.h), so the runtime can form
/// groups without knowing the IR: [kind, dim, pp, R, S, cp, tp, axis bits].
bool ProgramBuilder::emitCollective(rt::OpCode code, Operation *op, ReduceKind kind, int64_t dim,
                                    ArrayAttr axes, std::string &err) {
  MeshAttr mesh = lookupMesh(op);
  if (!mesh) {
    err = opName(op) + " has no loom.mesh on its module";
    return false;
  }
  int64_t mask = 0;
  for (auto a : axes.getAsRange<MeshAxisAttr>()) mask |= int64_t(1) << int64_t(a.getValue());
  emit(code, op,
       {kind == ReduceKind::mean ? 1 : 0, dim, mesh.getPp(), mesh.getDpReplicate(),
        mesh.getDpShard(), mesh.getCp(), mesh.getTp(), mask});
  return true;
}

bool ProgramBuilder::lowerOp(Operation *op, std::string &err) {
  using rt::OpCode;
  bool ok = true;
  if (auto c = dyn_cast<CastOp>(op); c && unemittedCasts.count(c.getResult()))
    return true; // read in bf16 by the matmuls it feeds
  llvm::TypeSwitch<Operation *>(op)
      .Case<ConstantOp>([&](auto c) { ok = constantBuffer(c, err); })
      .Case<EmbeddingOp>([&](auto) { emit(OpCode::Embedding, op); })
      // A matmul_accumulate's addend is MatMul's third input with the
      // result's shape (the GEMM's C matrix, beta = 1). Widened factors
      // are read in bf16 (findWideningCasts).
      .Case<MatmulOp, MatmulAccumulateOp>([&](auto m) {
        emit(OpCode::MatMul, op, {m.getTransposeLhs(), m.getTransposeRhs()});
        if (widenedFrom.count(m.getLhs()) && widenedFrom.count(m.getRhs())) {
          rt::Instr &I = p.instrs.back();
          I.in[0] = idOf(widenedFrom.lookup(m.getLhs()));
          I.in[1] = idOf(widenedFrom.lookup(m.getRhs()));
        }
      })
      // The bias is MatMul's optional third input (its GEMM's epilogue).
      .Case<MatmulBiasOp>([&](MatmulBiasOp m) {
        emit(OpCode::MatMul, op, {m.getTransposeLhs(), m.getTransposeRhs()});
      })
      .Case<AddOp>([&](auto) { emit(OpCode::Add, op); })
      .Case<SubOp>([&](auto) { emit(OpCode::Sub, op); })
      .Case<MulOp>([&](auto) { emit(OpCode::Mul, op); })
      .Case<DivOp>([&](auto) { emit(OpCode::Div, op); })
      .Case<PowOp>([&](auto) { emit(OpCode::Pow, op); })
      .Case<MaxOp>([&](auto) { emit(OpCode::Max, op); })
      .Case<MinOp>([&](auto) { emit(OpCode::Min, op); })
      .Case<WhereOp>([&](auto) { emit(OpCode::Where, op); })
      .Case<NegOp>([&](auto) { emit(OpCode::Neg, op); })
      .Case<SqrtOp>([&](auto) { emit(OpCode::Sqrt, op); })
      .Case<RsqrtOp>([&](auto) { emit(OpCode::Rsqrt, op); })
      .Case<ReciprocalOp>([&](auto) { emit(OpCode::Reciprocal, op); })
      .Case<ExpOp>([&](auto) { emit(OpCode::Exp, op); })
      .Case<LogOp>([&](auto) { emit(OpCode::Log, op); })
      .Case<TanhOp>([&](auto) { emit(OpCode::Tanh, op); })
      .Case<SigmoidOp>([&](auto) { emit(OpCode::Sigmoid, op); })
      .Case<SiluOp>([&](auto) { emit(OpCode::Silu, op); })
      .Case<SwiGluOp>([&](auto) { emit(OpCode::SwiGlu, op); })
      .Case<CosOp>([&](auto) { emit(OpCode::Cos, op); })
      .Case<SinOp>([&](auto) { emit(OpCode::Sin, op); })
      .Case<ReluOp>([&](auto) { emit(OpCode::Relu, op); })
      .Case<ErfOp>([&](auto) { emit(OpCode::Erf, op); })
      .Case<SoftplusOp>([&](auto) { emit(OpCode::Softplus, op); })
      .Case<GeluOp>([&](GeluOp g) {
        emit(g.getApproximation() == GeluApproximation::tanh ? OpCode::GeluTanh
                                                             : OpCode::GeluErf,
             op);
      })
      // copy_to_parallel is the identity once autodiff has used it.
      .Case<CastOp, ReshapeOp, CopyToParallelOp>([&](auto) { emit(OpCode::Cast, op); })
      .Case<ReduceOp>([&](ReduceOp r) {
        std::vector<int64_t> ints = {int64_t(r.getKind())};
        for (int64_t a : r.getAxes()) ints.push_back(a);
        emit(OpCode::Reduce, op, ints);
      })
      .Case<SumSquaresOp>([&](auto) { emit(OpCode::SumSquares, op); })
      .Case<GlobalSumSquaresOp>([&](auto) { emit(OpCode::GlobalSumSquares, op); })
      .Case<SoftmaxOp>([&](SoftmaxOp s) { emit(OpCode::Softmax, op, {s.getAxis()}); })
      .Case<RmsNormOp>([&](RmsNormOp n) {
        emit(OpCode::RmsNorm, op, {}, {n.getEpsilon().convertToDouble()});
      })
      .Case<AddRmsNormOp>([&](AddRmsNormOp n) {
        emit(OpCode::AddRmsNorm, op, {}, {n.getEpsilon().convertToDouble()});
      })
      .Case<LayerNormOp>([&](LayerNormOp n) {
        emit(OpCode::LayerNorm, op, {}, {n.getEpsilon().convertToDouble()});
      })
      .Case<RotaryOp>([&](auto) { emit(OpCode::Rotary, op); })
      .Case<AttentionOp>([&](AttentionOp a) {
        emit(OpCode::Attention, op,
             attentionInts(a->getOperands(), a.getCausal(), a.getWindow(), a.getLayout()),
             attentionFloats(a.getScale().convertToDouble(), a.getSoftcap().convertToDouble()));
      })
      .Case<CrossEntropyOp>([&](auto) { emit(OpCode::CrossEntropy, op); })
      .Case<TransposeOp>([&](TransposeOp t) {
        emit(OpCode::Transpose, op, std::vector<int64_t>(t.getPermutation().begin(),
                                                         t.getPermutation().end()));
      })
      .Case<SliceOp>([&](SliceOp s) {
        std::vector<int64_t> ints;
        for (auto [start, step] : llvm::zip(s.getStarts(), s.getSteps())) {
          ints.push_back(start);
          ints.push_back(step);
        }
        emit(OpCode::Slice, op, ints);
      })
      .Case<ConcatOp>([&](ConcatOp c) { emit(OpCode::Concat, op, {c.getAxis()}); })
      .Case<SplitOp>([&](SplitOp s) { emit(OpCode::Split, op, {s.getAxis()}); })
      .Case<ExpandOp>([&](auto) { emit(OpCode::Expand, op); })
      // Training: backward kernels and the optimizer.
      .Case<EmbeddingGradOp>([&](auto) { emit(OpCode::EmbeddingGrad, op); })
      .Case<RmsNormGradOp>([&](RmsNormGradOp n) {
        emit(OpCode::RmsNormGrad, op, {}, {n.getEpsilon().convertToDouble()});
      })
      .Case<LayerNormGradOp>([&](LayerNormGradOp n) {
        emit(OpCode::LayerNormGrad, op, {}, {n.getEpsilon().convertToDouble()});
      })
      .Case<AttentionGradOp>([&](AttentionGradOp a) {
        SmallVector<Value> products = {a.getQuery(), a.getKey(), a.getValue(), a.getOutputGrad()};
        emit(OpCode::AttentionGrad, op,
             attentionInts(products, a.getCausal(), a.getWindow(), a.getLayout()),
             attentionFloats(a.getScale().convertToDouble(), a.getSoftcap().convertToDouble()));
      })
      .Case<RotaryGradOp>([&](auto) { emit(OpCode::RotaryGrad, op); })
      .Case<SwiGluGradOp>([&](auto) { emit(OpCode::SwiGluGrad, op); })
      .Case<ActivationGradOp>([&](ActivationGradOp a) {
        // The opcode's kind numbering is the enum's (0 silu, 1 gelu erf,
        // 2 gelu tanh, 3 relu); spelled out so a reordered enum cannot slip by.
        int64_t kind = a.getKind() == ActivationKind::silu        ? 0
                       : a.getKind() == ActivationKind::gelu_erf  ? 1
                       : a.getKind() == ActivationKind::gelu_tanh ? 2
                                                                  : 3;
        emit(OpCode::ActivationGrad, op, {kind});
      })
      .Case<SoftmaxGradOp>([&](SoftmaxGradOp s) { emit(OpCode::SoftmaxGrad, op, {s.getAxis()}); })
      .Case<CrossEntropyGradOp>([&](auto) { emit(OpCode::CrossEntropyGrad, op); })
      // The fused pair: CrossEntropyGrad with the loss as a second output.
      .Case<CrossEntropyWithGradOp>([&](auto) { emit(OpCode::CrossEntropyGrad, op); })
      .Case<SliceGradOp>([&](SliceGradOp s) {
        std::vector<int64_t> ints;
        for (auto [start, step] : llvm::zip(s.getStarts(), s.getSteps())) {
          ints.push_back(start);
          ints.push_back(step);
        }
        emit(OpCode::SliceGrad, op, ints);
      })
      // A grad_scale operand is the opcode's optional seventh input.
      .Case<AdamWOp>([&](AdamWOp a) {
        emit(OpCode::AdamW, op, {},
             {a.getBeta1().convertToDouble(), a.getBeta2().convertToDouble(),
              a.getEpsilon().convertToDouble(), a.getWeightDecay().convertToDouble()});
      })
      // fp8 training (issue 17): Program.h's opcodes 120-122.
      .Case<Fp8ScaleOp>([&](Fp8ScaleOp f) {
        emit(OpCode::Fp8Scale, op,
             {f.getFormat() == Fp8Format::e5m2 ? 1 : 0, f.getPowerOfTwo() ? 1 : 0});
      })
      .Case<Fp8CastOp>([&](Fp8CastOp c) { emitFp8Cast(c); })
      .Case<Fp8AmaxOp>([&](Fp8AmaxOp) { emit(OpCode::Fp8Amax, op); })
      .Case<ScaledMatmulOp>([&](ScaledMatmulOp m) {
        emit(OpCode::ScaledMatMul, op, {m.getTransposeLhs(), m.getTransposeRhs(), m.getFastAccum()});
      })
      .Case<AllReduceOp>([&](AllReduceOp c) {
        ok = emitCollective(rt::OpCode::AllReduce, op, c.getKind(), -1, c.getAxes(), err);
      })
      .Case<AllGatherOp>([&](AllGatherOp c) {
        ok = emitCollective(rt::OpCode::AllGather, op, ReduceKind::sum, int64_t(c.getDim()),
                            c.getAxes(), err);
      })
      .Case<ReduceScatterOp>([&](ReduceScatterOp c) {
        ok = emitCollective(rt::OpCode::ReduceScatter, op, c.getKind(), int64_t(c.getDim()),
                            c.getAxes(), err);
      })
      // Sequence, context and vocabulary parallelism (issue 18). The
      // permute's shift travels in the collectives' dim slot.
      .Case<CollectivePermuteOp>([&](CollectivePermuteOp c) {
        ok = emitCollective(rt::OpCode::CollectivePermute, op, ReduceKind::sum, c.getShift(),
                            c.getAxes(), err);
      })
      .Case<ShardSliceOp>([&](ShardSliceOp c) {
        ok = emitCollective(rt::OpCode::ShardSlice, op, ReduceKind::sum, int64_t(c.getDim()),
                            c.getAxes(), err);
      })
      .Case<VocabShardEmbeddingOp>(
          [&](VocabShardEmbeddingOp e) { emit(OpCode::VocabShardEmbedding, op, {e.getVocab()}); })
      .Case<VocabShardEmbeddingGradOp>([&](auto) { emit(OpCode::VocabShardEmbeddingGrad, op); })
      .Case<VocabShardCrossEntropyOp>([&](VocabShardCrossEntropyOp e) {
        emit(OpCode::VocabShardCrossEntropy, op, {e.getVocab()});
      })
      .Case<VocabShardCrossEntropyGradOp>(
          [&](auto) { emit(OpCode::VocabShardCrossEntropyGrad, op); })
      .Default([&](Operation *) {
        err = "codegen does not handle " + opName(op);
        ok = false;
      });
  return ok;
}

/// An fp8 cast and a cast of the same tensor with the same scale into the
/// other layout become one Fp8Cast writing both (layout 2: one pass over
/// the tensor for the copies its forward and backward GEMMs read), emitted
/// where the first of them stands; the second then emits nothing.
void ProgramBuilder::emitFp8Cast(Fp8CastOp c) {
  if (pairedFp8Casts.contains(c))
    return;
  Fp8CastOp partner;
  for (Operation *user : c.getInput().getUsers()) {
    auto other = dyn_cast<Fp8CastOp>(user);
    if (other && other != c && other.getScale() == c.getScale() &&
        other.getTranspose() != c.getTranspose() &&
        other.getResult().getType().getElementType() == c.getResult().getType().getElementType() &&
        c->isBeforeInBlock(other) && !pairedFp8Casts.contains(other)) {
      partner = other;
      break;
    }
  }
  if (!partner) {
    emit(rt::OpCode::Fp8Cast, c, {c.getTranspose() ? 1 : 0});
    return;
  }
  pairedFp8Casts.insert(partner);
  Fp8CastOp plain = c.getTranspose() ? partner : c, transposed = c.getTranspose() ? c : partner;
  rt::Instr in;
  in.op = rt::OpCode::Fp8Cast;
  in.in = {idOf(c.getInput()), idOf(c.getScale())};
  in.out = {newBuffer(plain.getResult(), rt::BufferKind::Temp, ""),
            newBuffer(transposed.getResult(), rt::BufferKind::Temp, "")};
  in.ints = {2};
  p.instrs.push_back(std::move(in));
}

void ProgramBuilder::findWideningCasts(Block &body) {
  auto widening = [](Value v) -> CastOp {
    auto c = v.getDefiningOp<CastOp>();
    if (!c) return nullptr;
    auto in = cast<RankedTensorType>(c.getInput().getType());
    auto out = cast<RankedTensorType>(c.getResult().getType());
    return in.getElementType().isBF16() && out.getElementType().isF32() ? c : nullptr;
  };
  // A matmul of two widened values reads their bf16 sources (the widening
  // is exact): a bf16 GEMM with an f32 result. The cast is still emitted
  // for its other readers (the gradient a bias's reduction also reads).
  // The same for matmul_accumulate's two factors (its addend is f32).
  auto factors = [](Operation *op) -> std::optional<std::pair<Value, Value>> {
    if (auto m = dyn_cast<MatmulOp>(op))
      return std::pair{m.getLhs(), m.getRhs()};
    if (auto m = dyn_cast<MatmulAccumulateOp>(op))
      return std::pair{m.getLhs(), m.getRhs()};
    return std::nullopt;
  };
  for (Operation &op : body.without_terminator()) {
    auto f = factors(&op);
    if (!f || !widening(f->first) || !widening(f->second))
      continue;
    for (Value v : {f->first, f->second})
      widenedFrom[v] = widening(v).getInput();
  }
  for (auto &[v, src] : widenedFrom) {
    bool onlyBf16Matmuls = llvm::all_of(v.getUsers(), [&](Operation *user) {
      auto f = factors(user);
      return f && widenedFrom.count(f->first) && widenedFrom.count(f->second) &&
             !llvm::is_contained(user->getOperands().drop_front(2), v);
    });
    if (onlyBf16Matmuls)
      unemittedCasts.insert(v);
  }
}

/// Results marked `loom.updates = k` are the next value of argument k (the
/// training step's parameters and AdamW moments). When such a result is an
/// AdamW output computed from argument k itself, and no instruction reads
/// the argument after that AdamW, the update can happen in place: the
/// output shares the input's bytes, and the state never leaves the device
/// between steps. Anything else stays an ordinary output.
void ProgramBuilder::planInPlaceUpdates(func::FuncOp func, func::ReturnOp ret) {
  std::vector<int64_t> lastRead(p.buffers.size(), -1);
  for (int64_t i = 0; i < int64_t(p.instrs.size()); ++i)
    for (uint32_t id : p.instrs[size_t(i)].in) lastRead[id] = i;
  Block &body = func.getBody().front();
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    auto updates = func.getResultAttrOfType<IntegerAttr>(k, "loom.updates");
    auto adamw = v.getDefiningOp<AdamWOp>();
    if (!updates || !adamw || updates.getInt() < 0 ||
        updates.getInt() >= int64_t(body.getNumArguments()))
      continue;
    static const unsigned kSource[3] = {0, 2, 3}; // p' <- p, m' <- m, v' <- v
    unsigned r = cast<OpResult>(v).getResultNumber();
    BlockArgument arg = body.getArgument(unsigned(updates.getInt()));
    if (r >= 3 || adamw->getOperand(kSource[r]) != arg)
      continue;
    uint32_t out = p.outputs[k], in = idOf(arg);
    // The AdamW instruction is the one that wrote `out`; nothing may read
    // the old value after it.
    int64_t writer = -1;
    for (int64_t i = 0; i < int64_t(p.instrs.size()); ++i)
      for (uint32_t id : p.instrs[size_t(i)].out)
        if (id == out) writer = i;
    if (writer < 0 || p.instrs[size_t(writer)].op != rt::OpCode::AdamW || lastRead[in] > writer)
      continue;
    p.updates.push_back({out, in});
  }
}

bool ProgramBuilder::build(func::FuncOp func, std::string &err) {
  if (!func.getBody().hasOneBlock()) {
    err = "function @" + func.getName().str() + " must have one block";
    return false;
  }
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "loom.name");
    rt::DType dt;
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || !t.hasStaticShape() || !dtypeOf(t.getElementType(), dt)) {
      err = "argument " + std::to_string(arg.getArgNumber()) + " is not a static tensor";
      return false;
    }
    p.inputs.push_back(newBuffer(arg, rt::BufferKind::Input,
                                 name ? name.str() : "arg" + std::to_string(arg.getArgNumber())));
  }
  findWideningCasts(body);
  for (Operation &op : body.without_terminator())
    if (!lowerOp(&op, err))
      return false;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    uint32_t id = idOf(v);
    auto name = func.getResultAttrOfType<StringAttr>(k, "loom.name");
    // A result must own its buffer: copy inputs, constants and repeats.
    if (p.buffers[id].kind != rt::BufferKind::Temp) {
      rt::Instr copy;
      copy.op = rt::OpCode::Cast;
      copy.in = {id};
      // A fresh buffer shaped like the source (no SSA value names it).
      rt::BufferDesc d = p.buffers[id];
      d.kind = rt::BufferKind::Temp;
      d.offset = 0;
      p.buffers.push_back(d);
      copy.out = {uint32_t(p.buffers.size() - 1)};
      p.instrs.push_back(copy);
      id = copy.out[0];
    }
    p.buffers[id].kind = rt::BufferKind::Output;
    p.buffers[id].name = name ? name.str() : "result" + std::to_string(k);
    p.outputs.push_back(id);
  }
  planInPlaceUpdates(func, ret);
  std::optional<rt::Program> withCasts; // the step before foldWeightRounding
  const bool joinOn = switchedOn("LOOM_JOIN_SIBLING_GRADS");
  // LOOM_FOLD_CASTS=0 keeps every cast instruction: an A/B switch for
  // timing the fold and checking that it changes no bits.
  if (switchedOn("LOOM_FOLD_CASTS")) {
    splitConvertingReshapes(p);
    foldBf16Casts(p);
    // LOOM_FOLD_NORM_GRAD_ROUNDING=0 keeps the casts of norm gradients' dx
    // (its A/B switch: the same bits either way).
    if (switchedOn("LOOM_FOLD_NORM_GRAD_ROUNDING"))
      foldNormGradRounding(p);
    // LOOM_FOLD_BIAS_GRADIENTS=0 keeps the bias gradients' Reduce and Cast
    // (the A/B switch; the CPU backend's bits are the same either way).
    if (switchedOn("LOOM_FOLD_BIAS_GRADIENTS"))
      foldBiasGradients(p);
    // LOOM_FOLD_WEIGHT_ROUNDING=0 keeps only this fold off (its A/B test).
    if (switchedOn("LOOM_FOLD_WEIGHT_ROUNDING")) {
      rt::Program before = p;
      if (foldWeightRounding(p) > 0)
        withCasts = std::move(before);
    }
    makeReshapeViews(p);
    // Sibling projections' input gradients as one GEMM, whether the weights'
    // bf16 roundings are AdamW's copies or casts (below): the choice between
    // those changes no bit, and must not change whether this joins.
    // LOOM_JOIN_SIBLING_GRADS=0 keeps one GEMM per sibling (the A/B switch).
    if (joinOn)
      joinSiblingInputGradients(p);
  }
  // After the folds and views: the instruction writing an amax's input is
  // the one that stores its bytes. LOOM_FUSE_FP8_AMAX=0 keeps every Fp8Amax
  // its own pass: an A/B switch for timing the fusion.
  bool fuseAmaxOn = switchedOn("LOOM_FUSE_FP8_AMAX");
  // The weights' amaxes come from AdamW (after the in-place updates are
  // known). LOOM_FOLD_WEIGHT_AMAX=0 keeps only this fold off: each weight's
  // Fp8Scale reads the parameter, the A/B switch for timing it alone.
  bool weightAmaxOn = fuseAmaxOn && switchedOn("LOOM_FOLD_WEIGHT_AMAX");
  if (fuseAmaxOn)
    fuseFp8Amax(p);
  if (weightAmaxOn)
    foldWeightAmax(p);
  placeBuffers(p);
  // The weights' rounded copies live for the whole run. Without recompute
  // they were live across the forward/backward peak anyway, and the arena
  // moves by packing only (+0.2% on the llama fixture at 4 x 64); where a
  // recomputed forward had let them die early (+8% there), the step keeps
  // its casts: a step ~1% faster is not worth more than 1% of the memory.
  if (withCasts) {
    makeReshapeViews(*withCasts);
    if (joinOn)
      joinSiblingInputGradients(*withCasts);
    if (fuseAmaxOn)
      fuseFp8Amax(*withCasts);
    if (weightAmaxOn)
      foldWeightAmax(*withCasts);
    placeBuffers(*withCasts);
    if (p.arenaBytes * 100 > withCasts->arenaBytes * 101)
      p = std::move(*withCasts);
  }
  std::string invalid = p.validate();
  if (!invalid.empty()) {
    err = "generated program is invalid: " + invalid;
    return false;
  }
  return true;
}

} // namespace

bool lowerToProgram(func::FuncOp func, rt::Program &program, std::string &err) {
  program = rt::Program();
  return ProgramBuilder(program).build(func, err);
}

} // namespace loom
