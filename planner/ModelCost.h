//===- ModelCost.h - What the planner knows about a model -------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The model as the cost model sees it: every op of one training step for one
// microbatch (FLOPs, elements moved, GEMM shape, which layer it belongs to),
// the parameters with their tensor-parallel rule, the tensors the backward
// pass reads (saved activations) and the tensor-parallel collectives the
// forward and backward imply. planner/ir/IrCost.cpp fills it by walking the
// training-step IR; nothing here depends on MLIR, so the arithmetic that
// consumes it is unit-tested on hand-made instances.
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_MODELCOST_H
#define LOOM_PLANNER_MODELCOST_H

#include "planner/ProgramCost.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::planner {

/// Layer index of the embedding group. Transformer layers are 0..L-1 and the
/// head group (final norm, LM head, loss) is L.
constexpr int kEmbedLayer = -1;

enum class Phase : uint8_t { Forward, Backward, Optimizer };
const char *phaseName(Phase p);

enum class OpKind : uint8_t {
  View,        // reshape/transpose: no kernel on a GPU (a view or fused)
  Matmul,      // GEMM: compute-bound when large
  Attention,   // fused attention forward or backward
  MemoryBound, // everything else: time = bytes / HBM bandwidth
  Optimizer,   // AdamW and gradient-norm work, once per step
};

/// Megatron-style tensor-parallel layout of a parameter.
enum class TpRule : uint8_t {
  Replicated, // norms, position embeddings, biases after a row-parallel GEMM
  Column,     // output features split: q/k/v, gate/up
  Row,        // input features split: o_proj, down_proj
  Vocab,      // vocabulary split: token embedding, LM head
};
const char *tpRuleName(TpRule r);

enum class CommKind : uint8_t { AllGather, ReduceScatter, AllReduce, SendRecv };
const char *commKindName(CommKind k);

struct CostOp {
  std::string name; // IR op name, e.g. "loom.matmul"
  Phase phase = Phase::Forward;
  OpKind kind = OpKind::MemoryBound;
  int layer = kEmbedLayer;
  double flops = 0;    // one microbatch, whole (unsharded) op
  double elements = 0; // elements read + written, whole op
  double outElements = 0; // elements written (transient memory of the op)
  // GEMM shape [M x K] * [K x N], batch dims folded into M.
  double m = 0, n = 0, k = 0;
  int tpDim = -1;    // 0: M, 1: N, 2: K — the dim tensor parallelism splits
  int tokenDim = -1; // the dim that counts tokens (context parallelism splits it)
  bool fp8 = false;  // a GEMM inside a transformer layer: fp8 when the plan is
  // Attention: lengths and head dim for the efficiency lookup.
  double seqQ = 0, seqK = 0, headDim = 0;
  bool causal = false;
  double kvElements = 0; // key + value elements (context-parallel ring traffic)
  int param = -1;        // optimizer ops: index into ModelCost::params
  bool recomputeSelective = false; // forward op re-run in backward under selective AC
  bool recomputeFull = false;      // ... under full AC (both as the recompute pass decides)
};

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  double elements = 0;
  int layer = kEmbedLayer;
  TpRule rule = TpRule::Replicated;
  int shardAxis = -1;            // axis tensor parallelism splits
  bool tiedToHead = false;       // embedding table also used as the LM head
  bool ruleFromDataflow = false; // name not recognized: rule read off the graph
};

/// A forward tensor the backward pass reads (views resolved to the tensor
/// they view, each counted once).
struct SavedTensor {
  int layer = kEmbedLayer;
  double elements = 0;
  int bytesPerElement = 0; // 0: float activation at the plan's width; else its own width
                           // (integers; attention's logsumexp, f32 in every plan)
  // Kept under each activation-checkpoint policy, as the compiler's
  // recompute pass decides (passes/Recompute.h): full keeps what crosses a
  // layer boundary, selective torchtitan's save list (every other GEMM
  // output, attention's output and logsumexp) and what recomputing the
  // rest starts from.
  bool none = true, selective = true, full = true;
  bool gemmOnly = false; // only GEMMs read it in backward: stored in fp8 under fp8
  std::string producer;  // IR op that made it, for --explain
};

/// A tensor-parallel collective of one layer, one microbatch (Megatron with
/// sequence parallelism: all-gather before column-parallel GEMMs,
/// reduce-scatter after row-parallel ones; backward mirrors them).
struct TpCollective {
  int layer = 0;
  Phase phase = Phase::Forward;
  CommKind kind = CommKind::AllGather;
  double elements = 0; // the full (gathered) tensor, before context parallelism
  bool fp32 = false;   // fp32 payload (loss statistics), else activation width
  std::string what;
};

/// What an activation-checkpoint policy keeps and re-runs, as the
/// compiler's recompute pass decides it on the training step: one
/// transformer layer in detail, the whole step in totals.
struct RecomputeReport {
  std::string policy;                  // none, selective, full
  int layer = 0;                       // the layer described
  // That layer's kept tensors ("matmul q_proj [4x2048x2048]") and their
  // bytes for one microbatch at the plan's activation width.
  std::vector<std::pair<std::string, double>> kept;
  std::vector<std::string> recomputed; // "rms_norm input_layernorm", ... (that layer)
  int recomputedOps = 0;               // ops re-run per microbatch, every layer
  double recomputeFlops = 0;           // GEMM and attention FLOPs among them
};

/// Memory of one device in bytes, by what it holds.
struct MemoryBreakdown {
  double params = 0, grads = 0, optimizer = 0, activations = 0, comm = 0, workspace = 0;
  double total() const { return params + grads + optimizer + activations + comm + workspace; }
};

struct ModelCost {
  std::string model;      // file it came from
  std::string costSource; // which IR the costs come from
  bool backwardFromIr = true;
  std::vector<std::string> notes;
  int64_t batch = 0, seq = 0; // microbatch the costs are for
  int numLayers = 0;
  int64_t heads = 0, kvHeads = 0, headDim = 0, hidden = 0, vocab = 0;
  double boundaryElements = 0; // residual stream between layers, one microbatch
  std::vector<ParamInfo> params;
  std::vector<CostOp> ops;
  std::vector<SavedTensor> saved;
  std::vector<TpCollective> tpCollectives;
  // The compiler's own buffer plan of the single-device training step at
  // this microbatch (as `loom train --precision bf16` compiles it, with the
  // CUDA backend's scratch and GEMM workspace), when it
  // compiles.
  bool hasBufferPlan = false;
  MemoryBreakdown bufferPlan;
  std::string bufferPlanNote; // why there is none, or how it was made
  // The same with each activation-checkpoint policy applied by the
  // compiler's recompute pass, indexed by planner::Checkpoint (selective,
  // full; [0], none, is bufferPlan above and unused here).
  bool hasPolicyBufferPlan[3] = {false, false, false};
  MemoryBreakdown policyBufferPlan[3];
  std::vector<RecomputeReport> recompute; // none, selective, full (when the step was built)
  // The same compiled programs, instruction by instruction (ProgramCost.h),
  // indexed like policyBufferPlan ([0] none, [1] selective, [2] full), and
  // the fp8 (tensorwise) programs of each policy when they were built: the
  // one-GPU step's time is priced from them, not from the IR walk.
  bool hasProgramWork[3] = {false, false, false};
  std::vector<InstrWork> programWork[3];
  bool hasFp8ProgramWork[3] = {false, false, false};
  std::vector<InstrWork> fp8ProgramWork[3];
  std::string fp8ProgramNote; // why there is none

  int headLayer() const { return numLayers; }
  double totalParams() const {
    double n = 0;
    for (const ParamInfo &p : params) n += p.elements;
    return n;
  }
};

} // namespace loom::planner

#endif
