//===- LoomDialect.td - The loom dialect -------------------*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_DIALECT
#define LOOM_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let summary = "Graph IR for training decoder language models";
  let description = [{
    Ops of a decoder LM on builtin ranked tensors with static shapes: the
    level the ONNX frontend imports into, that fusion passes rewrite into
    fused ops (rms_norm, attention, rotary, silu, gelu), and that codegen
    lowers into a runtime program. Later levels (sharding, pipeline stages,
    recompute, fp8) attach typed attributes to these ops.
  }];
  let cppNamespace = "::loom";
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // Inherent attributes live in the attribute dictionary, so result-type
  // inference sees them while parsing the generic attr-dict form too.
  let usePropertiesForAttributes = 0;
}

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Loom_ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_ReduceKindAttr : EnumAttr<Loom_Dialect, Loom_ReduceKind, "reduce_kind">;

def Loom_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu is computed", [
    I32EnumAttrCase<"erf", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_GeluApproximationAttr
    : EnumAttr<Loom_Dialect, Loom_GeluApproximation, "gelu_approximation">;

def Loom_ActivationKind : I32EnumAttr<"ActivationKind",
    "pointwise activation with a gradient kernel", [
    I32EnumAttrCase<"silu", 0>, I32EnumAttrCase<"gelu_erf", 1>,
    I32EnumAttrCase<"gelu_tanh", 2>, I32EnumAttrCase<"relu", 3>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_ActivationKindAttr
    : EnumAttr<Loom_Dialect, Loom_ActivationKind, "activation_kind">;

// Where attention's q, k, v, o (and their gradients) keep their heads:
// heads_major [B, H, T, D] (the exported graph's SDPA layout) or
// tokens_major [B, T, H, D] (a projection's result once reshaped, read
// without a transpose: FoldAttentionTransposes).
def Loom_AttentionLayout : I32EnumAttr<"AttentionLayout",
    "where attention's operands keep their heads", [
    I32EnumAttrCase<"heads_major", 0>, I32EnumAttrCase<"tokens_major", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_AttentionLayoutAttr
    : EnumAttr<Loom_Dialect, Loom_AttentionLayout, "attention_layout">;

#endif // LOOM_DIALECT
