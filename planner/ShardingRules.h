//===- ShardingRules.h - Tensor-parallel rules from parameter names -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Megatron's layout, keyed by the module names Hugging Face and GPT-2 use:
// projections into attention heads and the MLP's hidden width are
// column-parallel, projections back to the model width are row-parallel,
// the token embedding and LM head are vocabulary-parallel, everything else
// (norms, position embeddings) is replicated. A bias follows its weight when
// the weight is column-parallel (its features are split) and is replicated
// after a row-parallel weight (it is added once, after the reduction).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_SHARDINGRULES_H
#define LOOM_PLANNER_SHARDINGRULES_H

#include "planner/ModelCost.h"

#include <optional>
#include <string>

namespace loom::planner {

/// The transformer layer a parameter belongs to ("model.layers.3.mlp..." and
/// "transformer.h.3.attn..." give 3), or nullopt for embeddings and head.
std::optional<int> layerIndexOf(const std::string &paramName);

/// The rule the name implies, or nullopt when the module name is not one
/// the table knows (the IR walk then reads the rule off the dataflow).
std::optional<TpRule> tpRuleForName(const std::string &paramName);

/// Whether the name is a bias (its rule depends on the weight's).
bool isBias(const std::string &paramName);

} // namespace loom::planner

#endif
