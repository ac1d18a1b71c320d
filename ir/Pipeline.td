//===- Pipeline.td - Pipeline stages and point-to-point transfers -*- tablegen -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Pipeline parallelism (issue 15) in two steps. While the training step is
// one function, `loom.stage_boundary` marks each value that leaves one
// pipeline stage for the next (loom-split-pipeline-stages puts them at the
// layer boundaries of @forward); autodiff turns each into a boundary the
// other way for its gradient. loom-split-pipeline then cuts @train_step at
// those boundaries into one function per stage and phase (forward,
// backward, or the backward's input- and weight-gradient halves) and one
// optimizer function per pipeline rank, in which a boundary becomes a
// `loom.send` in the stage that computes the value and a `loom.recv` in
// the stage that reads it. The functions say what they are with
// #loom.pipeline_function, their arguments and results with
// #loom.pipeline_value, so the runtime's schedule executor (no MLIR) knows
// which buffer is a parameter, a saved activation or a gradient
// accumulator.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PIPELINE
#define LOOM_PIPELINE

def Loom_TransferKind : I32EnumAttr<"TransferKind", "what a point-to-point transfer carries", [
    I32EnumAttrCase<"activation", 0>, I32EnumAttrCase<"gradient", 1>,
    I32EnumAttrCase<"accumulated_gradient", 2>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}
def Loom_TransferKindAttr : EnumAttr<Loom_Dialect, Loom_TransferKind, "transfer_kind">;

def Loom_PipelinePhase : I32EnumAttr<"PipelinePhase", "what a pipeline function computes", [
    I32EnumAttrCase<"forward", 0>, I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"backward_input", 2>, I32EnumAttrCase<"backward_weight", 3>,
    I32EnumAttrCase<"optimizer", 4>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}

def Loom_PipelineValueKind : I32EnumAttr<"PipelineValueKind",
    "the role of a pipeline function's argument or result", [
    I32EnumAttrCase<"param", 0>, I32EnumAttrCase<"exp_avg", 1>,
    I32EnumAttrCase<"exp_avg_sq", 2>, I32EnumAttrCase<"step", 3>,
    I32EnumAttrCase<"tokens", 4>, I32EnumAttrCase<"targets", 5>,
    I32EnumAttrCase<"saved", 6>, I32EnumAttrCase<"stash", 7>,
    I32EnumAttrCase<"accumulator", 8>, I32EnumAttrCase<"loss", 9>,
    I32EnumAttrCase<"grad_norm", 10>, I32EnumAttrCase<"lr", 11>,
    I32EnumAttrCase<"act_sumsq", 12>, I32EnumAttrCase<"grad", 13>,
    I32EnumAttrCase<"recv", 14>, I32EnumAttrCase<"send", 15>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom";
}

def Loom_PipelineFunctionAttr : AttrDef<Loom_Dialect, "PipelineFunction"> {
  let mnemonic = "pipeline_function";
  let summary = "which stage and phase of a pipelined training step a function is";
  let description = [{
    `#loom.pipeline_function<forward, stage = 1, rank = 1>`: the forward of
    stage 1, which runs on pipeline rank 1. Optimizer functions belong to a
    rank (every stage it holds) and have stage -1.
  }];
  let parameters = (ins EnumParameter<Loom_PipelinePhase>:$phase, "int64_t":$stage,
                        "int64_t":$rank);
  let assemblyFormat = "`<` $phase `,` `stage` `=` $stage `,` `rank` `=` $rank `>`";
}

def Loom_PipelineValueAttr : AttrDef<Loom_Dialect, "PipelineValue"> {
  let mnemonic = "pipeline_value";
  let summary = "the role of a pipeline function's argument or result";
  let description = [{
    `#loom.pipeline_value<param, 3>`: parameter 3 of the training step (the
    order of @train_step's parameters); `<saved, 0>`: the first value the
    stage's forward keeps for its backward; `<stash, k>`: what the
    backward's input half keeps for its weight half; `<accumulator, k>`:
    gradient contribution k, summed over the microbatches of a step;
    `<recv, t>` / `<send, t>`: the value of transfer tag t (after
    loom-outline-transfers); `<act_sumsq, k>`, `<grad, i>`: the checks
    BuildTrainStep returns. Other kinds ignore the index.
  }];
  let parameters = (ins EnumParameter<Loom_PipelineValueKind>:$kind, "int64_t":$index);
  let assemblyFormat = "`<` $kind `,` $index `>`";
}

def Loom_StageBoundaryOp : Loom_Op<"stage_boundary", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>]> {
  let summary = "a value leaving pipeline stage `from` for stage `to` (identity)";
  let description = [{
    The value is computed in stage `from` and read in stage `to`; when the
    step is split into stage functions, the producer's function sends it
    and the reader's receives it. `tag` names the transfer (unique in the
    module, shared by the boundary of its gradient). Gradient: a boundary
    from `to` back to `from` with the same tag. Not Pure, so no cleanup
    folds it away before the split.
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$from, I64Attr:$to, I64Attr:$tag);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input `from` $from `to` $to `tag` $tag attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Loom_SendOp : Loom_Op<"send", []> {
  let summary = "send a value to a pipeline peer";
  let description = [{
    `peer` is a stage (activations and gradients between stage functions)
    or a pipeline rank (accumulated gradients of a parameter that several
    ranks hold, exchanged before the optimizer). Transfers between two
    functions match by `kind` and `tag`.
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_TransferKindAttr:$kind, I64Attr:$peer,
                       I64Attr:$tag);
  let assemblyFormat = "$kind $input `to` $peer `tag` $tag attr-dict `:` type($input)";
}

def Loom_RecvOp : Loom_Op<"recv", []> {
  let summary = "receive a value from a pipeline peer";
  let description = [{ The counterpart of `loom.send` (same kind and tag). }];
  let arguments = (ins Loom_TransferKindAttr:$kind, I64Attr:$peer, I64Attr:$tag);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$kind `from` $peer `tag` $tag attr-dict `:` type($result)";
}

#endif // LOOM_PIPELINE
