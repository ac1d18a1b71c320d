//===- Passes.td - loom passes -----------------------------*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES
#define LOOM_PASSES

include "mlir/Pass/PassBase.td"

def FuseActivations : Pass<"loom-fuse-activations", "mlir::func::FuncOp"> {
  let summary = "Turn decomposed silu and tanh-gelu into loom.silu and loom.gelu";
  let description = [{
    x * sigmoid(x) becomes silu(x); GPT-2's
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) becomes
    gelu(x, tanh).
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseRmsNorm : Pass<"loom-fuse-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Turn decomposed RMSNorm into loom.rms_norm";
  let description = [{
    w * (x * rsqrt(mean(x^2, -1) + eps)), with the reciprocal square root
    spelled rsqrt, 1/sqrt or a division by sqrt, becomes rms_norm(x, w, eps).
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseRotary : Pass<"loom-fuse-rotary", "mlir::func::FuncOp"> {
  let summary = "Turn rotate-half rotary embeddings into loom.rotary";
  let description = [{
    x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin becomes
    rotary(x, cos, sin).
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseAttention : Pass<"loom-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Turn eager attention into loom.attention";
  let description = [{
    softmax(scale * q k^T + mask) v becomes attention(q, k, v), recovering
    the scale, a causal mask given as a constant, and grouped-query heads
    from the repeat_kv expansion (unsqueeze, expand, reshape) of k and v.
    A mask that is not exactly causal leaves the pattern alone.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

#endif // LOOM_PASSES
