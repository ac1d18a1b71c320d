//===- AutocastBf16.cpp - bf16 mixed precision the way torch.autocast does -===//
//
// Part of loom, under the Apache License v2.0.
//
// torch.autocast(bfloat16) does not make "matmuls bf16" in isolation: it casts
// the inputs of a few op kinds (matmul, linear/addmm, bmm) to bf16, and from
// there ordinary dtype promotion decides which tensors stay bf16. A bf16 GEMM
// output feeds the next elementwise ops in bf16 (each computes in f32
// internally and rounds its result), a bf16 tensor meeting an f32 tensor
// promotes to f32 (the residual stream, rotary tables, the attention mask),
// and the ops on autocast's f32 list (softmax, layer_norm, exp, log, pow,
// rsqrt, reciprocal, softplus, sum, the loss) compute and return f32.
//
// We replay that dtype propagation over the IR. The IR stays f32; a value
// that is bf16 in PyTorch's run is rounded once where it is made
// (x -> cast(bf16) -> cast(f32)), and an f32 value entering a bf16 GEMM is
// rounded at that use. The CPU reference then computes every op in f32 on
// exactly the values PyTorch's bf16 kernels see, accumulating in f32 as they
// do. The casts are ordinary ops, so autodiff rounds the gradient of every
// bf16 tensor too, as PyTorch's backward produces bf16 gradients for bf16
// tensors. A GPU backend may fuse the casts into bf16 kernels.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/LoomOps.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_AUTOCASTBF16
#include "passes/Passes.h.inc"

namespace {

bool isF32Tensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

/// round_bf16(v): f32 -> bf16 -> f32 (round to nearest even).
Value roundToBf16(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  auto bf = RankedTensorType::get(t.getShape(), b.getBF16Type());
  Value low = b.create<CastOp>(loc, bf, v);
  return b.create<CastOp>(loc, t, low);
}

/// Ops on autocast's f32 list (and fused ops whose PyTorch source upcasts,
/// like HF's RMSNorm): they take bf16 inputs exactly and return f32.
bool runsInF32(Operation *op) {
  if (isa<SoftmaxOp, LayerNormOp, RmsNormOp, ExpOp, LogOp, PowOp, RsqrtOp,
          ReciprocalOp, SoftplusOp, CrossEntropyOp, EmbeddingOp>(op))
    return true;
  if (auto r = dyn_cast<ReduceOp>(op))
    return r.getKind() == ReduceKind::sum;
  return false;
}

/// Ops that move or pick elements without arithmetic: a bf16 input gives a
/// bf16 result that needs no new rounding.
bool movesData(Operation *op) {
  if (isa<ReshapeOp, ExpandOp, TransposeOp, SliceOp, SplitOp, ConcatOp>(op))
    return true;
  if (auto r = dyn_cast<ReduceOp>(op))
    return r.getKind() == ReduceKind::max;
  return false;
}

/// Elementwise and other value-computing ops whose result dtype follows
/// PyTorch's promotion of their inputs.
bool promotes(Operation *op) {
  return isa<NegOp, SqrtOp, TanhOp, SigmoidOp, SiluOp, SwiGluOp, CosOp, SinOp, GeluOp,
             ReluOp, ErfOp,
             AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, WhereOp, RotaryOp,
             ReduceOp>(op);
}

struct AutocastBf16Pass : impl::AutocastBf16Base<AutocastBf16Pass> {
  /// Values that are bf16 in the autocast run (after their rounding).
  llvm::DenseSet<Value> bf16;

  /// Rounds `operand` for a bf16 kernel unless it already holds bf16 values.
  void roundOperand(OpBuilder &b, OpOperand &operand) {
    Value v = operand.get();
    if (bf16.contains(v) || !isF32Tensor(v))
      return;
    b.setInsertionPoint(operand.getOwner());
    Value r = roundToBf16(b, operand.getOwner()->getLoc(), v);
    bf16.insert(r);
    operand.set(r);
  }

  /// Rounds `result` where it is made: every user sees the bf16 value.
  void roundResult(OpBuilder &b, Value result) {
    b.setInsertionPointAfterValue(result);
    Value r = roundToBf16(b, result.getLoc(), result);
    Operation *down = r.getDefiningOp()->getOperand(0).getDefiningOp();
    result.replaceAllUsesExcept(r, down);
    bf16.insert(r);
  }

  /// PyTorch's promotion: the result is bf16 when every float operand with
  /// dimensions is bf16 and at least one is. Rank-0 operands are the
  /// exporter's spelling of Python scalars (x * 0.25) and, like 0-dim
  /// tensors in torch, do not widen a bf16 tensor.
  bool promotesToBf16(Operation *op) {
    bool any = false;
    for (Value v : op->getOperands()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || !isa<FloatType>(t.getElementType()) || t.getRank() == 0)
        continue;
      if (!bf16.contains(v))
        return false;
      any = true;
    }
    return any;
  }

  /// A matmul whose only user adds a bias over the last dim is torch's
  /// addmm/linear with bias: the bias goes into the bf16 GEMM (rounded to
  /// bf16, added to the f32 accumulator) and the sum is rounded once.
  AddOp biasAddOf(MatmulOp mm) {
    Value y = mm.getResult();
    if (!y.hasOneUse())
      return {};
    auto add = dyn_cast<AddOp>(*y.getUsers().begin());
    if (!add)
      return {};
    Value bias = add.getLhs() == y ? add.getRhs() : add.getLhs();
    auto bt = cast<RankedTensorType>(bias.getType());
    auto yt = cast<RankedTensorType>(y.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != yt.getShape().back() ||
        add.getType() != yt)
      return {};
    return add;
  }

  void runOnOperation() override {
    bf16.clear();
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (op->getNumResults() > 0 && llvm::all_of(op->getResults(), isF32Tensor))
        ops.push_back(op);
    });
    OpBuilder b(&getContext());
    llvm::DenseSet<Operation *> fusedBiasAdds;
    for (Operation *op : ops) {
      if (auto mm = dyn_cast<MatmulOp>(op)) {
        for (OpOperand &operand : op->getOpOperands())
          roundOperand(b, operand);
        if (AddOp add = biasAddOf(mm)) {
          OpOperand &bias = add.getLhs() == mm.getResult()
                                ? add->getOpOperand(1)
                                : add->getOpOperand(0);
          roundOperand(b, bias);
          fusedBiasAdds.insert(add);
          roundResult(b, add.getResult());
        } else {
          roundResult(b, mm.getResult());
        }
        continue;
      }
      if (fusedBiasAdds.contains(op))
        continue;
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        // A fused attention op is torch's scaled_dot_product_attention: a
        // flash-style kernel on bf16 q/k/v that keeps the scores and the
        // softmax in f32 and writes a bf16 output. Its logsumexp is one of
        // those f32 statistics (SDPA's backward saves it in f32), so lse
        // is neither rounded nor marked bf16. (Eager attention reaches this
        // pass unfused; its score matmul is rounded as a matmul.)
        for (OpOperand &operand : op->getOpOperands())
          roundOperand(b, operand);
        roundResult(b, attention.getOutput());
        continue;
      }
      if (runsInF32(op))
        continue;
      if (movesData(op)) {
        if (llvm::all_of(op->getOperands(),
                         [&](Value v) { return bf16.contains(v); }))
          for (Value r : op->getResults())
            bf16.insert(r);
        continue;
      }
      if (promotes(op) && promotesToBf16(op))
        roundResult(b, op->getResult(0));
    }
  }
};

} // namespace
} // namespace loom
