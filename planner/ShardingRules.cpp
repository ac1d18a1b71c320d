//===- ShardingRules.cpp --------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/ShardingRules.h"

#include <cctype>
#include <vector>

namespace loom::planner {

namespace {

std::vector<std::string> splitDots(const std::string &s) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == '.')
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

bool isNumber(const std::string &s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  return true;
}

bool oneOf(const std::string &s, std::initializer_list<const char *> names) {
  for (const char *n : names)
    if (s == n)
      return true;
  return false;
}

} // namespace

std::optional<int> layerIndexOf(const std::string &name) {
  std::vector<std::string> parts = splitDots(name);
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (oneOf(parts[i], {"layers", "h", "blocks", "layer"}) && isNumber(parts[i + 1]))
      return std::stoi(parts[i + 1]);
  return std::nullopt;
}

bool isBias(const std::string &name) {
  std::vector<std::string> parts = splitDots(name);
  return parts.back() == "bias";
}

std::optional<TpRule> tpRuleForName(const std::string &name) {
  std::vector<std::string> parts = splitDots(name);
  // The module is the component before "weight"/"bias".
  std::string module = parts.size() >= 2 ? parts[parts.size() - 2] : parts.back();
  std::string parent = parts.size() >= 3 ? parts[parts.size() - 3] : "";
  bool bias = parts.back() == "bias";
  std::optional<TpRule> weightRule;
  if (oneOf(module, {"q_proj", "k_proj", "v_proj", "qkv_proj", "c_attn", "query_key_value",
                     "gate_proj", "up_proj", "gate_up_proj", "c_fc", "fc1", "w1", "w3",
                     "dense_h_to_4h", "query", "key", "value"}))
    weightRule = TpRule::Column;
  else if (oneOf(module, {"o_proj", "down_proj", "c_proj", "out_proj", "fc2", "w2",
                          "dense_4h_to_h"}) ||
           (module == "dense" && (parent == "attention" || parent == "self_attention")))
    weightRule = TpRule::Row;
  else if (oneOf(module, {"embed_tokens", "wte", "lm_head", "word_embeddings", "embed_out",
                          "output"}))
    weightRule = TpRule::Vocab;
  else if (oneOf(module, {"wpe", "position_embeddings", "embed_positions"}) ||
           module.find("norm") != std::string::npos || module.rfind("ln", 0) == 0)
    weightRule = TpRule::Replicated;
  if (!weightRule)
    return std::nullopt;
  if (bias && *weightRule == TpRule::Row)
    return TpRule::Replicated;
  return weightRule;
}

const char *phaseName(Phase p) {
  switch (p) {
  case Phase::Forward: return "fwd";
  case Phase::Backward: return "bwd";
  case Phase::Optimizer: return "opt";
  }
  return "?";
}

const char *tpRuleName(TpRule r) {
  switch (r) {
  case TpRule::Replicated: return "replicated";
  case TpRule::Column: return "column";
  case TpRule::Row: return "row";
  case TpRule::Vocab: return "vocab";
  }
  return "?";
}

const char *commKindName(CommKind k) {
  switch (k) {
  case CommKind::AllGather: return "all-gather";
  case CommKind::ReduceScatter: return "reduce-scatter";
  case CommKind::AllReduce: return "all-reduce";
  case CommKind::SendRecv: return "send/recv";
  }
  return "?";
}

} // namespace loom::planner
