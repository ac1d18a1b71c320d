//===- Fp8.td - fp8 training: scaled casts and GEMMs -------*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// fp8 level of the IR (issue 17), in two steps, as torchao's float8
// training computes it:
//   - `loom.fp8_matmul` (inserted by `loom-fp8-linears` before autodiff) is
//     a linear layer's product with both operands rounded to fp8 under a
//     dynamic scale. Its gradient rule builds the backward's two products
//     as fp8_matmuls too, the output gradient rounded to its own format.
//   - `loom-insert-fp8-casts` (on the finished step) spells each one out:
//     `loom.fp8_scale` (amax -> scale and its inverse), `loom.fp8_cast`
//     (f32/bf16 -> a builtin f8E4M3FN or f8E5M2 tensor) and
//     `loom.scaled_matmul` on the fp8 tensors, in the layout the fp8 tensor
//     cores read (both operands K-major).
// Formats are the builtin float8 types on values and an enum on
// fp8_matmul's operand roles; the granularity of scaling is an enum too.
// Rounding and the scale formula: runtime/include/loom/runtime/Fp8.h.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FP8
#define LOOM_FP8

def Loom_Fp8Scaling : I32EnumAttr<"Fp8Scaling", "how the scales of an fp8 GEMM's operands are shared", [
    I32EnumAttrCase<"tensorwise", 0>, I32EnumAttrCase<"rowwise", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_Fp8ScalingAttr : EnumAttr<Loom_Dialect, Loom_Fp8Scaling, "fp8_scaling">;

def Loom_Fp8Format : I32EnumAttr<"Fp8Format", "an OCP 8-bit float format", [
    I32EnumAttrCase<"e4m3", 0>, I32EnumAttrCase<"e5m2", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_Fp8FormatAttr : EnumAttr<Loom_Dialect, Loom_Fp8Format, "fp8_format">;

def Loom_Fp8Tensor : RankedTensorOf<[F8E4M3FN, F8E5M2]>;
def Loom_Fp8SourceTensor : RankedTensorOf<[F32, BF16]>;
def Loom_F32Tensor : RankedTensorOf<[F32]>;

def Loom_Fp8MatmulOp : Loom_Op<"fp8_matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "a linear layer's product on operands rounded to fp8 with dynamic scales";
  let description = [{
    lhs [..., M, K] (or [K, M] with transpose_lhs, rank 2 only) times rhs
    [K, N] (or [N, K] with transpose_rhs), both f32, result f32 like
    loom.matmul. Each operand is scaled and rounded to its format before
    the product, its scales taken over the contracting dim:
      tensorwise: one scale per operand;
      rowwise:    one per row of op(lhs) (per M index) and one per column
                  of op(rhs) (per N index),
    each s = fmax / max(amax, 1e-12) over its group (rowwise rounds s down
    to a power of two, torchao's rowwise recipe), so that
      result[m, n] = sum_k fp8(lhs[m, k] sl) fp8(rhs[k, n] sr) / (sl sr).
    The gradient (a straight-through estimator: the rounding has none of
    its own) is two more fp8 products, dlhs = dy op(rhs)^T and drhs =
    op(lhs)^T dy, with the output gradient rounded to `grad_format`
    (scaled along the backward products' own contracting dims under
    rowwise, as their layout needs). `fast_accum` lets a GPU accumulate
    the forward product the fast way (torchao does so for the output GEMM
    only); the gradient's products never set it. `bf16_weight_grad` rounds
    drhs to bf16 (a cast pair after its product): set where autocast had
    rounded the weight, whose gradient the bf16 step rounds so, as
    torchao's weight-gradient GEMM writes the autocast dtype; a GPU then
    writes it, and the optimizer reads it, in 2 bytes rather than 4.
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_Fp8ScalingAttr:$scaling,
                       Loom_Fp8FormatAttr:$lhs_format, Loom_Fp8FormatAttr:$rhs_format,
                       Loom_Fp8FormatAttr:$grad_format,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$fast_accum,
                       DefaultValuedAttr<BoolAttr, "false">:$bf16_weight_grad);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $scaling $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
  }];
  let hasVerifier = 1;
}

def Loom_Fp8ScaleOp : Loom_Op<"fp8_scale", [Pure, InferTypeOpAdaptor]> {
  let summary = "the dynamic scale of a tensor, or of each row or column, and its inverse";
  let description = [{
    input [R, C] (f32 or bf16); `reduce_dims` are the dims the amax runs
    over: [0, 1] for one scale per tensor ([1, 1]), [1] for one per row
    ([R, 1]), [0] for one per column ([1, C]). scale = fmax / max(amax,
    1e-12) for the format's largest finite value fmax (448 for e4m3, 57344
    for e5m2), rounded once to f32, then rounded down to a power of two
    with `power_of_two`; inverse = 1 / scale rounded once. A NaN in a
    group makes its scale NaN.
  }];
  let arguments = (ins Loom_Fp8SourceTensor:$input, Loom_Fp8FormatAttr:$format,
                       DenseI64ArrayAttr:$reduce_dims,
                       DefaultValuedAttr<BoolAttr, "false">:$power_of_two);
  let results = (outs Loom_F32Tensor:$scale, Loom_F32Tensor:$inverse);
  let assemblyFormat = "$format $input attr-dict `:` type($input)";
}

def Loom_Fp8AmaxOp : Loom_Op<"fp8_amax", [Pure, InferTypeOpAdaptor]> {
  let summary = "max |x| of a tensor, found by the op that produces it";
  let description = [{
    input [R, C] (f32 or bf16) -> [1, 1] f32: the largest magnitude of
    the input's elements (NaN if any is NaN), so that fp8_scale of it is
    the tensorwise scale of the input, bit for bit. `loom-fuse-fp8-amax`
    writes it where the input comes (through reshapes and autocast's
    rounding) from an op whose kernel can find it while writing its
    result; codegen makes it an extra output of that instruction
    (loom/runtime/Fp8Amax.h), so the tensor is not read once more for its
    scale. Anywhere else it lowers to the scale's own pass over the input.
  }];
  let arguments = (ins Loom_Fp8SourceTensor:$input);
  let results = (outs Loom_F32Tensor:$amax);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Loom_Fp8CastOp : Loom_Op<"fp8_cast", [Pure]> {
  let summary = "round x * scale to an fp8 format (nearest even, saturating)";
  let description = [{
    input [R, C] (f32 or bf16) and scale ([1, 1], [R, 1] or [1, C], f32,
    broadcast): result = fp8(f32(input * scale)), in the result's element
    type (f8E4M3FN or f8E5M2), laid out [R, C], or [C, R] with `transpose`
    (the K-major layout a backward GEMM reads, written in the same pass).
  }];
  let arguments = (ins Loom_Fp8SourceTensor:$input, Loom_F32Tensor:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose);
  let results = (outs Loom_Fp8Tensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` type($input) `,` type($scale) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_ScaledMatmulOp : Loom_Op<"scaled_matmul", [Pure]> {
  let summary = "product of two fp8 matrices, dequantized per tensor, row or column";
  let description = [{
    lhs [M, K] (or [K, M] with transpose_lhs) and rhs [K, N] (or [N, K]
    with transpose_rhs), fp8; lhs_inverse and rhs_inverse are the
    dequantization factors (fp8_scale's inverse) in the stored operand's
    layout with its contracting dim of size 1 ([1, 1], or one per M / N
    index). result[m, n] = (sum_k lhs[m, k] rhs[k, n]) * lhs_inverse[m] *
    rhs_inverse[n], the sum in f32, result f32 or rounded once to bf16,
    shaped [M, N] or [..., N] with leading dims folding to M (a batched
    linear layer's rows, stored alike).
    `loom-insert-fp8-casts` emits only transpose_lhs = false,
    transpose_rhs = true: the layout cuBLASLt's fp8 GEMMs take.
  }];
  let arguments = (ins Loom_Fp8Tensor:$lhs, Loom_Fp8Tensor:$rhs,
                       Loom_F32Tensor:$lhs_inverse, Loom_F32Tensor:$rhs_inverse,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$fast_accum);
  let results = (outs Loom_Fp8SourceTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $lhs_inverse `,` $rhs_inverse attr-dict `:` type($lhs) `,` type($rhs)
    `,` type($lhs_inverse) `,` type($rhs_inverse) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // LOOM_FP8
