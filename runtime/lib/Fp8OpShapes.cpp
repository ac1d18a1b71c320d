//===- Fp8OpShapes.cpp - Arity, shape and dtype rules of the fp8 opcodes --===//
//
// Part of loom, under the Apache License v2.0.
//
// Fp8Scale, Fp8Cast and ScaledMatMul (Program.h, opcodes 120-122), checked
// as OpShapes.cpp checks the others: after this, the kernels index memory
// without looking again.
//===----------------------------------------------------------------------===//
#include "lib/Diagnostics.h"
#include "lib/OpShapes.h"

namespace loom::rt {

namespace {

using Shape = std::vector<int64_t>;

std::string counts(const Instr &I, size_t minIn, size_t maxIn, size_t minOut, size_t maxOut,
                   size_t ints) {
  if (I.in.size() < minIn || I.in.size() > maxIn)
    return cat("takes ", minIn, minIn == maxIn ? "" : cat(" to ", maxIn), " inputs, got ",
               I.in.size());
  if (I.out.size() < minOut || I.out.size() > maxOut)
    return cat("takes ", minOut, minOut == maxOut ? "" : cat(" to ", maxOut), " outputs, got ",
               I.out.size());
  if (I.ints.size() != ints)
    return cat("takes ", ints, " int attributes, got ", I.ints.size());
  if (!I.floats.empty())
    return cat("takes no float attributes, got ", I.floats.size());
  return "";
}

std::string rank2(const BufferDesc &b, const char *what) {
  return b.shape.size() == 2 ? "" : cat(what, " must have rank 2, got ", shapeStr(b.shape));
}

std::string isF32(const BufferDesc &b, const char *what) {
  return b.dtype == DType::F32 ? "" : cat(what, " must be f32, got ", dtypeName(b.dtype));
}

std::string highPrecision(const BufferDesc &b, const char *what) {
  return b.dtype == DType::F32 || b.dtype == DType::BF16
             ? ""
             : cat(what, " must be f32 or bf16, got ", dtypeName(b.dtype));
}

/// A scale of x[R, C]: one per tensor, per row or per column.
std::string scaleShape(const BufferDesc &s, const Shape &x, const char *what) {
  const Shape &ss = s.shape;
  if (ss == Shape{1, 1} || ss == Shape{x[0], 1} || ss == Shape{1, x[1]})
    return "";
  return cat(what, " ", shapeStr(ss), " is not one per tensor [1,1], per row [", x[0],
             ",1] or per column [1,", x[1], "] of ", shapeStr(x));
}

std::string checkFp8Scale(const Program &p, const Instr &I) {
  if (std::string e = counts(I, 1, 1, 2, 2, 2); !e.empty())
    return e;
  const BufferDesc &x = p.buffers[I.in[0]], &s = p.buffers[I.out[0]], &inv = p.buffers[I.out[1]];
  if (I.ints[0] != 0 && I.ints[0] != 1)
    return cat("ints[0] must be the format (0 e4m3, 1 e5m2), got ", I.ints[0]);
  if (I.ints[1] != 0 && I.ints[1] != 1)
    return cat("ints[1] (power_of_two) must be 0 or 1, got ", I.ints[1]);
  for (std::string e : {rank2(x, "x"), highPrecision(x, "x"), isF32(s, "scale"),
                        isF32(inv, "inverse")})
    if (!e.empty())
      return e;
  if (std::string e = scaleShape(s, x.shape, "scale"); !e.empty())
    return e;
  if (inv.shape != s.shape)
    return cat("inverse has shape ", shapeStr(inv.shape), ", expected ", shapeStr(s.shape));
  return "";
}

std::string checkFp8Amax(const Program &p, const Instr &I) {
  if (std::string e = counts(I, 1, 1, 1, 1, 0); !e.empty())
    return e;
  const BufferDesc &x = p.buffers[I.in[0]], &a = p.buffers[I.out[0]];
  for (std::string e : {rank2(x, "x"), highPrecision(x, "x"), isF32(a, "amax")})
    if (!e.empty())
      return e;
  if (a.shape != Shape{1, 1})
    return cat("amax has shape ", shapeStr(a.shape), ", expected [1,1]");
  return "";
}

std::string checkFp8Cast(const Program &p, const Instr &I) {
  if (std::string e = counts(I, 2, 2, 1, 2, 1); !e.empty())
    return e;
  const BufferDesc &x = p.buffers[I.in[0]], &s = p.buffers[I.in[1]];
  int64_t layout = I.ints[0];
  if (layout < 0 || layout > 2)
    return cat("ints[0] must be the layout (0 q, 1 q^T, 2 both), got ", layout);
  if (I.out.size() != (layout == 2 ? 2u : 1u))
    return cat("layout ", layout, " writes ", layout == 2 ? 2 : 1, " outputs, got ", I.out.size());
  for (std::string e : {rank2(x, "x"), highPrecision(x, "x"), isF32(s, "scale")})
    if (!e.empty())
      return e;
  if (std::string e = scaleShape(s, x.shape, "scale"); !e.empty())
    return e;
  DType q = p.buffers[I.out[0]].dtype;
  for (size_t k = 0; k < I.out.size(); ++k) {
    const BufferDesc &o = p.buffers[I.out[k]];
    bool transposed = layout == 1 || k == 1;
    Shape want = transposed ? Shape{x.shape[1], x.shape[0]} : x.shape;
    if (!isFp8(o.dtype))
      return cat("output ", k, " must be f8e4m3 or f8e5m2, got ", dtypeName(o.dtype));
    if (o.dtype != q)
      return cat("outputs differ in format: ", dtypeName(q), " and ", dtypeName(o.dtype));
    if (o.shape != want)
      return cat("output ", k, " has shape ", shapeStr(o.shape), ", expected ", shapeStr(want));
  }
  return "";
}

std::string checkScaledMatMul(const Program &p, const Instr &I) {
  if (std::string e = counts(I, 4, 4, 1, 1, 3); !e.empty())
    return e;
  const BufferDesc &a = p.buffers[I.in[0]], &b = p.buffers[I.in[1]];
  const BufferDesc &da = p.buffers[I.in[2]], &db = p.buffers[I.in[3]], &out = p.buffers[I.out[0]];
  for (int k = 0; k < 3; ++k)
    if (I.ints[size_t(k)] != 0 && I.ints[size_t(k)] != 1)
      return cat("ints[", k, "] must be 0 or 1, got ", I.ints[size_t(k)]);
  bool ta = I.ints[0] != 0, tb = I.ints[1] != 0;
  for (std::string e : {rank2(a, "a"), rank2(b, "b"), isF32(da, "da"), isF32(db, "db")})
    if (!e.empty())
      return e;
  if (!isFp8(a.dtype) || !isFp8(b.dtype))
    return cat("a and b must be fp8, got ", dtypeName(a.dtype), " and ", dtypeName(b.dtype));
  if (out.dtype != DType::F32 && out.dtype != DType::BF16)
    return cat("out must be f32 or bf16, got ", dtypeName(out.dtype));
  int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb)
    return cat("contracting dims differ: ", shapeStr(a.shape), (ta ? "^T" : ""), " times ",
               shapeStr(b.shape), (tb ? "^T" : ""));
  // Scales in the stored layout, the contracting dim of size 1.
  Shape rowA = ta ? Shape{1, m} : Shape{m, 1}, colB = tb ? Shape{n, 1} : Shape{1, n};
  if (da.shape != Shape{1, 1} && da.shape != rowA)
    return cat("da has shape ", shapeStr(da.shape), ", expected [1,1] or ", shapeStr(rowA));
  if (db.shape != Shape{1, 1} && db.shape != colB)
    return cat("db has shape ", shapeStr(db.shape), ", expected [1,1] or ", shapeStr(colB));
  // [M, N], or [..., N] with the leading dims folding to M (the rows of a
  // batched linear layer, stored alike).
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < out.shape.size(); ++d) rows *= out.shape[d];
  if (out.shape.size() < 2 || out.shape.back() != n || rows != m)
    return cat("output has shape ", shapeStr(out.shape), ", expected ", shapeStr(Shape{m, n}),
               " or [..., ", n, "] of ", m, " rows");
  return "";
}

} // namespace

std::string checkFp8OpShapes(const Program &p, const Instr &I) {
  switch (I.op) {
  case OpCode::Fp8Scale: return checkFp8Scale(p, I);
  case OpCode::Fp8Cast: return checkFp8Cast(p, I);
  case OpCode::ScaledMatMul: return checkScaledMatMul(p, I);
  case OpCode::Fp8Amax: return checkFp8Amax(p, I);
  default: return cat(opcodeName(I.op), " is not an fp8 opcode");
  }
}

} // namespace loom::rt
