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
include "LoomInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Loom_Tensor : RankedTensorOf<[F32, F64, BF16, I64, I32, I1]>;
def Loom_FloatTensor : RankedTensorOf<[F32, F64, BF16]>;
def Loom_IndexTensor : RankedTensorOf<[I64, I32]>;
// A rank-0 f32 tensor; buildable, so assembly formats need not spell it.
def Loom_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Loom_ParamAttr : AttrDef<Loom_Dialect, "Param"> {
  let mnemonic = "param";
  let summary = "which model parameter a constant holds, and in what layout";
  let description = [{
    `#loom.param<"model.layers.0.self_attn.q_proj.weight", transposed>`:
    the constant is that parameter (named as the framework names it), stored
    transposed when the exporter folded a linear layer's W^T into a new
    initializer. Training turns such constants into parameters, and weight
    files are matched against these names.
  }];
  let parameters = (ins StringRefParameter<"parameter name">:$name,
                        "bool":$transposed);
  let hasCustomAssemblyFormat = 1;
}

def Loom_ConstantOp : Loom_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor: an initializer, a parameter or a folded value";
  let description = [{
    `name` is the ONNX initializer it came from; `param` says which model
    parameter it holds (see #loom.param). Folded values have neither.
  }];
  let arguments = (ins ElementsAttr:$value, OptionalAttr<StrAttr>:$name,
                       OptionalAttr<Loom_ParamAttr>:$param);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Loom_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
                                             DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>])> {
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
def Loom_SwiGluOp : Loom_Op<"swiglu", [Pure, AllTypesMatch<["gate", "up", "result"]>,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "silu(gate) * up: the gated feed-forward of Llama and Qwen2";
  let description = [{
    The fused form of mul(silu(gate), up) (passes/FuseActivations.cpp):
    silu(gate) stays in registers, so it is neither written, read back, nor
    kept for the backward. Under autocast only the result is rounded to
    bf16, as torch.compile's fused kernel does; eager PyTorch would also
    round silu(gate) (at most half a bf16 ulp of it).
  }];
  let arguments = (ins Loom_FloatTensor:$gate, Loom_FloatTensor:$up);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate)";
}

def Loom_CosOp : Loom_UnaryOp<"cos"> { let summary = "cos(x)"; }
def Loom_SinOp : Loom_UnaryOp<"sin"> { let summary = "sin(x)"; }
def Loom_ReluOp : Loom_UnaryOp<"relu"> { let summary = "max(x, 0)"; }
def Loom_ErfOp : Loom_UnaryOp<"erf"> {
  let summary = "erf(x) = 2 / sqrt(pi) * integral from 0 to x of e^(-t^2) dt";
}
def Loom_SoftplusOp : Loom_UnaryOp<"softplus"> {
  let summary = "log(1 + e^x), ONNX Softplus";
}

def Loom_GeluOp : Loom_Op<"gelu", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "gelu(x), exact (erf) or with the tanh approximation";
  let arguments = (ins Loom_FloatTensor:$input,
                       Loom_GeluApproximationAttr:$approximation);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input $approximation attr-dict `:` type($input)";
}

// `differentiable` = 0 leaves out DifferentiableOpInterface: max and min
// have no gradient rule, and their absence is what the ONNX coverage table
// (frontends/onnx/OpRegistry.cpp) reads.
class Loom_BinaryOp<string mnemonic, list<Trait> traits = [], bit differentiable = 1>
    : Loom_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor],
                                    !if(differentiable,
                                        [DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>],
                                        []))> {
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
def Loom_MaxOp : Loom_BinaryOp<"max", [Commutative], 0> { let summary = "max(a, b)"; }
def Loom_MinOp : Loom_BinaryOp<"min", [Commutative], 0> { let summary = "min(a, b)"; }

def Loom_WhereOp : Loom_Op<"where", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "cond ? a : b, with broadcasting";
  let arguments = (ins RankedTensorOf<[I1]>:$condition, Loom_Tensor:$lhs,
                       Loom_Tensor:$rhs);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $lhs `,` $rhs attr-dict `:` type($condition) `,`
    type($lhs) `,` type($rhs)
  }];
}

def Loom_CastOp : Loom_Op<"cast", [Pure, DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
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

def Loom_MatmulOp : Loom_Op<"matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
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

def Loom_MatmulBiasOp : Loom_Op<"matmul_bias", [Pure, InferTypeOpAdaptor]> {
  let summary = "matmul plus a bias over the last dim, rounded once (addmm)";
  let description = [{
    lhs and rhs as for `loom.matmul`; bias [N] is added to every row of the
    product in the accumulator's precision, and the sum is rounded to the
    result type once: torch's addmm / linear with bias under autocast, with
    the bias in the GEMM's epilogue (cuBLASLt's BIAS epilogue on the GPU).
    `loom-use-bf16-matmuls` forms it from autocast's
    round(matmul(widen(a), widen(b)) + widen(bias)) after the training step
    is built, so it has no gradient rule.
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_FloatTensor:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias attr-dict `:` type($lhs) `,` type($rhs) `,` type($bias)
  }];
}

def Loom_MatmulAccumulateOp : Loom_Op<"matmul_accumulate", [Pure, InferTypeOpAdaptor]> {
  let summary = "addend plus a matmul, rounded once (a GEMM with beta = 1)";
  let description = [{
    lhs and rhs as for `loom.matmul`; `addend` has the product's shape and
    element type and is added to the accumulator, the sum rounded to the
    result type once: cuBLASLt's D = A B + C. `loom-fuse-matmul-accumulate`
    forms it in the backward from a gradient sum add(x, matmul(a, b)), where
    the matmul is an input gradient and x the other readers' sum, so the
    sum costs no pass of its own. It has no gradient rule.
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_FloatTensor:$addend,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $addend attr-dict `:` type($lhs) `,` type($rhs) `,` type($addend)
  }];
}

def Loom_ReduceOp : Loom_Op<"reduce", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "sum, mean or max over axes";
  let arguments = (ins Loom_FloatTensor:$input, Loom_ReduceKindAttr:$kind,
                       DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdim);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($input)";
}

def Loom_SumSquaresOp : Loom_Op<"sum_squares", [Pure, InferTypeOpAdaptor]> {
  let summary = "sum of x * x over every element";
  let description = [{
    The rank-0 sum of the squares of all elements of `input`, in its
    element type: reduce(sum, every axis, x * x) read in one pass. Each
    square is rounded to the element type before it is added, exactly as
    the two-op form rounds the product, so the value is the same.
    `loom-fuse-gradient-clipping` forms it from the gradient norm's terms
    after autodiff; it has no gradient rule.
  }];
  let arguments = (ins RankedTensorOf<[F32, F64]>:$input);
  let results = (outs RankedTensorOf<[F32, F64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_GlobalSumSquaresOp : Loom_Op<"global_sum_squares", [Pure]> {
  let summary = "the chained sum of several tensors' sums of squares";
  let description = [{
    ((s0 + s1) + s2) + ..., where s_i is `loom.sum_squares` of input i and
    each + rounds to the element type: the value of the sum_squares ops and
    the chain of rank-0 adds it replaces, bit for bit. The gradient norm's
    squared sum reads every gradient this way. `loom-fuse-global-sum-squares`
    forms it after `loom-fuse-gradient-clipping`, so that a backend can sum
    all the tensors in one launch rather than one small reduction and one
    scalar add per parameter. It has no gradient rule.
  }];
  let arguments = (ins Variadic<RankedTensorOf<[F32, F64]>>:$inputs);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_SoftmaxOp : Loom_Op<"softmax", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "softmax along one axis";
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_RmsNormOp : Loom_Op<"rms_norm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "x / sqrt(mean(x^2, -1) + eps) * weight";
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
}

def Loom_AddRmsNormOp : Loom_Op<"add_rms_norm", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "(lhs + rhs, rms_norm(lhs + rhs, weight)): a residual add and its norm";
  let description = [{
    sum is loom.add's result and result is loom.rms_norm's of that sum, bit
    for bit: the norm reads the sum as rounded to its type.
    `loom-fuse-add-rms-norm` forms it from a pre-norm block's residual add
    and the norm after it, so the sum is read back from memory no more (a
    training step only: there is no gradient rule).
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_FloatTensor:$weight, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$sum, Loom_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $weight attr-dict `:` type($lhs) `,` type($weight)";
}

def Loom_LayerNormOp : Loom_Op<"layer_norm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
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

def Loom_EmbeddingOp : Loom_Op<"embedding", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "rows of table[V, D] picked by integer ids";
  let arguments = (ins Loom_FloatTensor:$table, Loom_IndexTensor:$indices);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$table `,` $indices attr-dict `:` type($table) `,` type($indices)";
}

def Loom_RotaryOp : Loom_Op<"rotary", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
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

def Loom_AttentionOp : Loom_Op<"attention", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "scaled dot-product attention with grouped-query heads";
  let description = [{
    query [B, Hq, T, D], key and value [B, Hkv, S, D] with Hq % Hkv == 0:
    query head h attends with kv head h / (Hq / Hkv). `output` [B, Hq, T,
    D] is softmax(scale * q k^T + mask) v, the mask hiding future keys when
    `causal` is set (key j from query i when j > i + max(S - T, 0)).

    `lse` [B, Hq, T] is each query row's natural-log logsumexp over its
    visible keys, log sum_j exp(scale * q_i . k_j), and +inf for a row that
    sees no key. It is what the backward needs besides `output` to rebuild
    the probabilities, exp(scale * q_i . k_j - lse_i), without another pass
    over the keys (FlashAttention's and cuDNN's contract). It is f32 for
    f32 and bf16 operands alike (under autocast too: the statistics are
    never rounded to bf16), and f64 for f64 operands.

    `window` > 0 (causal only) is a sliding window (Mistral, Gemma 2/3,
    Starcoder2): query i also stops seeing key j once j <= i + max(S - T, 0)
    - window, so it sees at most `window` keys, itself included. `softcap`
    > 0 caps the scores (Gemma 2): s = softcap tanh(scale q.k / softcap)
    before the mask and the softmax. Both are 0 (off) by default.

    `layout` = tokens_major stores query, key, value and output with the
    token dim before the head dim: query [B, T, Hq, D], key and value
    [B, S, Hkv, D], output [B, T, Hq, D]; lse stays [B, Hq, T]. The values
    are those of the heads-major attention of the transposed operands.
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, F64Attr:$scale,
                       BoolAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<Loom_AttentionLayoutAttr,
                                         "::loom::AttentionLayout::heads_major">:$layout);
  let results = (outs Loom_FloatTensor:$output, Loom_FloatTensor:$lse);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` type($query) `,` type($key) `,` type($value)
  }];
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "mean over rows of logsumexp(logits) - logits[target]";
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` type($logits) `,` type($targets)";
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Loom_ReshapeOp : Loom_Op<"reshape", [Pure, DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "same elements in row-major order, new static shape";
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_ExpandOp : Loom_Op<"expand", [Pure, DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "broadcast to a larger static shape";
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_TransposeOp : Loom_Op<"transpose", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "permute dims: result dim i is input dim permutation[i]";
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Loom_SliceOp : Loom_Op<"slice", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "strided window: per dim a start, a size and a step";
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$steps);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Loom_ConcatOp : Loom_Op<"concat", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "join tensors along one axis";
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

def Loom_SplitOp : Loom_Op<"split", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "cut a tensor along one axis into pieces of given sizes";
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Training: gradient ops (built by autodiff) and the optimizer
//===----------------------------------------------------------------------===//

def Loom_EmbeddingGradOp : Loom_Op<"embedding_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "d table: scatter-add of output gradients into rows picked by ids";
  let description = [{
    Row v of the result is the sum of the output gradient's rows at the
    positions whose id is v (zero where no id picks it). With `accumulate
    %a`, each row is a + (that row rounded to the result type), rounded
    once more: the add of a tied LM head's weight gradient that
    `loom-fuse-embedding-grad-accumulate` folds in. `a` has the result's
    type.
  }];
  let arguments = (ins Loom_FloatTensor:$output_grad, Loom_IndexTensor:$indices,
                       Optional<Loom_FloatTensor>:$addend, I64Attr:$num_embeddings);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $output_grad `,` $indices (`accumulate` $addend^ `:` type($addend))? attr-dict `:`
    type($output_grad) `,` type($indices)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$output_grad, "::mlir::Value":$indices,
                   "int64_t":$num_embeddings), [{
      build($_builder, $_state, output_grad, indices, ::mlir::Value(),
            $_builder.getI64IntegerAttr(num_embeddings));
    }]>
  ];
}

def Loom_RmsNormGradOp : Loom_Op<"rms_norm_grad", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["input", "output_grad"]>]> {
  let summary = "(dx, dweight) of rms_norm";
  let description = [{
    With r = 1 / sqrt(mean(x^2) + eps) and n = x r:
    dweight = sum over rows of dy * n;
    dx = r (dy w - n mean(dy w n)).
    With `accumulate %a`, dx is a + (that dx rounded to the result type),
    rounded once more: the add of the other readers' gradient sum that
    `loom-fuse-norm-grad-accumulate` folds in. `a` has the input's type.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       Loom_FloatTensor:$output_grad,
                       Optional<Loom_FloatTensor>:$addend, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$input_grad, Loom_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $output_grad (`accumulate` $addend^ `:` type($addend))? attr-dict `:`
    type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight, "::mlir::Value":$output_grad,
                   "::mlir::FloatAttr":$epsilon), [{
      build($_builder, $_state, input, weight, output_grad, ::mlir::Value(), epsilon);
    }]>
  ];
}

def Loom_LayerNormGradOp : Loom_Op<"layer_norm_grad", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["input", "output_grad"]>]> {
  let summary = "(dx, dweight, dbias) of layer_norm";
  let description = [{
    `accumulate %a` adds `a` to dx as for `loom.rms_norm_grad`.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       Loom_FloatTensor:$output_grad,
                       Optional<Loom_FloatTensor>:$addend, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$input_grad, Loom_FloatTensor:$weight_grad,
                      Loom_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $output_grad (`accumulate` $addend^ `:` type($addend))? attr-dict `:`
    type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight, "::mlir::Value":$output_grad,
                   "::mlir::FloatAttr":$epsilon), [{
      build($_builder, $_state, input, weight, output_grad, ::mlir::Value(), epsilon);
    }]>
  ];
}

def Loom_AttentionGradOp : Loom_Op<"attention_grad", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["query", "output", "output_grad"]>]> {
  let summary = "(dq, dk, dv) of attention from its saved output and logsumexp";
  let description = [{
    `output` and `lse` are the results of the `loom.attention` of the same
    query, key and value (the forward's saved statistics, FlashAttention's
    contract), and `output_grad` the gradient of `output`. With
    P = exp(scale * q k^T + mask - lse) (the forward's probabilities,
    rebuilt without a pass over the keys for the row statistics) and
    delta = rowsum(output_grad * output), which equals rowsum(dP * P):
      dv = P^T dy;  dP = dy v^T;  dS = P (dP - delta);
      dq = scale dS k;  dk = scale dS^T q,
    where query heads that share a kv head sum into its dk and dv. `window`
    and `softcap` are the forward's; with a softcap, dS is also multiplied
    by the cap's derivative 1 - (s / softcap)^2 at the capped score s.
    `layout` is the forward's, for every operand and result but lse, which
    is the logsumexp per query row, [B, Hq, T], in both layouts.
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, Loom_FloatTensor:$output,
                       Loom_FloatTensor:$lse, Loom_FloatTensor:$output_grad,
                       F64Attr:$scale, BoolAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<Loom_AttentionLayoutAttr,
                                         "::loom::AttentionLayout::heads_major">:$layout);
  let results = (outs Loom_FloatTensor:$query_grad, Loom_FloatTensor:$key_grad,
                      Loom_FloatTensor:$value_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $lse `,` $output_grad attr-dict
    `:` type($query) `,` type($key) `,` type($value) `,` type($lse)
  }];
}

def Loom_RotaryGradOp : Loom_Op<"rotary_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "dx of rotary: dy cos + rotate_half^T(dy sin)";
  let description = [{
    rotate_half^T(z) = concat(z[..., D/2:], -z[..., :D/2]).
  }];
  let arguments = (ins Loom_FloatTensor:$output_grad, Loom_FloatTensor:$cos,
                       Loom_FloatTensor:$sin);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $output_grad `,` $cos `,` $sin attr-dict `:` type($output_grad) `,` type($cos) `,` type($sin)
  }];
}

def Loom_ActivationGradOp : Loom_Op<"activation_grad", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["input", "output_grad"]>]> {
  let summary = "dx of silu or gelu given x and dy";
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$output_grad,
                       Loom_ActivationKindAttr:$kind);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$kind $input `,` $output_grad attr-dict `:` type($input)";
}

def Loom_SwiGluGradOp : Loom_Op<"swiglu_grad", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["gate", "up", "output_grad"]>]> {
  let summary = "(dgate, dup) of swiglu given gate, up and dy";
  let description = [{
    dup = dy silu(gate) and dgate = dy up silu'(gate), with
    silu'(x) = sigmoid(x) (1 + x (1 - sigmoid(x))): one pass over gate, up
    and dy where the unfused backward takes three.
  }];
  let arguments = (ins Loom_FloatTensor:$gate, Loom_FloatTensor:$up,
                       Loom_FloatTensor:$output_grad);
  let results = (outs Loom_FloatTensor:$gate_grad, Loom_FloatTensor:$up_grad);
  let assemblyFormat = "$gate `,` $up `,` $output_grad attr-dict `:` type($gate)";
}

def Loom_SoftmaxGradOp : Loom_Op<"softmax_grad", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["output", "output_grad"]>]> {
  let summary = "dx of softmax: y (dy - sum(dy y))";
  let arguments = (ins Loom_FloatTensor:$output, Loom_FloatTensor:$output_grad,
                       I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$output `,` $output_grad attr-dict `:` type($output)";
}

def Loom_CrossEntropyGradOp : Loom_Op<"cross_entropy_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "dlogits of mean cross-entropy: (softmax - onehot) dloss / N";
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets,
                       Loom_FloatTensor:$loss_grad);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $loss_grad attr-dict `:` type($logits) `,` type($targets) `,` type($loss_grad)
  }];
}

def Loom_CrossEntropyWithGradOp : Loom_Op<"cross_entropy_with_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "cross_entropy and its cross_entropy_grad in one pass";
  let description = [{
    (dlogits, loss): what loom.cross_entropy_grad %logits, %targets,
    %loss_grad and loom.cross_entropy %logits, %targets give, from one read
    of each row's max and sum of exponentials instead of two.
    `loom-fuse-cross-entropy-grad` forms it where the step runs both on the
    same logits and the loss gradient is known at the loss (the backward's
    seed is a constant), so the gradient is made where the loss is.
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets,
                       Loom_FloatTensor:$loss_grad);
  let results = (outs Loom_FloatTensor:$logits_grad, Loom_FloatTensor:$loss);
  let assemblyFormat = [{
    $logits `,` $targets `,` $loss_grad attr-dict `:` type($logits) `,` type($targets) `,` type($loss_grad)
  }];
}

def Loom_SliceGradOp : Loom_Op<"slice_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "zeros of the sliced input's shape with the slice's gradient put back";
  let arguments = (ins Loom_FloatTensor:$output_grad, DenseI64ArrayAttr:$input_shape,
                       DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$output_grad attr-dict `:` type($output_grad)";
}

def Loom_AdamWOp : Loom_Op<"adamw", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq"]>, AllTypesMatch<["lr", "step"]>]> {
  let summary = "one AdamW step with PyTorch semantics";
  let description = [{
    With t = step + 1:
      p <- p (1 - lr wd)
      m <- beta1 m + (1 - beta1) g
      v <- beta2 v + (1 - beta2) g^2
      p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    `lr` and `step` are scalar tensors, so the schedule is part of the graph.
    With `grad_scale` (a rank-0 f32 tensor, the clipping coefficient) the
    step uses g = grad * grad_scale, the product rounded to f32 first, as
    a separate loom.mul feeding `grad` would: the gradient is read once.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                       Loom_FloatTensor:$exp_avg, Loom_FloatTensor:$exp_avg_sq,
                       Loom_FloatTensor:$lr, Loom_FloatTensor:$step,
                       Optional<Loom_F32Scalar>:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param, Loom_FloatTensor:$new_exp_avg,
                      Loom_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step (`grad_scale` $grad_scale^)?
    attr-dict `:` type($param) `,` type($lr)
  }];
}

include "Sharding.td"
include "SequenceSharding.td"
include "Fp8.td"
include "Pipeline.td"

#endif // LOOM_OPS
