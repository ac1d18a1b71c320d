//===- FuseFp8Amax.cpp - tensorwise scales from their producer's amax -----===//
//
// Part of loom, under the Apache License v2.0.
//
// A tensorwise fp8_scale reads its whole input for one number, max |x|,
// and the fp8_cast after it reads the input again. Where the input is made
// (through reshapes and autocast's rounding to bf16, which codegen folds
// into the producing instruction) by an op whose kernel can take that
// maximum while it writes its result, the scale is rewritten to
//   %a = loom.fp8_amax %x                 (the producer's extra output)
//   %s, %inv = loom.fp8_scale fmt %a      (a [1, 1] input: no pass over x)
// fp8_scale of max |x| is the scale of x bit for bit (the amax of a
// single non-negative value is itself), so nothing downstream changes.
// The producers are the kernels that write a decoder layer's quantized
// tensors: rms_norm (q/k/v's and gate/up's input), swiglu (down's input),
// the elementwise binaries (the residual stream's gradients), transpose
// (attention's output, the q/k/v gradients), swiglu_grad (gate's and up's
// output gradients) and rms_norm_grad's dx. Rowwise scales (one per row
// or column) stay as they are. Run after loom-insert-fp8-casts and CSE.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_FUSEFP8AMAX
#include "passes/Passes.h.inc"

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The value whose bytes `v` is, through reshapes (views in codegen) and
/// f32 -> bf16 casts (folded into the instruction that writes the f32
/// value, which then stores bf16: the amax is taken of what it stores).
Value storedSource(Value v) {
  while (true) {
    if (auto r = v.getDefiningOp<ReshapeOp>()) {
      v = r.getInput();
      continue;
    }
    if (auto c = v.getDefiningOp<CastOp>()) {
      if (tensorOf(c.getInput()).getElementType().isF32() &&
          tensorOf(c.getResult()).getElementType().isBF16() &&
          tensorOf(c.getInput()).getShape() == tensorOf(c.getResult()).getShape()) {
        v = c.getInput();
        continue;
      }
    }
    return v;
  }
}

/// Whether the kernel that writes `v` can also write its amax
/// (loom/runtime/Fp8Amax.h lists the runtime's side).
bool producerFindsAmax(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op)
    return false;
  if (isa<RmsNormGradOp>(op))
    return cast<OpResult>(v).getResultNumber() == 0; // dx, not dw
  return isa<RmsNormOp, SwiGluOp, SwiGluGradOp, AddOp, SubOp, MulOp, DivOp, TransposeOp>(op);
}

struct FuseFp8AmaxPass : impl::FuseFp8AmaxBase<FuseFp8AmaxPass> {
  void runOnOperation() override {
    SmallVector<Fp8ScaleOp> scales;
    getOperation().walk([&](Fp8ScaleOp s) {
      bool tensorwise = s.getReduceDims() == ArrayRef<int64_t>{0, 1};
      bool alreadyAmax = s.getInput().getDefiningOp<Fp8AmaxOp>() != nullptr;
      if (tensorwise && !alreadyAmax && producerFindsAmax(storedSource(s.getInput())))
        scales.push_back(s);
    });
    for (Fp8ScaleOp s : scales) {
      OpBuilder b(s);
      Value amax = Fp8AmaxOp::create(b, s.getLoc(), s.getInput());
      auto fused = Fp8ScaleOp::create(b, s.getLoc(), amax, s.getFormat(), s.getReduceDims(),
                                      s.getPowerOfTwo());
      s.getScale().replaceAllUsesWith(fused.getScale());
      s.getInverse().replaceAllUsesWith(fused.getInverse());
      s.erase();
    }
  }
};

} // namespace
} // namespace loom
