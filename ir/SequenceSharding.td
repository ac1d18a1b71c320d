//===- SequenceSharding.td - Sequence, context and vocabulary parallelism -*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Ops of the SPMD level for plans that shard activations along the
// sequence (context parallelism over cp, Megatron's sequence parallelism
// over tp) or the vocabulary (loss parallelism over tp); issue 18. Like the
// collectives of Sharding.td they are typed (mesh axes are enums) and carry
// gradient rules, so the partitioned @forward is differentiated by the
// ordinary autodiff. Ops whose result depends on the rank's place in its
// group (shard_slice, collective_permute) are what makes one SPMD program
// compute different rows on different ranks.
//===----------------------------------------------------------------------===//
#ifndef LOOM_SEQUENCE_SHARDING
#define LOOM_SEQUENCE_SHARDING

def Loom_CpRotate : I32EnumAttr<"CpRotate",
    "how context-parallel attention reaches the other ranks' keys and values", [
    I32EnumAttrCase<"allgather", 0>, I32EnumAttrCase<"ring", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_CpRotateAttr : EnumAttr<Loom_Dialect, Loom_CpRotate, "cp_rotate">;

def Loom_ShardSliceOp : Loom_Op<"shard_slice", [Pure,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "this rank's slice of a replicated tensor (Replicate -> Shard, no communication)";
  let description = [{
    Rank g of the group over `axes` (its place in group order) keeps slice g
    of `dim`: result dim = input dim / group size. The input must be the
    same on every rank of the group (a constant, a table); nothing is sent.
    Position tables enter sequence-sharded regions this way, and a rank
    learns its own offsets (its vocabulary range, its context-parallel
    chunks) from a constant table. Gradient: the input was replicated and
    each rank read one slice, so its gradient is the all_gather of the
    slices' gradients (Megatron's scatter-to-sequence-parallel).
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_MeshAxesAttr:$axes, I64Attr:$dim);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `over` $axes `dim` $dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_CollectivePermuteOp : Loom_Op<"collective_permute", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "ring shift: the input of the group member `shift` places before";
  let description = [{
    Rank g of the group over `axes` receives the input of member
    (g - shift) mod n, in group order (shift 1: from the previous rank, the
    ring pass-KV step of ring attention). Gradient: the same shift backwards,
    which carries each result's gradient to the rank whose input it was.
    Not Pure, like every collective.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_MeshAxesAttr:$axes, I64Attr:$shift);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `over` $axes `shift` $shift attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Loom_VocabShardEmbeddingOp : Loom_Op<"vocab_shard_embedding", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "rows of this rank's vocabulary slice; zeros for ids outside it";
  let description = [{
    `table` [Vl, D] holds global rows first .. first + Vl - 1 (`first` a
    rank-0 integer tensor, this rank's offset); an id in that range gives
    its row, any other id a row of zeros. The sum over the vocabulary-
    parallel ranks (an all_reduce or reduce_scatter) is the embedding of
    the whole table (Megatron's VocabParallelEmbedding). `vocab` is the
    whole vocabulary's size: an id outside [0, vocab) is bad data, reported
    as Embedding reports it, not a row of another rank. Gradient:
    vocab_shard_embedding_grad into the local rows.
  }];
  let arguments = (ins Loom_FloatTensor:$table, Loom_IndexTensor:$indices,
                       Loom_IndexTensor:$first, I64Attr:$vocab);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices `,` $first attr-dict `:` type($table) `,` type($indices) `,` type($first)
  }];
}

def Loom_VocabShardEmbeddingGradOp : Loom_Op<"vocab_shard_embedding_grad", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "d table of vocab_shard_embedding: scatter-add of the rows this rank holds";
  let arguments = (ins Loom_FloatTensor:$output_grad, Loom_IndexTensor:$indices,
                       Loom_IndexTensor:$first, I64Attr:$num_rows);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $output_grad `,` $indices `,` $first attr-dict `:` type($output_grad) `,` type($indices) `,`
    type($first)
  }];
}

def Loom_VocabShardCrossEntropyOp : Loom_Op<"vocab_shard_cross_entropy", [Pure,
    InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "one vocabulary shard's part of cross-entropy: sum of exponentials and the target logit";
  let description = [{
    `logits` [N, Vl] are columns first .. first + Vl - 1 of the full
    [N, V] logits; `shift` [N] is each row's maximum over the whole
    vocabulary. `sumexp`[n] = sum_v exp(logits[n, v] - shift[n]) and
    `target`[n] = logits[n, t_n - first] - shift[n] when this shard holds
    t_n, else 0. Summed over the shards (all_reduce), log(sumexp) - target
    is row n's cross-entropy, without any rank holding [N, V]. The shift
    cancels from the loss, so it gets no gradient; the logits' gradient is
    dsumexp exp(logits - shift) + dtarget onehot(t - first)
    (vocab_shard_cross_entropy_grad). A target outside [0, vocab), the
    whole vocabulary, is reported as CrossEntropy reports it.
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets,
                       Loom_IndexTensor:$first, Loom_FloatTensor:$shift, I64Attr:$vocab);
  let results = (outs Loom_FloatTensor:$sumexp, Loom_FloatTensor:$target);
  let assemblyFormat = [{
    $logits `,` $targets `,` $first `,` $shift attr-dict `:` type($logits) `,` type($targets) `,`
    type($first) `,` type($shift)
  }];
}

def Loom_VocabShardCrossEntropyGradOp : Loom_Op<"vocab_shard_cross_entropy_grad", [Pure,
    InferTypeOpAdaptor, AllTypesMatch<["shift", "sumexp_grad", "target_grad"]>]> {
  let summary = "dlogits of vocab_shard_cross_entropy";
  let description = [{
    dlogits[n, v] = dsumexp[n] exp(logits[n, v] - shift[n])
                    + (v == t_n - first ? dtarget[n] : 0).
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets,
                       Loom_IndexTensor:$first, Loom_FloatTensor:$shift,
                       Loom_FloatTensor:$sumexp_grad, Loom_FloatTensor:$target_grad);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $first `,` $shift `,` $sumexp_grad `,` $target_grad attr-dict `:`
    type($logits) `,` type($targets) `,` type($first) `,` type($shift)
  }];
}

def Loom_ContextAttentionOp : Loom_Op<"context_attention", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "attention of this rank's query rows over every context-parallel rank's keys";
  let description = [{
    The sequence is cut into 2C equal chunks (C = the group size over
    `axes`) and rank c holds chunks c and 2C - 1 - c, in that order, of the
    queries, keys and values (causal load balancing: every rank has the
    same number of visible key positions). `output` and `lse` are the rows
    of the global attention (loom.attention over the whole sequence) for
    this rank's query positions. Keys and values of the other ranks arrive
    by an all_gather (`rotate` = allgather, as in the Llama 3 paper) or by
    C - 1 ring shifts (ring, torchtitan's default); the partial results are
    merged by their logsumexp. Not Pure (it communicates). Gradient:
    context_attention_grad. `loom-expand-context-attention` replaces both
    with the explicit collectives and per-block attention after autodiff.
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, Loom_MeshAxesAttr:$axes, F64Attr:$scale,
                       BoolAttr:$causal, Loom_CpRotateAttr:$rotate);
  let results = (outs Loom_FloatTensor:$output, Loom_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value `over` $axes $rotate attr-dict `:` type($query) `,` type($key) `,`
    type($value)
  }];
  let hasVerifier = 1;
}

def Loom_ContextAttentionGradOp : Loom_Op<"context_attention_grad", [InferTypeOpAdaptor,
    AllTypesMatch<["query", "output", "output_grad"]>,
    TypesMatchWith<"lse is the logsumexp per query row", "query", "lse",
                   "::loom::attentionLseType(::llvm::cast<::mlir::RankedTensorType>($_self))">]> {
  let summary = "(dq, dk, dv) of context_attention from its merged output and logsumexp";
  let description = [{
    `output` and `lse` are context_attention's results for the same
    operands (the rows of the global attention), so every key block's share
    of the backward is attention_grad with them; dk and dv are this rank's
    own key and value rows, summed over every rank's queries (carried back
    by a reduce_scatter, or around the ring with the keys).
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, Loom_FloatTensor:$output,
                       Loom_FloatTensor:$lse, Loom_FloatTensor:$output_grad,
                       Loom_MeshAxesAttr:$axes, F64Attr:$scale, BoolAttr:$causal,
                       Loom_CpRotateAttr:$rotate);
  let results = (outs Loom_FloatTensor:$query_grad, Loom_FloatTensor:$key_grad,
                      Loom_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $lse `,` $output_grad `over` $axes $rotate attr-dict
    `:` type($query) `,` type($key) `,` type($value)
  }];
}

#endif // LOOM_SEQUENCE_SHARDING
