//===- Program.cpp - Names, sizes and the consistency check ---------------===//
//
// Part of loom, under the Apache License v2.0.
//
// validate() is the gate between untrusted bytes (an artifact file, a
// codegen bug) and the kernels, which index memory without further checks.
// It runs in three stages, each assuming the previous one passed:
//   1. the buffer table: known dtypes and kinds, sizes that match shapes,
//      byte ranges inside the arena or the constant blob;
//   2. the calling lists and each instruction: ids in range, arity, shapes
//      and dtypes per opcode (OpShapes.cpp), outputs disjoint from inputs;
//      views that name exactly their base's bytes and are never written;
//   3. data flow in program order: nothing is read before it is written, and
//      nothing is read after another buffer sharing its arena bytes has
//      overwritten them (the arena planner's reuse must respect liveness).
//===----------------------------------------------------------------------===//
#include "loom/runtime/Program.h"
#include "loom/runtime/RoundedCopies.h"
#include "lib/Diagnostics.h"
#include "lib/OpShapes.h"

#include <algorithm>

namespace loom::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32: return 4;
  case DType::F64: return 8;
  case DType::BF16: return 2;
  case DType::I64: return 8;
  case DType::I32: return 4;
  case DType::Bool: return 1;
  case DType::F8E4M3: return 1;
  case DType::F8E5M2: return 1;
  }
  return 0; // not a DType value (a corrupt artifact); validate() rejects it
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::BF16: return "bf16";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::Bool: return "bool";
  case DType::F8E4M3: return "f8e4m3";
  case DType::F8E5M2: return "f8e5m2";
  }
  return "unknown-dtype";
}

const char *opcodeName(OpCode op) {
  switch (op) {
  case OpCode::Embedding: return "embedding";
  case OpCode::MatMul: return "matmul";
  case OpCode::Add: return "add";
  case OpCode::Sub: return "sub";
  case OpCode::Mul: return "mul";
  case OpCode::Div: return "div";
  case OpCode::Pow: return "pow";
  case OpCode::Max: return "max";
  case OpCode::Min: return "min";
  case OpCode::Where: return "where";
  case OpCode::Neg: return "neg";
  case OpCode::Sqrt: return "sqrt";
  case OpCode::Rsqrt: return "rsqrt";
  case OpCode::Reciprocal: return "reciprocal";
  case OpCode::Exp: return "exp";
  case OpCode::Tanh: return "tanh";
  case OpCode::Sigmoid: return "sigmoid";
  case OpCode::Silu: return "silu";
  case OpCode::GeluTanh: return "gelu_tanh";
  case OpCode::GeluErf: return "gelu_erf";
  case OpCode::Cos: return "cos";
  case OpCode::Sin: return "sin";
  case OpCode::Log: return "log";
  case OpCode::Relu: return "relu";
  case OpCode::Erf: return "erf";
  case OpCode::Softplus: return "softplus";
  case OpCode::Cast: return "cast";
  case OpCode::Reduce: return "reduce";
  case OpCode::Softmax: return "softmax";
  case OpCode::RmsNorm: return "rms_norm";
  case OpCode::AddRmsNorm: return "add_rms_norm";
  case OpCode::LayerNorm: return "layer_norm";
  case OpCode::Rotary: return "rotary";
  case OpCode::Attention: return "attention";
  case OpCode::SumSquares: return "sum_squares";
  case OpCode::GlobalSumSquares: return "global_sum_squares";
  case OpCode::Transpose: return "transpose";
  case OpCode::Slice: return "slice";
  case OpCode::Concat: return "concat";
  case OpCode::Split: return "split";
  case OpCode::Expand: return "expand";
  case OpCode::CrossEntropy: return "cross_entropy";
  case OpCode::EmbeddingGrad: return "embedding_grad";
  case OpCode::RmsNormGrad: return "rms_norm_grad";
  case OpCode::LayerNormGrad: return "layer_norm_grad";
  case OpCode::AttentionGrad: return "attention_grad";
  case OpCode::RotaryGrad: return "rotary_grad";
  case OpCode::ActivationGrad: return "activation_grad";
  case OpCode::SoftmaxGrad: return "softmax_grad";
  case OpCode::CrossEntropyGrad: return "cross_entropy_grad";
  case OpCode::SliceGrad: return "slice_grad";
  case OpCode::AdamW: return "adamw";
  case OpCode::SwiGlu: return "swiglu";
  case OpCode::SwiGluGrad: return "swiglu_grad";
  case OpCode::AllReduce: return "all_reduce";
  case OpCode::AllGather: return "all_gather";
  case OpCode::ReduceScatter: return "reduce_scatter";
  case OpCode::AllToAll: return "all_to_all";
  case OpCode::CollectivePermute: return "collective_permute";
  case OpCode::ShardSlice: return "shard_slice";
  case OpCode::VocabShardEmbedding: return "vocab_shard_embedding";
  case OpCode::VocabShardEmbeddingGrad: return "vocab_shard_embedding_grad";
  case OpCode::VocabShardCrossEntropy: return "vocab_shard_cross_entropy";
  case OpCode::VocabShardCrossEntropyGrad: return "vocab_shard_cross_entropy_grad";
  case OpCode::Fp8Scale: return "fp8_scale";
  case OpCode::Fp8Amax: return "fp8_amax";
  case OpCode::Fp8Cast: return "fp8_cast";
  case OpCode::ScaledMatMul: return "scaled_matmul";
  }
  return "unknown-opcode";
}

namespace {

std::string bufferLabel(const Program &p, uint32_t id) {
  return cat("buffer ", id, " '", p.buffers[id].name, "'");
}

bool knownKind(BufferKind k) {
  return k == BufferKind::Input || k == BufferKind::Output ||
         k == BufferKind::Constant || k == BufferKind::Temp;
}

/// Stage 1: every buffer on its own.
std::string checkBuffer(const Program &p, uint32_t id) {
  const BufferDesc &b = p.buffers[id];
  std::string label = bufferLabel(p, id);
  size_t es = dtypeSize(b.dtype);
  if (es == 0)
    return cat(label, ": unknown dtype ", int(b.dtype));
  if (!knownKind(b.kind))
    return cat(label, ": unknown kind ", int(b.kind));
  // Checked product: a corrupt shape must not wrap around to a small size.
  uint64_t n = 1;
  for (int64_t d : b.shape) {
    if (d < 0)
      return cat(label, ": negative dim in shape ", shapeStr(b.shape));
    if (__builtin_mul_overflow(n, uint64_t(d), &n))
      return cat(label, ": shape ", shapeStr(b.shape), " overflows");
  }
  uint64_t bytes;
  if (__builtin_mul_overflow(n, uint64_t(es), &bytes) || bytes != b.bytes)
    return cat(label, ": bytes ", b.bytes, " != ", n, " elements * ", es);
  if (b.offset % es != 0)
    return cat(label, ": offset ", b.offset, " is not a multiple of the ",
               dtypeName(b.dtype), " size ", es);
  bool constant = b.kind == BufferKind::Constant;
  uint64_t limit = constant ? p.constants.size() : p.arenaBytes;
  if (b.rowPitch < 0 || (b.rowPitch && (constant || b.shape.empty() || b.rowPitch < b.shape.back())))
    return cat(label, ": row pitch ", b.rowPitch, " for shape ", shapeStr(b.shape));
  uint64_t span = spanBytes(b);
  if (b.offset > limit || span > limit - b.offset)
    return cat(label, ": bytes [", b.offset, ", +", span, ") outside the ",
               constant ? "constant blob" : "arena", " of ", limit, " bytes");
  return "";
}

/// Stage 2a: the calling lists name each Input (Output) buffer exactly once.
std::string checkCallingList(const Program &p, const std::vector<uint32_t> &ids,
                             BufferKind kind, const char *what) {
  std::vector<bool> listed(p.buffers.size(), false);
  for (uint32_t id : ids) {
    if (id >= p.buffers.size())
      return cat(what, " id ", id, " out of range (", p.buffers.size(), " buffers)");
    if (p.buffers[id].kind != kind)
      return cat(what, " list names ", bufferLabel(p, id), ", which is not an ", what);
    if (listed[id])
      return cat(what, " list names ", bufferLabel(p, id), " twice");
    listed[id] = true;
  }
  for (uint32_t id = 0; id < p.buffers.size(); ++id)
    if (p.buffers[id].kind == kind && !listed[id])
      return cat(bufferLabel(p, id), " is an ", what, " but not in the ", what, " list");
  return "";
}

bool inArena(const BufferDesc &b) { return b.kind != BufferKind::Constant; }

} // namespace

bool buffersOverlap(const BufferDesc &a, const BufferDesc &b) {
  if (!inArena(a) || !inArena(b) || !a.bytes || !b.bytes)
    return false;
  uint64_t sa = spanBytes(a), sb = spanBytes(b);
  if (!(a.offset < b.offset + sb && b.offset < a.offset + sa))
    return false;
  // Column blocks of one pitch (siblings in one base) share bytes only
  // where their columns meet within a row.
  if (a.rowPitch && a.rowPitch == b.rowPitch && a.dtype == b.dtype) {
    uint64_t es = dtypeSize(a.dtype), period = uint64_t(a.rowPitch) * es;
    uint64_t wa = uint64_t(a.shape.back()) * es, wb = uint64_t(b.shape.back()) * es;
    uint64_t d = (b.offset % period + period - a.offset % period) % period;
    return d < wa || d + wb > period;
  }
  return true;
}

namespace {

/// True when output `o` of `I` may share input `in`'s bytes: AdamW's
/// outputs p', m', v' over its inputs p, m, v (an elementwise kernel reads
/// element i before writing it), declared as an InPlaceUpdate of the
/// program with exactly the same bytes.
bool inPlaceAllowed(const Program &p, const Instr &I, size_t o, uint32_t in) {
  static const size_t kAdamWSource[3] = {0, 2, 3}; // p' <- p, m' <- m, v' <- v
  if (I.op != OpCode::AdamW || o >= 3 || I.in.size() <= kAdamWSource[o] ||
      I.in[kAdamWSource[o]] != in)
    return false;
  for (const InPlaceUpdate &u : p.updates)
    if (u.output == I.out[o] && u.input == in)
      return true;
  return false;
}

/// Stage 2b: ids in range, only Temp/Output written, no output aliasing an
/// input or another output (kernels assume none) except declared in-place
/// updates.
std::string checkInstrIds(const Program &p, const Instr &I) {
  for (uint32_t id : I.in)
    if (id >= p.buffers.size())
      return cat("input id ", id, " out of range (", p.buffers.size(), " buffers)");
  for (uint32_t id : I.out) {
    if (id >= p.buffers.size())
      return cat("output id ", id, " out of range (", p.buffers.size(), " buffers)");
    BufferKind k = p.buffers[id].kind;
    if (k != BufferKind::Temp && k != BufferKind::Output)
      return cat("writes ", bufferLabel(p, id), ", which is not a temp or output");
  }
  for (size_t o = 0; o < I.out.size(); ++o) {
    const BufferDesc &ob = p.buffers[I.out[o]];
    for (uint32_t id : I.in)
      if ((id == I.out[o] || buffersOverlap(ob, p.buffers[id])) && !inPlaceAllowed(p, I, o, id))
        return cat("output ", bufferLabel(p, I.out[o]), " overlaps input ",
                   bufferLabel(p, id), " in the arena");
    for (size_t o2 = 0; o2 < o; ++o2)
      if (I.out[o2] == I.out[o] || buffersOverlap(ob, p.buffers[I.out[o2]]))
        return cat("outputs ", bufferLabel(p, I.out[o2]), " and ",
                   bufferLabel(p, I.out[o]), " overlap in the arena");
  }
  return "";
}

/// Where column block `v` must sit in its base (BufferView), or why not.
std::string checkColumnBlock(const Program &p, const BufferView &v) {
  const BufferDesc &vb = p.buffers[v.view], &bb = p.buffers[v.base];
  std::string what = cat("column block ", bufferLabel(p, v.view), " of ", bufferLabel(p, v.base));
  if (vb.dtype != bb.dtype || vb.shape.empty() || bb.shape.empty() || bb.rowPitch != 0)
    return what + ": needs the base's dtype, both ranked, a contiguous base";
  int64_t W = bb.shape.back(), w = vb.shape.back();
  if (w <= 0 || W <= 0 || vb.numElements() / w != bb.numElements() / W || v.column > W - w)
    return cat(what, ": ", shapeStr(vb.shape), " from column ", v.column, " is not rows of ",
               shapeStr(bb.shape));
  if (vb.rowPitch != W || vb.offset != bb.offset + uint64_t(v.column) * dtypeSize(vb.dtype))
    return cat(what, ": row pitch ", vb.rowPitch, " and offset ", vb.offset, " are not ", W, " and ",
               bb.offset + uint64_t(v.column) * dtypeSize(vb.dtype));
  return "";
}

/// Stage 2c: each view names its base's bytes (exactly, for a reshape),
/// one level deep; nothing writes a reshape view and only the slots
/// columnBlockSlot() names touch a column block.
std::string checkViews(const Program &p) {
  std::vector<bool> isView(p.buffers.size(), false);
  for (const BufferView &v : p.views) {
    if (v.view >= p.buffers.size() || v.base >= p.buffers.size())
      return cat("view names buffer ", std::max(v.view, v.base), ", out of range");
    const BufferDesc &vb = p.buffers[v.view], &bb = p.buffers[v.base];
    if (v.view == v.base || vb.kind != BufferKind::Temp || bb.kind != BufferKind::Temp)
      return cat("view ", bufferLabel(p, v.view), " of ", bufferLabel(p, v.base),
                 ": needs two distinct temps");
    if (v.column >= 0) {
      if (std::string e = checkColumnBlock(p, v); !e.empty())
        return e;
    } else if (vb.dtype != bb.dtype || vb.bytes != bb.bytes || vb.offset != bb.offset ||
               vb.rowPitch != 0) {
      return cat("view ", bufferLabel(p, v.view), " does not occupy exactly the bytes of ",
                 bufferLabel(p, v.base));
    }
    if (isView[v.view])
      return cat("views name ", bufferLabel(p, v.view), " twice");
    isView[v.view] = true;
  }
  for (const BufferView &v : p.views)
    if (isView[v.base])
      return cat("view ", bufferLabel(p, v.view), " has a view as its base");
  std::vector<bool> isBlock(p.buffers.size(), false);
  for (const BufferView &v : p.views) isBlock[v.view] = v.column >= 0;
  for (uint32_t id = 0; id < p.buffers.size(); ++id)
    if (p.buffers[id].rowPitch && !isBlock[id])
      return cat(bufferLabel(p, id), " has a row pitch but is no column block");
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr &I = p.instrs[i];
    for (bool output : {false, true}) {
      const std::vector<uint32_t> &ids = output ? I.out : I.in;
      for (size_t k = 0; k < ids.size(); ++k) {
        uint32_t id = ids[k];
        if (id >= isView.size() || !isView[id])
          continue;
        if (isBlock[id] ? !columnBlockSlot(p, I, output, k) : output)
          return cat("instr ", i, " (", opcodeName(I.op), "): ", output ? "writes " : "reads ",
                     bufferLabel(p, id), ", which is a ", isBlock[id] ? "column block" : "view",
                     isBlock[id] ? ", in a slot that takes none" : "");
      }
    }
  }
  return "";
}

/// Stage 3: replays the program's writes. `writer[id]` is the instruction
/// that last wrote buffer id (-1: set before the run, kNever: not yet);
/// `clobberedBy[id]` is a later instruction that overwrote some of its bytes.
/// A view's reads are its base's (checkViews ran first: one level, ids in
/// range), so the replay tracks bases only.
class DataFlow {
public:
  explicit DataFlow(const Program &p)
      : p_(p), writer(p_.buffers.size(), kNever), clobberedBy(p_.buffers.size(), kNever),
        base(viewBases(p_)) {
    for (uint32_t id = 0; id < p_.buffers.size(); ++id) {
      BufferKind k = p_.buffers[id].kind;
      if (k == BufferKind::Input || k == BufferKind::Constant)
        writer[id] = -1;
      if (inArena(p_.buffers[id]) && p_.buffers[id].bytes)
        byOffset.push_back(id);
      maxBytes = std::max(maxBytes, spanBytes(p_.buffers[id]));
    }
    std::sort(byOffset.begin(), byOffset.end(), [&](uint32_t a, uint32_t b) {
      return p_.buffers[a].offset < p_.buffers[b].offset;
    });
  }

  std::string read(uint32_t viewOrId) const {
    uint32_t id = base[viewOrId];
    std::string label = bufferLabel(p_, viewOrId);
    if (id != viewOrId)
      label += cat(" (a view of ", bufferLabel(p_, id), ")");
    if (writer[id] == kNever)
      return cat("reads ", label, " before anything writes it");
    if (clobberedBy[id] != kNever)
      return cat("reads ", label, " after instr ", clobberedBy[id], " overwrote its arena bytes");
    return "";
  }

  /// `id` holds its value before the run (a rounded copy, RoundedCopies.h).
  void setBeforeRun(uint32_t id) { writer[base[id]] = -1; }

  /// A write of `id`; a column block's counts as its base's (one writer of
  /// each sibling block suffices for a read of the base).
  void write(uint32_t id, int64_t instr) {
    uint32_t b = base[id];
    writer[b] = instr;
    clobberedBy[b] = kNever;
    const BufferDesc &w = p_.buffers[id];
    uint64_t span = spanBytes(w);
    // Buffers overlapping w start in (w.offset - maxBytes, w.offset + span).
    uint64_t lo = w.offset > maxBytes ? w.offset - maxBytes : 0;
    auto it = std::lower_bound(byOffset.begin(), byOffset.end(), lo,
                               [&](uint32_t b, uint64_t off) { return p_.buffers[b].offset < off; });
    for (; it != byOffset.end() && p_.buffers[*it].offset < w.offset + span; ++it)
      if (*it != b && base[*it] == *it && writer[*it] != kNever && buffersOverlap(w, p_.buffers[*it]))
        clobberedBy[*it] = instr;
  }

private:
  static constexpr int64_t kNever = INT64_MIN;
  const Program &p_;
  std::vector<int64_t> writer, clobberedBy;
  std::vector<uint32_t> base;     // a view's base; every other id itself
  std::vector<uint32_t> byOffset; // arena buffers sorted by offset
  uint64_t maxBytes = 0;
};

} // namespace

uint64_t spanBytes(const BufferDesc &b) {
  if (!b.rowPitch || b.shape.empty() || b.bytes == 0)
    return b.bytes;
  uint64_t cols = uint64_t(b.shape.back()), rows = uint64_t(b.numElements()) / cols;
  return ((rows - 1) * uint64_t(b.rowPitch) + cols) * dtypeSize(b.dtype);
}

bool columnBlockSlot(const Program &p, const Instr &I, bool output, size_t slot) {
  auto floatish = [&](uint32_t id) {
    return id < p.buffers.size() &&
           (p.buffers[id].dtype == DType::F32 || p.buffers[id].dtype == DType::BF16);
  };
  switch (I.op) {
  case OpCode::AdamW: return output && slot == 3 && adamwKeepsCopy(I);
  case OpCode::SwiGluGrad: return output && slot < 2;
  case OpCode::Cast:
    return output && slot == 0 && I.in.size() == 1 && floatish(I.in[0]) && floatish(I.out[0]);
  case OpCode::MatMul: return !output && (slot == 0 || (slot == 1 && !matMulSumsB(I)));
  default: return false;
  }
}

std::vector<uint32_t> viewBases(const Program &p) {
  std::vector<uint32_t> base(p.buffers.size());
  for (uint32_t id = 0; id < base.size(); ++id) base[id] = id;
  for (const BufferView &v : p.views) base[v.view] = v.base;
  return base;
}

std::string Program::validate() const {
  for (uint32_t id = 0; id < buffers.size(); ++id)
    if (std::string e = checkBuffer(*this, id); !e.empty())
      return e;
  if (std::string e = checkCallingList(*this, inputs, BufferKind::Input, "input"); !e.empty())
    return e;
  if (std::string e = checkCallingList(*this, outputs, BufferKind::Output, "output"); !e.empty())
    return e;

  std::vector<bool> updated(buffers.size(), false);
  for (const InPlaceUpdate &u : updates) {
    if (u.output >= buffers.size() || u.input >= buffers.size())
      return cat("in-place update names buffer ", std::max(u.output, u.input), ", out of range");
    const BufferDesc &o = buffers[u.output], &in = buffers[u.input];
    if (o.kind != BufferKind::Output || in.kind != BufferKind::Input)
      return cat("in-place update of ", bufferLabel(*this, u.input), " by ",
                 bufferLabel(*this, u.output), ": needs an input and an output");
    if (o.offset != in.offset || o.bytes != in.bytes || o.dtype != in.dtype || o.shape != in.shape)
      return cat("in-place update ", bufferLabel(*this, u.output), " does not occupy exactly the bytes of ",
                 bufferLabel(*this, u.input));
    if (updated[u.output] || updated[u.input])
      return cat("in-place updates name ", bufferLabel(*this, updated[u.output] ? u.output : u.input),
                 " twice");
    updated[u.output] = updated[u.input] = true;
  }

  if (std::string e = checkViews(*this); !e.empty())
    return e;
  if (std::string e = checkRoundedCopies(*this); !e.empty())
    return e;
  DataFlow flow(*this);
  for (const RoundedCopy &c : roundedCopies(*this))
    flow.setBeforeRun(c.copy);
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instr &I = instrs[i];
    std::string where = cat("instr ", i, " (", opcodeName(I.op), "): ");
    std::string e = checkInstrIds(*this, I);
    if (e.empty())
      e = checkOpShapes(*this, I);
    for (size_t k = 0; e.empty() && k < I.in.size(); ++k)
      e = flow.read(I.in[k]);
    if (!e.empty())
      return where + e;
    for (uint32_t id : I.out)
      flow.write(id, int64_t(i));
  }
  for (uint32_t id : outputs)
    if (std::string e = flow.read(id); !e.empty())
      return "at the end of the program: " + e;
  return "";
}

} // namespace loom::rt
