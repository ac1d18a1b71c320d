//===- BufferPlanMemory.cpp -----------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/BufferPlanMemory.h"
#include "loom/runtime/Communicator.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace loom::planner {

namespace {
enum class Role { Other, Param, Optimizer, Grad, Comm };
} // namespace

bool bufferPlanMemory(const rt::Program &p, MemoryBreakdown &out, std::string &err) {
  using rt::BufferKind;
  size_t n = p.buffers.size();
  std::vector<Role> role(n, Role::Other);
  int64_t lossAt = -1;
  int64_t lossGrad = -1; // the fused loss's gradient output: backward, though made there
  bool anyAdam = false;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const rt::Instr &in = p.instrs[i];
    // The loss: its own instruction, or the gradient's second output
    // (loom-fuse-cross-entropy-grad), where the backward starts as well.
    bool loss = in.op == rt::OpCode::CrossEntropy || in.op == rt::OpCode::VocabShardCrossEntropy ||
                (in.op == rt::OpCode::CrossEntropyGrad && in.out.size() == 2);
    if (loss && lossAt < 0) {
      lossAt = int64_t(i);
      if (in.op == rt::OpCode::CrossEntropyGrad)
        lossGrad = in.out[0];
    }
    if (in.op != rt::OpCode::AdamW || in.in.size() < 4 || in.out.size() < 3)
      continue;
    anyAdam = true;
    role[in.in[0]] = Role::Param;
    role[in.in[1]] = Role::Grad;
    role[in.in[2]] = role[in.in[3]] = Role::Optimizer;
    role[in.out[0]] = Role::Param;
    role[in.out[1]] = role[in.out[2]] = Role::Optimizer;
  }
  if (!anyAdam) {
    err = "the program has no AdamW step";
    return false;
  }
  // Unfused clipping (LOOM_FUSE_GRAD_CLIP=0) scales each gradient by a
  // scalar right before AdamW: the unscaled gradient it reads is a
  // gradient too. (Fused, AdamW reads the unscaled gradient itself.)
  for (const rt::Instr &in : p.instrs)
    if (in.op == rt::OpCode::Mul && in.in.size() == 2 && in.out.size() == 1 &&
        role[in.out[0]] == Role::Grad)
      for (int k = 0; k < 2; ++k)
        if (p.buffers[in.in[k]].numElements() == p.buffers[in.out[0]].numElements() &&
            p.buffers[in.in[1 - k]].numElements() == 1 && role[in.in[k]] == Role::Other)
          role[in.in[k]] = Role::Grad;
  // What collectives read and write besides the state itself: FSDP's
  // gathered parameters and unsharded gradients, DDP's buckets, tensor
  // parallelism's gathered activations.
  // A view holds no bytes of its own (a reshape without a copy): its base
  // does, and plays its role.
  std::vector<uint32_t> base = rt::viewBases(p);
  for (const rt::Instr &in : p.instrs)
    if (rt::isCollectiveOp(in.op))
      for (uint32_t id : {base[in.in[0]], base[in.out[0]]})
        if (role[id] == Role::Other && p.buffers[id].numElements() > 1)
          role[id] = Role::Comm;
  // Outputs the driver reads are copies (see codegen): follow a Cast whose
  // input plays a role, so params' etc. keep it.
  for (const rt::Instr &in : p.instrs)
    if (in.op == rt::OpCode::Cast && in.in.size() == 1 && in.out.size() == 1 &&
        role[in.out[0]] == Role::Other && p.buffers[in.out[0]].kind == BufferKind::Output)
      role[in.out[0]] = role[in.in[0]];

  // Values computed from parameters and constants alone (autocast's bf16
  // copies of the weights, transposed weights) are the compute-width copy
  // of the weights the analytical model counts as workspace, not
  // activations: they do not grow with the tokens.
  std::vector<bool> fromWeights(n, false);
  for (size_t id = 0; id < n; ++id)
    fromWeights[id] = role[id] == Role::Param || p.buffers[id].kind == BufferKind::Constant;
  for (const rt::Instr &in : p.instrs) {
    bool all = !in.in.empty() && std::all_of(in.in.begin(), in.in.end(),
                                             [&](uint32_t id) { return fromWeights[id]; });
    for (uint32_t id : in.out) {
      fromWeights[id] = all && role[id] == Role::Other;
      // Sibling weights' copies side by side (column blocks): their base.
      if (base[id] != id && fromWeights[id])
        fromWeights[base[id]] = true;
    }
  }

  int64_t end = int64_t(p.instrs.size());
  std::vector<int64_t> first(n, -1), last(n, -1);
  // Reading a view keeps its base live, as the arena planner does.
  for (int64_t i = 0; i < end; ++i) {
    for (uint32_t id : p.instrs[i].out) {
      first[id] = i;
      if (base[id] != id && first[base[id]] < 0) // a column block's base: from its first write
        first[base[id]] = i;
    }
    for (uint32_t id : p.instrs[i].in) last[id] = last[base[id]] = i;
  }
  auto liveAt = [&](size_t id, int64_t t) {
    const rt::BufferDesc &d = p.buffers[id];
    if (d.kind == BufferKind::Constant || base[id] != id)
      return false;
    int64_t from = d.kind == BufferKind::Input ? -1 : first[id];
    int64_t to = d.kind == BufferKind::Input || d.kind == BufferKind::Output
                     ? end
                     : std::max(last[id], first[id]);
    return from <= t && t <= to;
  };
  // Buffers live at step t, one per arena range: an in-place update's
  // output shares its input's bytes (AdamW writes the new parameter and
  // moments over the old ones), so the pair is counted once.
  auto liveIds = [&](int64_t t) {
    std::unordered_map<uint64_t, size_t> byOffset;
    for (size_t id = 0; id < n; ++id) {
      if (!liveAt(id, t) || p.buffers[id].bytes == 0)
        continue;
      auto [it, fresh] = byOffset.try_emplace(p.buffers[id].offset, id);
      if (!fresh && p.buffers[id].bytes > p.buffers[it->second].bytes)
        it->second = id;
    }
    std::vector<size_t> ids;
    for (auto &kv : byOffset) ids.push_back(kv.second);
    return ids;
  };
  int64_t peakAt = -1;
  double peak = -1;
  for (int64_t t = -1; t <= end; ++t) {
    double live = 0;
    for (size_t id : liveIds(t)) live += double(p.buffers[id].bytes);
    if (live > peak) {
      peak = live;
      peakAt = t;
    }
  }
  MemoryBreakdown m;
  for (size_t id : liveIds(peakAt)) {
    double bytes = double(p.buffers[id].bytes);
    switch (role[id]) {
    case Role::Param: m.params += bytes; break;
    case Role::Optimizer: m.optimizer += bytes; break;
    case Role::Grad: m.grads += bytes; break;
    case Role::Comm: m.comm += bytes; break;
    case Role::Other: {
      const rt::BufferDesc &d = p.buffers[id];
      bool forward = d.kind == BufferKind::Input ? d.numElements() > 1 // tokens, targets
                                                 : lossAt >= 0 && first[id] <= lossAt &&
                                                       int64_t(id) != lossGrad &&
                                                       !fromWeights[id];
      (forward ? m.activations : m.workspace) += bytes;
      break;
    }
    }
  }
  m.workspace += std::max(0.0, double(p.arenaBytes) - peak) + double(p.constants.size());
  out = m;
  return true;
}

} // namespace loom::planner
