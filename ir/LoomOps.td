//===- LoomOps.td - loom op definitions --------------------*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Every op has static-shaped ranked tensor operands. Result types are
// inferred (InferTypeOpAdaptor) wherever the operands and attributes
// determine them, so the verifier checks shapes for free and builders need
// no result types; ops whose result shape is a free choice (reshape, expand,
// cast, constant) state it and verify it.
//===----------------------------------------------------------------------===//
#ifndef LOOM_OPS
#define LOOM_OPS

include "LoomDialect.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Loom_Tensor : RankedTensorOf<[F32, F64, BF16, I64, I32, I1]>;
def Loom_FloatTensor : RankedTensorOf<[F32, F64, BF16]>;
def Loom_IndexTensor : RankedTensorOf<[I64, I32]>;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Loom_ConstantOp : Loom_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor; `name` marks an imported initializer";
  let description = [{
    Named constants are the model's initializers (weights, rotary tables);
    unnamed ones come from folding. Later passes decide which named
    constants are trainable parameters.
  }];
  let arguments = (ins ElementsAttr:$value, OptionalAttr<StrAttr>:$name);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Loom_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_NegOp : Loom_UnaryOp<"neg"> { let summary = "-x"; }
def Loom_SqrtOp : Loom_UnaryOp<"sqrt"> { let summary = "sqrt(x)"; }
def Loom_RsqrtOp : Loom_UnaryOp<"rsqrt"> { let summary = "1 / sqrt(x)"; }
def Loom_ReciprocalOp : Loom_UnaryOp<"reciprocal"> { let summary = "1 / x"; }
def Loom_ExpOp : Loom_UnaryOp<"exp"> { let summary = "e^x"; }
def Loom_LogOp : Loom_UnaryOp<"log"> { let summary = "ln(x)"; }
def Loom_TanhOp : Loom_UnaryOp<"tanh"> { let summary = "tanh(x)"; }
def Loom_SigmoidOp : Loom_UnaryOp<"sigmoid"> { let summary = "1 / (1 + e^-x)"; }
def Loom_SiluOp : Loom_UnaryOp<"silu"> { let summary = "x * sigmoid(x)"; }
def Loom_CosOp : Loom_UnaryOp<"cos"> { let summary = "cos(x)"; }
def Loom_SinOp : Loom_UnaryOp<"sin"> { let summary = "sin(x)"; }

def Loom_GeluOp : Loom_Op<"gelu", [Pure, InferTypeOpAdaptor]> {
  let summary = "gelu(x), exact (erf) or with the tanh approximation";
  let arguments = (ins Loom_FloatTensor:$input,
                       Loom_GeluApproximationAttr:$approximation);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input $approximation attr-dict `:` type($input)";
}

class Loom_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let description = "Elementwise with NumPy broadcasting.";
  let arguments = (ins Loom_Tensor:$lhs, Loom_Tensor:$rhs);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Loom_AddOp : Loom_BinaryOp<"add", [Commutative]> { let summary = "a + b"; }
def Loom_SubOp : Loom_BinaryOp<"sub"> { let summary = "a - b"; }
def Loom_MulOp : Loom_BinaryOp<"mul", [Commutative]> { let summary = "a * b"; }
def Loom_DivOp : Loom_BinaryOp<"div"> { let summary = "a / b"; }
def Loom_PowOp : Loom_BinaryOp<"pow"> { let summary = "a ^ b"; }
def Loom_MaxOp : Loom_BinaryOp<"max", [Commutative]> { let summary = "max(a, b)"; }
def Loom_MinOp : Loom_BinaryOp<"min", [Commutative]> { let summary = "min(a, b)"; }

def Loom_WhereOp : Loom_Op<"where", [Pure, InferTypeOpAdaptor]> {
  let summary = "cond ? a : b, with broadcasting";
  let arguments = (ins RankedTensorOf<[I1]>:$condition, Loom_Tensor:$lhs,
                       Loom_Tensor:$rhs);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $lhs `,` $rhs attr-dict `:` type($condition) `,`
    type($lhs) `,` type($rhs)
  }];
}

def Loom_CastOp : Loom_Op<"cast", [Pure]> {
  let summary = "element type conversion";
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra, reductions, normalization
//===----------------------------------------------------------------------===//

def Loom_MatmulOp : Loom_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "batched matrix product with broadcast batch dims";
  let description = [{
    lhs [..., M, K] (or [..., K, M] with transpose_lhs) times rhs [..., K, N]
    (or [..., N, K] with transpose_rhs). Batch dims broadcast; a rank-2 rhs is
    a weight shared by every batch.
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasCanonicalizer = 1;
}

def Loom_ReduceOp : Loom_Op<"reduce", [Pure, InferTypeOpAdaptor]> {
  let summary = "sum, mean or max over axes";
  let arguments = (ins Loom_FloatTensor:$input, Loom_ReduceKindAttr:$kind,
                       DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdim);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($input)";
}

def Loom_SoftmaxOp : Loom_Op<"softmax", [Pure, InferTypeOpAdaptor]> {
  let summary = "softmax along one axis";
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_RmsNormOp : Loom_Op<"rms_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "x / sqrt(mean(x^2, -1) + eps) * weight";
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
}

def Loom_LayerNormOp : Loom_Op<"layer_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "(x - mean) / sqrt(var + eps) * weight + bias, over the last dim";
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       Optional<Loom_FloatTensor>:$bias, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Transformer blocks
//===----------------------------------------------------------------------===//

def Loom_EmbeddingOp : Loom_Op<"embedding", [Pure, InferTypeOpAdaptor]> {
  let summary = "rows of table[V, D] picked by integer ids";
  let arguments = (ins Loom_FloatTensor:$table, Loom_IndexTensor:$indices);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$table `,` $indices attr-dict `:` type($table) `,` type($indices)";
}

def Loom_RotaryOp : Loom_Op<"rotary", [Pure, InferTypeOpAdaptor]> {
  let summary = "rotary position embedding, rotate-half convention";
  let description = [{
    x * cos + rotate_half(x) * sin, with rotate_half(x) =
    concat(-x[..., D/2:], x[..., :D/2]); cos and sin broadcast to x.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$cos,
                       Loom_FloatTensor:$sin);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` type($input) `,` type($cos) `,` type($sin)
  }];
}

def Loom_AttentionOp : Loom_Op<"attention", [Pure, InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention with grouped-query heads";
  let description = [{
    query [B, Hq, T, D], key and value [B, Hkv, S, D] with Hq % Hkv == 0:
    query head h attends with kv head h / (Hq / Hkv). Computes
    softmax(scale * q k^T + mask) v, the mask hiding future keys when
    `causal` is set.
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, F64Attr:$scale,
                       BoolAttr:$causal);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` type($query) `,` type($key) `,` type($value)
  }];
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Pure, InferTypeOpAdaptor]> {
  let summary = "mean over rows of logsumexp(logits) - logits[target]";
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` type($logits) `,` type($targets)";
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Loom_ReshapeOp : Loom_Op<"reshape", [Pure]> {
  let summary = "same elements in row-major order, new static shape";
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_ExpandOp : Loom_Op<"expand", [Pure]> {
  let summary = "broadcast to a larger static shape";
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_TransposeOp : Loom_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "permute dims: result dim i is input dim permutation[i]";
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Loom_SliceOp : Loom_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "strided window: per dim a start, a size and a step";
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$steps);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Loom_ConcatOp : Loom_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "join tensors along one axis";
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

def Loom_SplitOp : Loom_Op<"split", [Pure, InferTypeOpAdaptor]> {
  let summary = "cut a tensor along one axis into pieces of given sizes";
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

#endif // LOOM_OPS
