//===- Fp8Amax.cpp - which instructions carry fused amax outputs ----------===//
//
// Part of loom, under the Apache License v2.0.
//
// The producers of the tensors fp8 GEMMs read in a decoder layer
// (loom/runtime/Fp8Amax.h): RMSNorm (the inputs of q/k/v and gate/up),
// SwiGlu (down's input), the elementwise binaries (the residual stream's
// gradients are Adds), Transpose (attention's output and the q/k/v
// gradients go through one to reach [B T, H D]), SwiGluGrad (gate's and
// up's output gradients) and RMSNormGrad (its dx, not dw).
//===----------------------------------------------------------------------===//
#include "loom/runtime/Fp8Amax.h"

#include "lib/Diagnostics.h"

namespace loom::rt {

size_t fusedAmaxRegularOutputs(OpCode op) {
  switch (op) {
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div:
  case OpCode::RmsNorm: case OpCode::SwiGlu: case OpCode::Transpose:
    return 1;
  case OpCode::SwiGluGrad: case OpCode::RmsNormGrad:
    return 2;
  default:
    return 0;
  }
}

size_t fusedAmaxLimit(OpCode op) {
  return op == OpCode::RmsNormGrad ? 1 : fusedAmaxRegularOutputs(op);
}

std::string checkFusedAmax(const Program &p, const Instr &I) {
  size_t regular = fusedAmaxRegularOutputs(I.op), n = fusedAmaxCount(I);
  if (n > fusedAmaxLimit(I.op))
    return cat("takes at most ", regular + fusedAmaxLimit(I.op), " outputs (", regular,
               " and their amax), got ", I.out.size());
  for (size_t k = 0; k < n; ++k) {
    const BufferDesc &y = p.buffers[I.out[k]];
    if (y.dtype != DType::F32 && y.dtype != DType::BF16)
      return cat("output ", k, " '", y.name, "' has an amax output but is ", dtypeName(y.dtype),
                 " (f32 or bf16 only)");
    const BufferDesc &b = p.buffers[I.out[regular + k]];
    if (b.dtype != DType::F32 || b.numElements() != 1)
      return cat("amax output ", k, " '", b.name, "' must be one f32 element, got ",
                 shapeStr(b.shape), " ", dtypeName(b.dtype));
  }
  return "";
}

Instr withoutFusedAmax(const Instr &I) {
  Instr plain = I;
  plain.out.resize(I.out.size() - fusedAmaxCount(I));
  return plain;
}

} // namespace loom::rt
