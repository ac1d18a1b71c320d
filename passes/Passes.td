//===- Passes.td - loom passes -----------------------------*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES
#define LOOM_PASSES

include "mlir/Pass/PassBase.td"

def FuseActivations : Pass<"loom-fuse-activations", "mlir::func::FuncOp"> {
  let summary = "Turn decomposed silu, swiglu and tanh-gelu into loom ops";
  let description = [{
    x * sigmoid(x) becomes silu(x), and silu(gate) * up (Llama's gated
    feed-forward) swiglu(gate, up) when nothing else reads the silu; GPT-2's
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

def BuildTrainStep : Pass<"loom-build-train-step", "mlir::ModuleOp"> {
  let summary = "Build @train_step: forward, loss, backward, clipping, schedule, AdamW";
  let description = [{
    From `@forward(tokens) -> logits` builds
    `@train_step(params..., exp_avg..., exp_avg_sq..., step, tokens, targets)
       -> (loss, grad_norm, lr, params'..., exp_avg'..., exp_avg_sq'...)`:
    mean cross-entropy of the logits against the targets, reverse-mode
    gradients through every op's DifferentiableOpInterface (gradients of a
    value used twice, such as tied embeddings, add up), global grad-norm
    clipping as torch.nn.utils.clip_grad_norm_, the learning-rate schedule
    computed from `step` inside the graph, and one AdamW op per parameter.
    Results that update state carry `loom.updates = <argument index>`.
    Parameters are the constants with #loom.param, minus `frozen`, plus
    named constants matching `trainable`.
  }];
  let options = [
    Option<"lr", "lr", "double", "1e-3", "peak learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.95", "AdamW beta2">,
    Option<"epsilon", "eps", "double", "1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.1", "decoupled weight decay">,
    Option<"maxGradNorm", "max-grad-norm", "double", "1.0", "clip the global grad norm to this (0: off)">,
    Option<"warmupSteps", "warmup", "int64_t", "0", "linear warmup steps: lr (s+1)/warmup">,
    Option<"schedule", "schedule", "std::string", "\"constant\"", "after warmup: constant, cosine or linear">,
    Option<"totalSteps", "total-steps", "int64_t", "0", "steps the decay runs over">,
    Option<"minLrRatio", "min-lr-ratio", "double", "0.0", "final lr as a fraction of the peak">,
    Option<"trainable", "trainable", "std::string", "\"\"", "regex: named constants to train as well">,
    Option<"frozen", "frozen", "std::string", "\"\"", "regex: parameters to keep fixed">,
    Option<"returnGradients", "return-gradients", "bool", "false",
           "also return each parameter's unclipped gradient (named grad.<param>), for checks">,
    Option<"returnActivationSums", "return-activation-sums", "bool", "false",
           "also return, for every rms_norm/layer_norm, the sum of squares of its input (the "
           "residual stream entering it; named act_sumsq.<k>), after any gradients, for checks">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def AutocastBf16 : Pass<"loom-autocast-bf16", "mlir::func::FuncOp"> {
  let summary = "bf16 mixed precision with torch.autocast's dtype rules";
  let description = [{
    Like torch.autocast(dtype=bfloat16): the operands of every f32
    `loom.matmul` (and fused `loom.attention`) are rounded to bf16 and its
    result is bf16; a rank-1 bias added right after a matmul is part of the
    GEMM (addmm), so the bias is rounded and the sum is rounded once. From
    there PyTorch's dtype promotion decides: element-wise ops whose tensor
    operands are all bf16 give bf16 results (rounded; rank-0 operands are
    Python scalars and do not promote), a bf16 tensor meeting an f32 tensor
    gives f32, ops on autocast's f32 list (softmax, layer_norm, rms_norm,
    exp, log, pow, rsqrt, reciprocal, sum, cross_entropy) give f32, and data
    movement keeps the dtype. Parameters, the loss and the optimizer stay in
    f32 (fp32 master weights). The rounding is explicit as a pair of casts
    (f32 -> bf16 -> f32), so autodiff sees it: the cast's gradient rule
    rounds the incoming gradient as well, as PyTorch's backward produces
    bf16 gradients for bf16 tensors. A backend may fuse the casts into bf16
    kernels. Run after fusion (a fused attention is treated as SDPA) and
    before `loom-build-train-step`; run before attention fusion, it would
    also round an eager attention's scores and probabilities.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def SinkWideningCasts : Pass<"loom-sink-widening-casts", "mlir::func::FuncOp"> {
  let summary = "Move bf16 -> f32 casts below the reshapes and transposes that read them";
  let description = [{
    layout(cast_f32(x)) becomes cast_f32(layout(x)), which is the same value,
    when every reader of the layout chain is a matmul or an attention op:
    the widening cast then sits on the operand itself, where
    `loom-use-bf16-matmuls`, codegen's bf16-in/f32-out GEMMs and the
    attention ops' bf16_operands flag recognize it. Run on the finished
    training step, before `loom-use-bf16-matmuls`.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FoldAttentionTransposes : Pass<"loom-fold-attention-transposes", "mlir::func::FuncOp"> {
  let summary = "Attention on tokens-major [B, T, H, D] operands: the head transposes cancel";
  let description = [{
    attention(T q, T k, T v), T the [0, 2, 1, 3] swap reached through
    casts and rotary ops, becomes T attention(q, k, v) {layout =
    tokens_major}, and so do the attention_grads that read its lse; the
    T after each result sinks through casts and rotary_grad into the
    transposes that merge the heads, where T T = 1. Same values, two
    activation copies fewer per attention forward and four per backward.
    Run on the finished training step (after the bf16 passes).
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def HoistNarrowingCasts : Pass<"loom-hoist-narrowing-casts", "mlir::func::FuncOp"> {
  let summary = "Move f32 -> bf16 casts above the reshapes, transposes and concats they read";
  let description = [{
    cast_bf16(layout(x0, x1, ...)) becomes layout(cast_bf16(x0), ...), which
    is the same value, when the rounding is the layout result's only reader:
    the layout ops then move bf16, a matmul rounded this way becomes a bf16
    GEMM (`loom-use-bf16-matmuls`) and a producer that may write bf16
    storage (attention_grad's dq, dk, dv) writes it directly. Run on the
    finished training step, before `loom-use-bf16-matmuls`.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def UseBf16Matmuls : Pass<"loom-use-bf16-matmuls", "mlir::func::FuncOp"> {
  let summary = "Run matmuls whose operands and result are bf16-rounded on bf16 tensors";
  let description = [{
    After `loom-autocast-bf16` every autocast matmul reads operands of the form
    cast(bf16 -> f32)(a) and its only user rounds the result back to bf16.
    Such a matmul becomes one on the bf16 tensors with a bf16 result, which
    is the same arithmetic (exact widening, f32 accumulation, one rounding)
    without the f32 copies: backends run it as a tensor-core GEMM, and the
    f32 versions of the operands no longer need memory. Run on the finished
    training step (after `loom-build-train-step`), where the backward's
    matmuls have the same shape. A matmul whose result only gets a bias
    vector added before the rounding (addmm) becomes one `matmul_bias`
    on the bf16 tensors: the bias goes into the GEMM's epilogue.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseMatmulAccumulate : Pass<"loom-fuse-matmul-accumulate", "mlir::func::FuncOp"> {
  let summary = "Sum the backward's input-gradient products in the GEMMs' accumulators";
  let description = [{
    A value read by several matmuls (the normed hidden state by q, k and v,
    or by gate and up) gets one input-gradient product per reader, and the
    backward sums them with adds: add(x, matmul(a, b)). Each such add, after
    the function's loss gradient (loom.cross_entropy_grad), becomes
    matmul_accumulate(a, b, x): a GEMM with beta = 1 reads x as its C
    matrix, so the sum costs no pass over memory of its own. Exact: the
    GEMM rounds its accumulator plus x once, as the add rounded the product's
    result plus x. Only products with the sum's type (f32, or f64) fuse;
    autocast's input-gradient products are bf16 GEMMs with f32 results. Run
    on the finished training step, after `loom-use-bf16-matmuls`.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseNormGradAccumulate : Pass<"loom-fuse-norm-grad-accumulate", "mlir::func::FuncOp"> {
  let summary = "Sum the residual stream's gradients in the norms' gradient kernels";
  let description = [{
    add(x, rms_norm_grad(h, w, dy).dx), the norm's dx read only by that add
    and x defined before the norm's gradient, becomes
    rms_norm_grad(h, w, dy accumulate x) where the norm's gradient was; the
    same for layer_norm_grad. In a pre-norm decoder x is the skip
    connection's gradient, so each layer's two residual sums cost no pass
    over memory of their own. Exact: dx is rounded to its type, then x is
    added in that type, as the add did. Run on the finished training step.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseEmbeddingGradAccumulate
    : Pass<"loom-fuse-embedding-grad-accumulate", "mlir::func::FuncOp"> {
  let summary = "Sum a tied LM head's weight gradient in the embedding gradient's kernel";
  let description = [{
    add(x, embedding_grad(dy, ids)), embedding_grad read only by that add
    and x defined before it, becomes embedding_grad(dy, ids accumulate x)
    where embedding_grad was. With tied embeddings x is the LM head's weight
    gradient, and the table's two gradients are summed without a pass over
    the [vocabulary, hidden] table of their own. Exact: each summed row is
    rounded to its type, then x is added in that type, as the add did. Run
    on the finished training step.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseAddRmsNorm : Pass<"loom-fuse-add-rms-norm", "mlir::func::FuncOp"> {
  let summary = "A residual add and the rms_norm that reads it in one kernel";
  let description = [{
    rms_norm(add(a, b), w), the add of one type and shape (no broadcast)
    and w defined before it, becomes add_rms_norm(a, b, w) where the add
    was: its sum replaces the add's result for every other reader (the
    next residual add, the norm's gradient) and its norm the rms_norm's.
    The norm then normalizes the sum from the registers it stored it from
    instead of reading it back. Exact: the sum is rounded to its type as
    the add did, and the norm reads those values. Run on the finished
    training step, after recompute; not with fp8 (whose amax may ride on
    the norm's kernel).
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseCrossEntropyGrad : Pass<"loom-fuse-cross-entropy-grad", "mlir::func::FuncOp"> {
  let summary = "Compute the loss and its logits' gradient in one pass over the logits";
  let description = [{
    cross_entropy(x, t) and cross_entropy_grad(x, t, dl) of the same logits
    and targets in one block become one cross_entropy_with_grad(x, t, dl)
    where the loss was, when dl is there or is made from values that are
    by a few side-effect-free ops, which move up (the backward's seed: a
    constant, or 1 * 1/tp). The two kernels each found every row's max and
    sum of exponentials; the fused one finds them once, so the logits
    ([tokens, vocabulary], the step's largest activation) are read twice
    instead of three times. Exact: the same row statistics, loss terms and
    gradient formula. Run on the finished training step, after recompute.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseGradientClipping : Pass<"loom-fuse-gradient-clipping", "mlir::func::FuncOp"> {
  let summary = "Read each gradient once for the global norm and once for AdamW";
  let description = [{
    reduce(sum, every axis, x * x), the product used only there, becomes
    sum_squares(x); adamw(p, g * s, m, v, lr, step), with s a rank-0 f32
    tensor (the clip coefficient) and the product used only there, becomes
    adamw(p, g, m, v, lr, step) with grad_scale s. Every rounding stays
    where it was (each square and g * s are rounded to f32 as the product
    buffers were), so results are bit-identical with two passes over every
    gradient fewer. Run on the finished training step, after the SPMD
    passes, which find the norm terms and the clip in BuildTrainStep's
    unfused form (passes/TrainStepStructure.cpp).
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseGlobalSumSquares : Pass<"loom-fuse-global-sum-squares", "mlir::func::FuncOp"> {
  let summary = "Sum the gradient norm's squares in one op";
  let description = [{
    A chain of rank-0 adds whose every term is a sum_squares read only by
    that add, ((sum_squares(g0) + sum_squares(g1)) + ...) as
    loom-fuse-gradient-clipping leaves the global gradient norm, becomes
    one loom.global_sum_squares(g0, g1, ...) where the chain's last add
    was: the same value, bit for bit, which a backend computes in a few
    launches rather than two per parameter. Run it after
    `loom-fuse-gradient-clipping`.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def AnnotateDataParallel : Pass<"loom-annotate-data-parallel", "mlir::ModuleOp"> {
  let summary = "Seed the device mesh and data-parallel shardings of @train_step";
  let description = [{
    Sets `loom.mesh` on the module and `loom.sharding` on every argument and
    result of @train_step for a plan dp_replicate=R, dp_shard=S. The step
    is built per rank (the importer specializes static shapes, so the
    driver imports at the local batch B / (R S)): tokens and targets are
    Shard(0) along both data-parallel axes. Parameters, their gradients and
    both AdamW moments are Shard(0) along dp_shard when their dim 0 divides
    by S, and Replicate otherwise (scalars and indivisible dim 0 stay
    whole); everything is Replicate along dp_replicate. Types are not
    changed here: `loom-insert-fsdp-collectives` partitions.
  }];
  let options = [
    Option<"dpReplicate", "dp-replicate", "int64_t", "1", "ranks that replicate the model (DDP / HSDP)">,
    Option<"dpShard", "dp-shard", "int64_t", "1", "ranks that shard the model (FSDP / ZeRO-3)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def InsertFsdpCollectives : Pass<"loom-insert-fsdp-collectives", "mlir::ModuleOp"> {
  let summary = "Partition @train_step along dp_shard (FSDP / ZeRO-3)";
  let description = [{
    For every parameter annotated Shard(0) along dp_shard: the parameter and
    its AdamW moments become the local shard (dim 0 / S); an all_gather
    before the first use rebuilds the full parameter for forward and
    backward; the gradient is reduce_scattered (mean) so AdamW updates the
    local shard; its gradient-norm term is the all_reduce (sum) of the local
    sum of squares. Parameters replicated along dp_shard get their gradient
    all_reduced (mean). The loss is all_reduced (mean), so with equal local
    batches every rank reports the global batch's mean cross-entropy.
    Gathers are placed `prefetch` parameters ahead of their first use (in
    first-use order), so the next layer's gather is issued before the
    current layer computes. With `reshard-after-forward` the gathered
    forward copy dies after its last forward use and the backward pass
    gathers again (FSDP's default: memory for communication).
  }];
  let options = [
    Option<"reshardAfterForward", "reshard-after-forward", "bool", "true",
           "gather again for the backward pass instead of keeping the forward's copy">,
    Option<"prefetch", "prefetch", "int64_t", "1",
           "issue each gather this many parameters ahead of its first use">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def InsertDdpCollectives : Pass<"loom-insert-ddp-collectives", "mlir::ModuleOp"> {
  let summary = "Average gradients and the loss over dp_replicate (DDP; HSDP's outer axis)";
  let description = [{
    Every parameter's gradient as AdamW sees it (after FSDP's
    reduce_scatter, when dp_shard is also used) is all_reduced (mean) over
    dp_replicate right after it is computed; the gradient norm then reads
    identical values on every rank. The loss is all_reduced (mean).
    With `bucket-bytes` > 0, gradients are grouped in the order backward
    completes them into buckets of up to that many bytes (a larger
    gradient gets its own), and each bucket is one all_reduce of the
    flattened, concatenated gradients, issued as soon as its last gradient
    is complete (PyTorch DDP's bucketing; fewer, larger collectives that
    still overlap the rest of the backward pass).
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "0",
           "gradient bytes per all_reduce bucket (0: one all_reduce per gradient)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def ShardTensorParallel : Pass<"loom-shard-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron column/row tensor parallelism of @forward";
  let description = [{
    Splits the attention and MLP weights of @forward over `tp` ranks
    (column parallel in, row parallel out, grouped-query heads split with
    their queries), enters each group through copy_to_parallel and leaves
    it through all_reduce (sum); see ShardTensorParallel.cpp. Sets the
    mesh's tp size and `loom.tp_groups` (how many groups were split) on
    @forward. Run after fusion, before loom-build-train-step.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1", "tensor-parallel ranks">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def ReduceTensorParallelNorm : Pass<"loom-reduce-tensor-parallel-norm", "mlir::ModuleOp"> {
  let summary = "Global gradient norm over tensor-parallel shards";
  let description = [{
    In @train_step built from a tensor-parallel @forward, the gradient of
    a parameter split over tp is this rank's slice, so its sum of squares
    is all_reduced (sum) over tp; replicated parameters' gradients are
    identical on every tp rank and count once. Parameters and their AdamW
    moments get the constant's `loom.sharding`.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

//===----------------------------------------------------------------------===//
// Context, sequence and loss parallelism (issue 18). On @forward before
// autodiff, in this order after loom-shard-tensor-parallel; then
// loom-expand-context-attention on the finished step.
//===----------------------------------------------------------------------===//

def ShardVocabParallel : Pass<"loom-shard-vocab-parallel", "mlir::ModuleOp"> {
  let summary = "Vocabulary-parallel embedding and LM head over tp (loss parallelism)";
  let description = [{
    Splits the output head's weight along the vocabulary (column parallel:
    each tp rank computes logits [..., V / tp] from the head's input, which
    enters through copy_to_parallel) and every embedding table of the token
    ids along its rows (vocab_shard_embedding, whose shares an all_reduce
    (sum) adds up); a tied table is split once for both. @forward's result
    then carries `#loom.placement<tp, shard(last)>`, and
    loom-build-train-step computes cross-entropy from the sharded logits
    (max and sum of exponentials reduced over tp, never [B, T, V] on a
    rank). Refuses a vocabulary that does not divide by tp.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1", "tensor-parallel ranks">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def ShardContextParallel : Pass<"loom-shard-context-parallel", "mlir::ModuleOp"> {
  let summary = "Context parallelism: @forward on this rank's load-balanced sequence chunks";
  let description = [{
    The sequence of T tokens is cut into 2 cp chunks and rank c keeps chunks
    c and 2 cp - 1 - c (every rank then sees the same number of causal
    keys). From the token ids, every activation takes its local type (the
    sequence dim / cp), position tables (rotary cos/sin, position ids) are
    reordered into that layout and sliced per rank (shard_slice), attention
    becomes context_attention over the cp group (`rotate`: allgather or
    ring), and each parameter is read through copy_to_parallel over cp, so
    its gradient sums every rank's tokens. The token ids and the logits
    carry `#loom.placement<cp, shard(1)>`; loom-build-train-step averages
    the loss over cp. Refuses T not divisible by 2 cp.
  }];
  let options = [
    Option<"cp", "cp", "int64_t", "1", "context-parallel ranks">,
    Option<"rotate", "rotate", "std::string", "\"allgather\"",
           "how the keys and values reach the other ranks: allgather or ring">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def ShardSequenceParallel : Pass<"loom-shard-sequence-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron sequence parallelism between tensor-parallel regions";
  let description = [{
    After loom-shard-tensor-parallel (and the vocabulary and context
    passes): each tensor-parallel region's entry (copy_to_parallel of an
    activation) becomes an all_gather over tp along the sequence, each exit
    (all_reduce (sum) over tp) a reduce_scatter along it, and everything in
    between (norms, residual adds, bias adds, an unsplit embedding or head)
    runs on 1/tp of the tokens, with the parameters it reads entering
    through copy_to_parallel over tp. Without loss parallelism the token ids
    themselves are split over tp and the logits are rows of this rank.
    Refuses attention outside a tensor-parallel region.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1", "tensor-parallel ranks">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def RegatherSequenceParallel : Pass<"loom-regather-sequence-parallel", "mlir::ModuleOp"> {
  let summary = "Gather sequence-parallel activations again for the backward pass";
  let description = [{
    On the built @train_step: an all_gather over tp whose result the
    backward reads too (the input of column-parallel matmuls, which their
    weight gradients need) is issued again right before its first backward
    reader, as Megatron's sequence parallelism does, so that only the
    rank's 1/tp shard is kept from the forward to the backward instead of
    the gathered whole. copy_to_parallel, the identity once autodiff has
    run, is dropped.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def ExpandContextAttention : Pass<"loom-expand-context-attention", "mlir::ModuleOp"> {
  let summary = "Explicit collectives and per-block attention for context_attention";
  let description = [{
    On the built @train_step: every context_attention becomes causal
    attention over the local chunks plus, for each of the cp - 1 other
    ranks' key blocks (an all_gather once, then a per-rank pick; or a
    collective_permute per step around the ring), two unmasked attention
    calls whose rows the rank's place in the ring selects (where), merged
    by their logsumexp; every context_attention_grad becomes attention_grad
    per block with the merged output and logsumexp, the key and value
    gradients returned by a reduce_scatter (allgather) or carried around
    the ring. copy_to_parallel, the identity once autodiff has run, is
    dropped.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def Fp8Linears : Pass<"loom-fp8-linears", "mlir::func::FuncOp"> {
  let summary = "Run linear layers' products on fp8 operands with dynamic scaling";
  let description = [{
    Every matmul of an activation by a parameter (attention projections,
    MLP) becomes `loom.fp8_matmul` with the recipe's scaling: `tensorwise`
    (one scale per tensor, e4m3 for inputs, weights and gradients: torchao's
    default recipe) or `rowwise` (per row of each operand over its
    contracting dim, power-of-two scales, e4m3: torchao's rowwise recipe).
    The output head (the product that becomes the logits), the embedding
    and attention's own products stay as they are unless `lm-head` is set
    (for the head). A bf16-rounded weight is read as the f32 parameter.
    Run after autocast and the sharding passes (tp, vocabulary, cp, sp), before
    `loom-build-train-step`; `loom-insert-fp8-casts` lowers the products.
  }];
  let options = [
    Option<"scaling", "scaling", "std::string", "\"tensorwise\"", "tensorwise or rowwise">,
    Option<"lmHead", "lm-head", "bool", "false", "also the output head's product">,
    Option<"gradFormat", "grad-format", "std::string", "\"e4m3\"",
           "format of the output gradients: e4m3 (torchao's default) or e5m2">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def InsertFp8Casts : Pass<"loom-insert-fp8-casts", "mlir::func::FuncOp"> {
  let summary = "Spell out fp8_matmul as fp8_scale, fp8_cast and scaled_matmul";
  let description = [{
    Each `loom.fp8_matmul` becomes the amax scales of its operands
    (`loom.fp8_scale`), their fp8 copies (`loom.fp8_cast`) in the K-major
    layout fp8 GEMMs read (transposed in the same pass where the operand is
    stored the other way), and one `loom.scaled_matmul` with
    transpose_rhs, producing bf16 directly where the result is rounded to
    bf16 at once. Operands are read through widening casts and reshapes
    (bf16 activations stay bf16), and a computed operand is scaled and cast
    right after it is made, so that CSE shares copies between products.
    Run on the finished training step, then CSE.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def FuseFp8Amax : Pass<"loom-fuse-fp8-amax", "mlir::func::FuncOp"> {
  let summary = "Take tensorwise fp8 scales from an amax their input's producer writes";
  let description = [{
    A tensorwise `loom.fp8_scale` of a tensor made (through reshapes and
    bf16 rounding) by rms_norm, swiglu, swiglu_grad, rms_norm_grad's dx,
    an elementwise binary or a transpose becomes `loom.fp8_scale` of
    `loom.fp8_amax` of it: codegen makes the amax an extra output of the
    producing instruction, so the tensor is not read once more for its
    scale. The scales are bit-identical. Run after loom-insert-fp8-casts
    and CSE.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def Recompute : Pass<"loom-recompute", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing: the backward rebuilds dropped forward values";
  let description = [{
    On @train_step (after the SPMD passes and the cleanup tail), decides for
    every forward value the backward reads whether it stays in memory or is
    recomputed, per transformer layer (layers from the parameter names):
    `full` keeps only what crosses a layer boundary (each layer's input),
    `selective` keeps torchtitan's op-level save list (the 1st, 3rd, ...
    matmul output of a layer, attention's output and logsumexp) and
    recomputes the element-wise, norm and rotary work, and `budget` drops
    values in the order of least recompute time per byte until the
    compiler's buffer plan (arena, constants and the backend's workspace)
    fits `memory-budget` GiB; a budget below the footprint with every layer
    fully recomputed is an error giving that minimum. `every` applies the
    policy to every N-th layer only. Each dropped value is rebuilt by
    clones of the forward ops that made it (marked `loom.recomputed`),
    placed right before the first backward op that reads it; the clones
    are the same ops on the same operands, so the step's results are
    bit-identical to `none`'s.
  }];
  let options = [
    Option<"policy", "policy", "::loom::RecomputePolicy", "::loom::RecomputePolicy::none",
           "what each checkpointed layer keeps",
           [{::llvm::cl::values(
             clEnumValN(::loom::RecomputePolicy::none, "none", "keep everything"),
             clEnumValN(::loom::RecomputePolicy::full, "full", "keep each layer's input"),
             clEnumValN(::loom::RecomputePolicy::selective, "selective",
                        "keep every other matmul output and attention's results"),
             clEnumValN(::loom::RecomputePolicy::budget, "budget",
                        "keep what fits memory-budget at the least recompute time"))}]>,
    Option<"every", "every", "int64_t", "1",
           "apply the policy to the every-th, 2*every-th, ... layer (1: all)">,
    Option<"memoryBudgetGiB", "memory-budget", "double", "0",
           "budget: GiB the compiled step may take on the device">,
    Option<"backend", "backend", "std::string", "\"cuda\"",
           "budget: the backend whose workspace counts (cpu, cuda)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

//===----------------------------------------------------------------------===//
// Pipeline parallelism (issue 15): @forward cut into stages before autodiff,
// the finished step into stage functions and per-rank optimizers.
//===----------------------------------------------------------------------===//

def SplitPipelineStages : Pass<"loom-split-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Cut @forward into pipeline stages at layer boundaries";
  let description = [{
    Gives every op of @forward a pipeline stage and marks each value that
    one stage computes and a later stage reads with `loom.stage_boundary`
    (one hop per stage it crosses). An op's layer is the highest layer of
    the parameters it reads (from their names, `layers.3` / `h.3`), or of
    its operands; unnumbered parameters are the embedding (stage 0) when an
    embedding reads them and the head (the last stage) otherwise, so a tied
    embedding is read by both. Stage k holds layers [cuts[k-1], cuts[k]):
    `cuts` names the first layer of stages 1..stages-1 (the driver's
    balanced split, or --pp-split); without it the layers are dealt out
    evenly, the first stages taking one more where they do not divide.
    With more stages than layers, stages hold sub-blocks instead: each
    norm that reads a layer's weight begins one (a Llama layer is an
    attention and an MLP block), and the residual stream between them is
    a boundary like any other.
    Run after fusion (and tensor parallelism), before loom-build-train-step,
    whose autodiff gives each boundary its gradient.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1", "pipeline stages (pp x virtual stages)">,
    ListOption<"cuts", "cuts", "int64_t", "first layer of each stage after the first">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def SplitPipeline : Pass<"loom-split-pipeline", "mlir::ModuleOp"> {
  let summary = "Split @train_step into stage functions and per-rank optimizers";
  let description = [{
    Cuts the per-rank @train_step (built from a @forward with stage
    boundaries, after the SPMD passes) into, per stage s,
    `@stage<s>.forward` (its layers' forward for one microbatch: receives
    its input, sends its output, returns what its backward needs) and
    `@stage<s>.backward` (receives the gradient of its output, sends the
    gradient of its input, adds this microbatch's parameter gradients into
    accumulators), or with `split-backward` `@stage<s>.backward_input` and
    `@stage<s>.backward_weight` (zero-bubble schedules); and, per pipeline
    rank r, `@rank<r>.optimizer`: the data-parallel reduction of the
    accumulated gradients, the global gradient norm (each rank's sum of
    squares all_reduced over pp; a parameter several ranks hold counts
    once), clipping, the learning rate and AdamW of the parameters its
    stages hold. A parameter read by stages on two ranks (a tied
    embedding) is held by both: they exchange their accumulated parts and
    add them in stage order, so both update it identically. Boundaries
    become loom.send / loom.recv pairs; stage s runs on rank s % ranks, or
    with `vshape` on rank s for s < ranks and 2 ranks - 1 - s after (ZBV).
    Sets the mesh's pp size. Needs one all_reduce or reduce_scatter per
    gradient (no DDP buckets). Each microbatch's loss is the mean over its
    rows, so the loss gradient is seeded with 1 / microbatches and the sum
    of the microbatches' gradients is the gradient of the step's mean.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "1", "pipeline ranks (pp)">,
    Option<"vshape", "vshape", "bool", "false", "place stages in a V (ZBV) instead of a loop">,
    Option<"splitBackward", "split-backward", "bool", "false",
           "split each backward into input- and weight-gradient functions">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "microbatches per step: the loss gradient of each is seeded with 1 / microbatches, so "
           "the accumulated gradients are the step's mean">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def OutlineTransfers : Pass<"loom-outline-transfers", "mlir::ModuleOp"> {
  let summary = "Turn a pipeline function's send/recv ops into results and arguments";
  let description = [{
    In every function with #loom.pipeline_function, each `loom.recv`
    becomes a new argument and each `loom.send` a new result, tagged
    `#loom.pipeline_value<recv, tag>` / `<send, tag>`: the runtime's
    schedule executor carries them between ranks with the schedule's
    transfer actions, so codegen sees plain inputs and outputs.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

#endif // LOOM_PASSES
