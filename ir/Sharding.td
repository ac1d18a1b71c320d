//===- Sharding.td - Device mesh, placements and collectives -*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// SPMD level of the IR (issue 5). A module that has been partitioned for a
// plan carries `loom.mesh = #loom.mesh<...>`; the training step's arguments
// and results carry `loom.sharding = #loom.sharding<[...]>` (one placement
// per mesh axis that acts on the value, DTensor semantics), and the body
// holds explicit collectives that name the mesh axes they run over. All of
// it is typed: axes and placement kinds are enums, never strings.
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARDING
#define LOOM_SHARDING

def Loom_MeshAxis : I32EnumAttr<"MeshAxis", "a named axis of the device mesh", [
    I32EnumAttrCase<"pp", 0>, I32EnumAttrCase<"dp_replicate", 1>,
    I32EnumAttrCase<"dp_shard", 2>, I32EnumAttrCase<"cp", 3>,
    I32EnumAttrCase<"tp", 4>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_MeshAxisAttr : EnumAttr<Loom_Dialect, Loom_MeshAxis, "mesh_axis">;
def Loom_MeshAxesAttr : TypedArrayAttrBase<Loom_MeshAxisAttr, "mesh axes">;

def Loom_PlacementKind : I32EnumAttr<"PlacementKind",
    "how a value relates to its global tensor along one mesh axis", [
    I32EnumAttrCase<"replicate", 0>, I32EnumAttrCase<"shard", 1>,
    I32EnumAttrCase<"partial", 2>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}

def Loom_MeshAttr : AttrDef<Loom_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "the device mesh: the size of every named axis";
  let description = [{
    `#loom.mesh<pp = 1, dp_replicate = 2, dp_shard = 2, cp = 1, tp = 1>`.
    Ranks are laid out row-major in this order (pp outermost, tp
    innermost), so the ranks that differ only along tp are neighbours:
    rank = (((pp_i * R + r_i) * S + s_i) * C + c_i) * T + t_i.
    A collective over a set of axes runs within each group of ranks that
    agree on every other axis.
  }];
  let parameters = (ins "int64_t":$pp, "int64_t":$dp_replicate, "int64_t":$dp_shard,
                        "int64_t":$cp, "int64_t":$tp);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Size of one axis.
    int64_t size(MeshAxis axis) const;
    /// Ranks in one collective group over `axes` (product of their sizes).
    int64_t groupSize(mlir::ArrayAttr axes) const;
    int64_t worldSize() const { return getPp() * getDpReplicate() * getDpShard() * getCp() * getTp(); }
  }];
}

def Loom_PlacementAttr : AttrDef<Loom_Dialect, "Placement"> {
  let mnemonic = "placement";
  let summary = "a value's placement along one mesh axis";
  let description = [{
    `#loom.placement<dp_shard, shard(0)>`: along dp_shard each rank holds
    one contiguous slice of dim 0 of the global tensor (rank i of the group
    holds slice i). `replicate`: every rank holds the whole tensor.
    `partial(sum)` / `partial(mean)`: the global tensor is the sum (mean)
    of the ranks' values, not yet reduced.
    `shard(1, blocks = 3)`: dim 1 is k = 3 equal blocks (a fused q|k|v
    weight) and each block is sharded on its own, so rank i holds slice i
    of every block, concatenated.
  }];
  let parameters = (ins "MeshAxis":$axis, "PlacementKind":$kind,
                        "int64_t":$dim, "ReduceKind":$reduction,
                        DefaultValuedParameter<"int64_t", "1">:$blocks);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Loom_ShardingAttr : AttrDef<Loom_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "a value's placements, one per mesh axis that acts on it";
  let description = [{
    Axes that are not listed replicate the value. Types in the IR are
    always the local (per-rank) types; the sharding says how the local
    value relates to the global one.
  }];
  let parameters = (ins ArrayRefParameter<"PlacementAttr">:$placements);
  let assemblyFormat = "`<` `[` $placements `]` `>`";
  let extraClassDeclaration = [{
    /// The placement along `axis`, or null (replicated).
    PlacementAttr along(MeshAxis axis) const;
  }];
}

//===----------------------------------------------------------------------===//
// Collectives. They synchronize ranks, so they are not Pure: canonicalization
// and CSE must neither drop nor merge them (every rank runs the same ops in
// the same order, which is what makes the SPMD program deadlock-free).
//===----------------------------------------------------------------------===//

def Loom_AllReduceOp : Loom_Op<"all_reduce", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "sum or mean of a tensor over the ranks of a mesh-axis group";
  let description = [{
    Gradient (used when tensor parallelism puts it in the forward pass,
    Megatron's "g" after a row-parallel matmul): the loss is computed
    identically on every rank from the reduced value, so each rank's
    partial input gets the result's gradient unchanged (divided by the
    group size for a mean).
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_MeshAxesAttr:$axes,
                       Loom_ReduceKindAttr:$kind);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$kind $input `over` $axes attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Loom_AllGatherOp : Loom_Op<"all_gather", [
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "concatenate the ranks' tensors along `dim`, in group order";
  let description = [{
    Gradient (sequence parallelism: a sequence-sharded activation gathered
    to enter a tensor-parallel region, Megatron's all-gather before the
    column-parallel layers): each rank's consumers yield only their share of
    the gathered value's gradient, so the gradient is the reduce_scatter
    (sum) of the shares (SequenceShardingOps.cpp).
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_MeshAxesAttr:$axes, I64Attr:$dim);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_ReduceScatterOp : Loom_Op<"reduce_scatter", [
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "reduce over a group, then keep this rank's slice of `dim`";
  let description = [{
    Rank i of the group gets slice i (of size dim / group) of the sum (or
    mean) of the ranks' inputs. Gradient: every rank's input reached every
    slice, so it gets the all_gather of the slices' gradients (divided by
    the group size for a mean). Tensor parallelism uses a mean over
    identical inputs to hand each rank its own key/value heads.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_MeshAxesAttr:$axes, I64Attr:$dim,
                       Loom_ReduceKindAttr:$kind);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input `over` $axes `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_CopyToParallelOp : Loom_Op<"copy_to_parallel", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "identity in the forward pass, all_reduce (sum) of the gradient";
  let description = [{
    Megatron's "f": marks a replicated activation entering a tensor-parallel
    region (the input of column-parallel matmuls). Each rank's backward
    pass yields only its shards' share of the activation's gradient, so
    the gradient is summed over `axes`. Not Pure: folding it away before
    autodiff would lose that sum.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_MeshAxesAttr:$axes);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `over` $axes attr-dict `:` type($input)";
}

#endif // LOOM_SHARDING
