//===- CostModel.cpp ------------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/CostModel.h"
#include "planner/StageBalance.h"
#include "loom/runtime/PipelineProfile.h"
#include "loom/runtime/PipelineSchedule.h"
#include "planner/Collectives.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace loom::planner {

namespace {

constexpr double kParamBytes = 4;     // fp32 parameters (the master copy)
constexpr double kGradBytes = 4;      // fp32 gradient accumulation
constexpr double kOptimizerBytes = 8; // AdamW exp_avg + exp_avg_sq, fp32
constexpr double kActBytes = 2;       // bf16 activations
constexpr double kDdpBucketBytes = 25.0 * 1024 * 1024; // torch DDP default bucket

std::string gib(double bytes) {
  std::ostringstream s;
  s.precision(bytes >= 1024.0 * 1024 * 1024 ? 1 : 3);
  s << std::fixed << bytes / (1024.0 * 1024 * 1024) << " GiB";
  return s.str();
}

// Mesh [pp, dp_replicate, dp_shard, cp, tp], tp innermost.
int cpStride(const Plan &p) { return p.tp; }
int dpsStride(const Plan &p) { return p.tp * p.cp; }
int dprStride(const Plan &p) { return p.tp * p.cp * p.dpShard; }
int ppStride(const Plan &p) { return p.tp * p.cp * p.dpShard * p.dpReplicate; }

} // namespace

int savedElementBytes(const SavedTensor &s, bool fp8, int activationBytes) {
  if (s.bytesPerElement)
    return s.bytesPerElement;
  return fp8 && s.gemmOnly ? 1 : activationBytes;
}

CostModel::CostModel(const ModelCost &model, const HardwareProfile &hw, const PlanRequest &req)
    : m(model), hw(hw), req(req) {
  globalBatch_ = req.globalBatch > 0 ? req.globalBatch : req.microbatch * req.gpus;
  numGroups = m.numLayers + 2;
  opsByGroup.assign(numGroups, {});
  tpByGroup.assign(numGroups, {});
  statics.assign(numGroups, {});
  auto clampGroup = [&](int layer) { return std::clamp(groupIndex(layer), 0, numGroups - 1); };
  for (const ParamInfo &p : m.params) {
    GroupStatic &g = statics[clampGroup(p.layer)];
    bool split = p.rule != TpRule::Replicated;
    (split ? g.paramSharded : g.paramReplicated) += p.elements;
    if (p.tiedToHead)
      (split ? g.tiedSharded : g.tiedReplicated) += p.elements;
  }
  std::map<std::string, int> kindBits;
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const CostOp &op = m.ops[i];
    if (op.phase != Phase::Optimizer) {
      opsByGroup[clampGroup(op.layer)].push_back(int(i));
      if (op.kind != OpKind::View) {
        GroupStatic &g = statics[clampGroup(op.layer)];
        g.maxOut = std::max(g.maxOut, op.outElements);
      }
      if (op.kind == OpKind::Attention)
        maxKvElements = std::max(maxKvElements, op.kvElements);
      continue;
    }
    int bit = kindBits.emplace(op.name, int(kindBits.size()) % 64).first->second;
    if (op.param < 0) {
      scalarOptElements += op.elements;
      scalarOptKinds |= uint64_t(1) << bit;
      continue;
    }
    const ParamInfo &p = m.params[op.param];
    GroupStatic &g = statics[clampGroup(p.layer)];
    (p.rule != TpRule::Replicated ? g.optSharded : g.optReplicated) += op.elements;
    g.optKinds |= uint64_t(1) << bit;
  }
  for (const SavedTensor &s : m.saved) {
    GroupStatic &g = statics[clampGroup(s.layer)];
    for (int fp8 = 0; fp8 < 2; ++fp8) {
      double bytes = s.elements * savedElementBytes(s, fp8, req.activationBytes);
      g.saved[fp8][0] += bytes;
      if (s.none) g.saved[fp8][1] += bytes;
      if (s.selective) g.saved[fp8][2] += bytes;
      if (s.full) g.saved[fp8][3] += bytes;
    }
  }
  for (const CostOp &op : m.ops)
    if (op.phase != Phase::Optimizer && (op.kind == OpKind::Matmul || op.kind == OpKind::Attention))
      flopsPerMicrobatch += op.flops * (op.kind == OpKind::Attention && op.causal ? 0.5 : 1.0);
  for (size_t i = 0; i < m.tpCollectives.size(); ++i) {
    const TpCollective &c = m.tpCollectives[i];
    tpByGroup[clampGroup(c.layer)].push_back(int(i));
    maxTpBuffer = std::max(maxTpBuffer, c.elements * (c.fp32 ? 4 : kActBytes));
  }
}

double CostModel::groupLocalParams(int g, const Plan &p, bool withTied) const {
  const GroupStatic &s = statics[g];
  double e = s.paramReplicated + s.paramSharded / p.tp;
  if (withTied)
    e = s.tiedReplicated + s.tiedSharded / p.tp;
  return e / p.dpShard;
}

double CostModel::opTime(const CostOp &op, int tp, int cp, bool fp8) const {
  double div = double(tp) * cp;
  switch (op.kind) {
  case OpKind::View:
  case OpKind::Optimizer:
    return 0;
  case OpKind::Matmul: {
    double dims[3] = {op.m, op.n, op.k};
    if (op.tpDim >= 0)
      dims[op.tpDim] /= tp;
    if (op.tokenDim >= 0)
      dims[op.tokenDim] /= cp;
    // The calibration measured n^3 cubes; a product is looked up at the
    // cube of equal work, cbrt(m n k). (The smallest dim undersold the
    // tall products of training, [B T, d] x [d, d'], at 0.43 of peak where
    // they run at 0.7; a skinny one is bound by memory below anyway.)
    double cubeDim = std::max(1.0, std::cbrt(dims[0] * dims[1] * dims[2]));
    bool low = fp8 && op.fp8;
    // fp8: the measured fp8 curve where the profile has one (loom
    // calibrate), else the assumed ratio to the bf16 curve.
    double compute = op.flops / div /
                     (low ? hw.peakFp8 * hw.fp8GemmEfficiency(cubeDim) : hw.peakBf16 * hw.gemm.at(cubeDim));
    double memory = op.elements / div * (low ? 1 : kActBytes) / hw.hbmBandwidth;
    // fp8 first quantizes the GEMM's inputs: read bf16, write fp8 (3 B per
    // input element), a memory-bound pass of its own.
    double quantize = low ? std::max(0.0, op.elements - op.outElements) / div * 3 / hw.hbmBandwidth +
                                hw.kernelOverhead
                          : 0;
    return std::max(compute, memory) + quantize + hw.kernelOverhead;
  }
  case OpKind::Attention: {
    double flops = op.flops * (op.causal ? 0.5 : 1.0) / div;
    double eff = hw.attention.at(std::max(1.0, op.seqQ / cp));
    if (op.phase == Phase::Backward)
      eff *= hw.attentionBackwardFactor;
    double compute = flops / (hw.peakBf16 * eff);
    double memory = op.elements / div * kActBytes / hw.hbmBandwidth;
    return std::max(compute, memory) + hw.kernelOverhead;
  }
  case OpKind::MemoryBound:
    return op.elements / div * kActBytes / hw.hbmBandwidth + hw.kernelOverhead;
  }
  return 0;
}

const std::vector<CostModel::GroupTimes> &CostModel::groupTimes(int tp, int cp, bool fp8,
                                                                int gpusPerNode) const {
  auto key = std::make_tuple(tp, cp, fp8);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  std::vector<GroupTimes> times(numGroups);
  const Link &tpLink = groupLink(hw, tp, 1, gpusPerNode);
  const Link &cpLink = groupLink(hw, cp, tp, gpusPerNode);
  for (int g = 0; g < numGroups; ++g) {
    GroupTimes &t = times[g];
    for (int i : opsByGroup[g]) {
      const CostOp &op = m.ops[i];
      double s = opTime(op, tp, cp, fp8);
      bool fwd = op.phase == Phase::Forward;
      (fwd ? t.fwd : t.bwd) += s;
      if (fwd && op.recomputeSelective)
        t.selectiveRecompute += s;
      if (fwd && op.recomputeFull)
        t.fullRecompute += s;
      if (op.kind == OpKind::Attention) {
        (fwd ? t.attnFwd : t.attnBwd) += s;
        // Ring attention: each rank passes its K/V chunk cp-1 times; the
        // backward passes K/V again and returns dK/dV.
        double chunk = op.kvElements / (double(tp) * cp) * kActBytes;
        double ring = (cp - 1) * (cp > 1 ? sendRecvTime(chunk, cpLink) : 0);
        (fwd ? t.cpFwd : t.cpBwd) += fwd ? ring : 2 * ring;
      }
    }
    for (int i : tpByGroup[g]) {
      const TpCollective &c = m.tpCollectives[i];
      double bytes = c.elements / cp * (c.fp32 ? 4 : kActBytes);
      double s = collectiveTime(c.kind, tp, bytes, tpLink);
      (c.phase == Phase::Forward ? t.tpFwd : t.tpBwd) += s;
    }
  }
  return cache.emplace(key, std::move(times)).first->second;
}

int CostModel::deviceOf(int layer, const Plan &p) const {
  if (p.pp == 1)
    return 0;
  int chunk = stageOf(layer, p);
  // Zero bubble with two chunks per rank folds them into a V (ZBV): the
  // head's last chunk comes back to rank 0.
  if (p.schedule == Schedule::ZeroBubble && p.virtualStages == 2 && chunk >= p.pp)
    return 2 * p.pp - 1 - chunk;
  return chunk % p.pp;
}

int CostModel::stageOf(int layer, const Plan &p) const {
  int chunks = p.pp * p.virtualStages;
  if (chunks <= 1 || layer <= kEmbedLayer)
    return 0;
  if (layer >= m.numLayers)
    return chunks - 1;
  const std::vector<int64_t> &cuts = stageCuts(p);
  if (cuts.empty()) // more stages than layers: rejected, split as evenly as it goes
    return int(int64_t(layer) * chunks / std::max(1, m.numLayers));
  return int(std::upper_bound(cuts.begin(), cuts.end(), int64_t(layer)) - cuts.begin());
}

CostModel::GroupStep CostModel::groupStep(const GroupTimes &t, int g, const Plan &p) const {
  bool layer = g >= 1 && g <= m.numLayers;
  double recompute = 0, recomputeComm = 0;
  if (layer && p.checkpoint == Checkpoint::Full) {
    // The layer's forward runs again (what the backward needs of it), its
    // tensor-parallel gathers included.
    recompute = t.fullRecompute;
    recomputeComm = t.tpFwd + std::max(0.0, t.cpFwd - t.attnFwd);
  } else if (layer && p.checkpoint == Checkpoint::Selective) {
    recompute = t.selectiveRecompute;
  }
  // Tensor-parallel collectives sit on the critical path; the
  // context-parallel ring hides behind attention when it can.
  return {t.fwd, t.bwd + recompute,
          t.tpFwd + t.tpBwd + recomputeComm + std::max(0.0, t.cpFwd - t.attnFwd) +
              std::max(0.0, t.cpBwd - t.attnBwd)};
}

std::vector<double> CostModel::groupStepTimes(const Plan &p) const {
  const std::vector<GroupTimes> &gt = groupTimes(p.tp, p.cp, p.fp8, req.gpusPerNode);
  std::vector<double> out(size_t(numGroups), 0);
  for (int g = 0; g < numGroups; ++g) {
    GroupStep s = groupStep(gt[size_t(g)], g, p);
    out[size_t(g)] = s.forward + s.backward + s.comm;
  }
  return out;
}

const std::vector<int64_t> &CostModel::stageCuts(const Plan &p) const {
  int chunks = p.pp * p.virtualStages;
  auto key = std::make_tuple(chunks, p.tp, p.cp, p.fp8, int(p.checkpoint));
  auto it = cutsCache.find(key);
  if (it == cutsCache.end())
    it = cutsCache.emplace(key, balanceStageCuts(groupStepTimes(p), chunks)).first;
  return it->second;
}

const rt::PipelineSchedule *CostModel::pipelineSchedule(const Plan &p) const {
  if (p.pp <= 1)
    return nullptr;
  rt::ScheduleKind kind = rt::ScheduleKind::OneFOneB;
  switch (p.schedule) {
  case Schedule::GPipe: kind = rt::ScheduleKind::GPipe; break;
  case Schedule::Interleaved: kind = rt::ScheduleKind::Interleaved; break;
  case Schedule::ZeroBubble: kind = rt::ScheduleKind::ZeroBubble; break;
  default: break;
  }
  auto key = std::make_tuple(int(kind), p.pp, p.virtualStages, p.microbatches);
  auto it = schedules.find(key);
  if (it == schedules.end()) {
    auto s = std::make_shared<rt::PipelineSchedule>();
    std::string err;
    if (!rt::buildSchedule(kind, p.pp, p.virtualStages, p.microbatches, *s, err))
      s.reset();
    it = schedules.emplace(key, std::move(s)).first;
  }
  return it->second.get();
}

void CostModel::useStageCosts(std::vector<rt::StageCostProfile> profiles) {
  stageCosts_ = std::make_shared<const std::vector<rt::StageCostProfile>>(std::move(profiles));
}

const rt::StageCostProfile *CostModel::measuredStageCosts(const Plan &p,
                                                          const rt::PipelineSchedule &s) const {
  if (!stageCosts_ || p.checkpoint != Checkpoint::None || p.fp8 || p.cp != 1)
    return nullptr;
  // Stage times describe the layers the run cut: only a profile measured
  // at the cuts this model chooses fits (one without cuts was split evenly).
  const std::vector<int64_t> &cuts = stageCuts(p);
  std::vector<int64_t> even = evenStageCuts(m.numLayers, s.stages);
  for (const rt::StageCostProfile &prof : *stageCosts_)
    if (prof.ranks == p.pp && prof.stages == s.stages && prof.splitBackward == s.splitBackward &&
        (prof.cuts.empty() ? even : prof.cuts) == cuts && prof.microbatchRows == req.microbatch &&
        prof.seq == req.seq && prof.tp == p.tp && prof.dpShard == p.dpShard &&
        prof.dpReplicate == p.dpReplicate && int(prof.costs.size()) == s.stages)
      return &prof;
  return nullptr;
}

std::vector<double> CostModel::stageActivationBytes(const Plan &p) const {
  int policy = p.checkpoint == Checkpoint::None ? 1 : p.checkpoint == Checkpoint::Selective ? 2 : 3;
  std::vector<double> bytes(size_t(p.pp * p.virtualStages), 0);
  for (int g = 0; g < numGroups; ++g)
    bytes[size_t(stageOf(g - 1, p))] += statics[g].saved[p.fp8][policy] / (double(p.tp) * p.cp);
  return bytes;
}

double CostModel::inFlight(int d, const Plan &p) const {
  // The schedule the runtime runs, walked in order: the most activations
  // the rank holds at once, in microbatches of all its stages.
  if (const rt::PipelineSchedule *s = pipelineSchedule(p)) {
    auto key = std::make_tuple(int(p.schedule), p.pp, p.virtualStages, p.microbatches,
                               int(p.checkpoint), p.fp8, p.tp * p.cp);
    auto it = heldPeaks.find(key);
    if (it == heldPeaks.end()) {
      std::vector<double> bytes = stageActivationBytes(p), peak, mine(size_t(p.pp), 0);
      std::vector<int> count;
      for (size_t st = 0; st < bytes.size(); ++st) mine[size_t(s->stageRank[st])] += bytes[st];
      rt::peakActivations(*s, bytes, count, peak);
      it = heldPeaks.emplace(key, std::make_pair(peak, mine)).first;
    }
    const auto &[peak, mine] = it->second;
    if (mine[size_t(d)] > 0)
      return peak[size_t(d)] / mine[size_t(d)];
  }
  double mb = p.microbatches;
  switch (p.schedule) {
  case Schedule::None:
    return 1; // gradient accumulation: one microbatch's activations at a time
  case Schedule::GPipe:
    return mb; // every forward before any backward
  case Schedule::OneFOneB:
    return std::min(mb, double(p.pp - d));
  case Schedule::Interleaved: {
    // Megatron's interleaved warm-up: rank d runs (pp-d-1)*2 + (v-1)*pp
    // chunk forwards before its first backward, plus the one in flight;
    // each chunk holds 1/v of the rank's layers.
    double v = p.virtualStages;
    double chunks = std::min(mb * v, double((p.pp - d - 1) * 2 + (p.virtualStages - 1) * p.pp + 1));
    return chunks / v;
  }
  case Schedule::ZeroBubble:
    return std::min(mb, double(p.pp - d));
  }
  return 1;
}

double CostModel::localElements(const ParamInfo &p, const Plan &plan) const {
  double e = p.elements;
  if (p.rule != TpRule::Replicated)
    e = std::ceil(e / plan.tp);
  return std::ceil(e / plan.dpShard);
}

std::vector<std::string> CostModel::constraintViolations(const Plan &p) const {
  std::vector<std::string> why;
  auto str = [](auto v) { return std::to_string(v); };
  if (p.tp > 1) {
    if (m.heads > 0 && m.heads % p.tp)
      why.push_back(str(m.heads) + " attention heads not divisible by tp=" + str(p.tp));
    if (m.kvHeads > 0 && m.kvHeads % p.tp)
      why.push_back(str(m.kvHeads) + " KV heads not divisible by tp=" + str(p.tp));
    for (const ParamInfo &prm : m.params) {
      if ((prm.rule != TpRule::Column && prm.rule != TpRule::Row) || prm.shardAxis < 0)
        continue;
      int64_t extent = prm.shape[prm.shardAxis];
      if (extent % p.tp) {
        why.push_back(prm.name + " dim " + str(extent) + " not divisible by tp=" + str(p.tp));
        break;
      }
    }
  }
  // Stages are whole layers, cut where the per-layer costs balance
  // (stageCuts), so any count up to the layers' runs.
  int chunks = p.pp * p.virtualStages;
  if (p.pp > 1 && m.numLayers == 0)
    why.push_back("no transformer layers to split into pp=" + str(p.pp) + " stages");
  else if (chunks > 1 && m.numLayers < chunks)
    why.push_back(str(m.numLayers) + " layers cannot fill " +
                  (chunks == p.pp ? "pp=" + str(p.pp) + " stages"
                                  : "pp*v=" + str(chunks) + " interleaved chunks"));
  if (p.schedule == Schedule::Interleaved ||
      (p.schedule == Schedule::ZeroBubble && p.virtualStages > 1)) {
    if (p.schedule == Schedule::Interleaved && p.microbatches % p.pp)
      why.push_back("interleaved 1F1B needs microbatches (" + str(p.microbatches) +
                    ") divisible by pp=" + str(p.pp));
  }
  if (p.cp > 1 && m.seq % (2 * p.cp))
    why.push_back("seq " + str(m.seq) + " not divisible into 2*cp=" + str(2 * p.cp) +
                  " load-balanced causal chunks");
  int64_t perStep = m.batch * p.dp();
  if (globalBatch_ % perStep)
    why.push_back("global batch " + str(globalBatch_) + " not divisible by microbatch " +
                  str(m.batch) + " x dp " + str(p.dp()));
  return why;
}

MemoryBreakdown CostModel::deviceMemory(int d, const Plan &p) const {
  MemoryBreakdown mem;
  double shard = double(p.tp) * p.cp;
  int headDevice = deviceOf(m.headLayer(), p), embedDevice = deviceOf(kEmbedLayer, p);
  double params = 0, maxLayerParams = 0;
  double mult = inFlight(d, p), kept = 0, recomputeTransient = 0, maxOut = 0;
  int policy = p.checkpoint == Checkpoint::None ? 1 : p.checkpoint == Checkpoint::Selective ? 2 : 3;
  for (int g = 0; g < numGroups; ++g) {
    if (deviceOf(g - 1, p) != d)
      continue;
    const GroupStatic &s = statics[g];
    params += groupLocalParams(g, p, false);
    maxLayerParams = std::max(maxLayerParams, s.paramReplicated + s.paramSharded / p.tp);
    // Activations: what the group keeps for backward, times the microbatches
    // in flight; recomputation rematerializes one layer at a time.
    kept += s.saved[p.fp8][policy] / shard;
    recomputeTransient = std::max(recomputeTransient, (s.saved[p.fp8][0] - s.saved[p.fp8][policy]) / shard);
    maxOut = std::max(maxOut, s.maxOut);
  }
  // A tied embedding is also the LM head: the head's rank keeps a copy.
  if (d == headDevice && d != embedDevice)
    params += groupLocalParams(groupIndex(kEmbedLayer), p, true);
  mem.params = params * kParamBytes;
  mem.grads = params * kGradBytes;
  mem.optimizer = params * kOptimizerBytes;
  mem.activations = kept * mult;
  // Communication buffers: gathered TP activations (double-buffered),
  // FSDP's gathered layer (current + prefetched) and unsharded gradients,
  // DDP buckets, pipeline send/recv, the context-parallel K/V ring.
  if (p.tp > 1)
    mem.comm += 2 * maxTpBuffer / p.cp;
  if (p.dpShard > 1)
    mem.comm += 2 * maxLayerParams * kActBytes + maxLayerParams * kGradBytes;
  else if (p.dpReplicate > 1)
    mem.comm += 2 * std::min(kDdpBucketBytes, mem.grads);
  if (p.pp > 1)
    mem.comm += 2 * m.boundaryElements / shard * kActBytes;
  if (p.cp > 1)
    mem.comm += 2 * maxKvElements / shard * kActBytes;
  // Workspace: GEMM library workspace, the largest op output alive beside
  // the saved set, a layer being recomputed, and (without FSDP, whose
  // gathered copy already is one) the compute-width copy of a layer's weights.
  mem.workspace = hw.gemmWorkspace + maxOut / shard * kActBytes + recomputeTransient;
  if (p.dpShard == 1)
    mem.workspace += maxLayerParams * (p.fp8 ? 1 : kActBytes);
  return mem;
}

bool CostModel::compilesPerRank(const Plan &plan) {
  return plan.pp == 1 && plan.microbatches == 1 && !plan.fp8;
}

void CostModel::useRankBufferPlan(PlanEstimate &e, const MemoryBreakdown &mem) const {
  e.memory = mem;
  e.memorySource = "buffer-plan";
  e.worstDevice = 0;
  e.rejections.erase(std::remove_if(e.rejections.begin(), e.rejections.end(),
                                    [](const std::string &r) { return r.rfind("memory ", 0) == 0; }),
                     e.rejections.end());
  if (e.memory.total() > hw.memoryBytes)
    e.rejections.push_back("memory " + gib(e.memory.total()) + " > " + gib(hw.memoryBytes) +
                           " usable");
}

const ProgramTime *CostModel::programTime(const Plan &plan) const {
  if (plan.tp != 1 || plan.cp != 1 || plan.pp != 1 || plan.dpShard != 1 || plan.microbatches != 1)
    return nullptr;
  int policy = int(plan.checkpoint);
  const std::vector<InstrWork> *work = nullptr;
  if (!plan.fp8 && m.hasProgramWork[policy])
    work = &m.programWork[policy];
  else if (plan.fp8 && m.hasFp8ProgramWork[policy])
    work = &m.fp8ProgramWork[policy];
  if (!work)
    return nullptr;
  auto key = std::make_pair(policy, plan.fp8);
  auto it = programTimes.find(key);
  if (it == programTimes.end())
    it = programTimes.emplace(key, priceProgram(*work, hw)).first;
  return &it->second;
}

PlanEstimate CostModel::evaluate(const Plan &plan, bool detail) const {
  PlanEstimate est;
  est.plan = plan;
  est.rejections = constraintViolations(plan);
  // Only a plan that can run is timed on its schedule (rejected ones keep
  // the closed form, which is cheap for the thousands a cluster offers).
  const bool structural = est.rejections.empty();
  const int pp = plan.pp, tp = plan.tp, cp = plan.cp;
  const int gpn = req.gpusPerNode;
  const std::vector<GroupTimes> &gt = groupTimes(tp, cp, plan.fp8, gpn);
  const Link &dpsLink = groupLink(hw, plan.dpShard, dpsStride(plan), gpn);
  const Link &dprLink = groupLink(hw, plan.dpReplicate, dprStride(plan), gpn);
  const Link &ppLink = groupLink(hw, pp, ppStride(plan), gpn);
  const double mb = plan.microbatches;
  const double shard = double(tp) * cp;

  // --- Memory: the worst pipeline rank -----------------------------------
  for (int d = 0; d < pp; ++d) {
    MemoryBreakdown mem = deviceMemory(d, plan);
    if (pp > 1)
      est.activationsPerRank.push_back(mem.activations);
    if (d == 0 || mem.total() > est.analytical.total()) {
      est.analytical = mem;
      est.worstDevice = d;
    }
  }
  est.memory = est.analytical;
  est.memorySource = "analytical";
  if (pp > 1)
    est.stageCuts = stageCuts(plan);
  bool compilable = tp == 1 && cp == 1 && pp == 1 && plan.dpShard == 1 && mb == 1 && !plan.fp8;
  int policy = int(plan.checkpoint);
  bool planned = policy == 0 ? m.hasBufferPlan : m.hasPolicyBufferPlan[policy];
  if (compilable && planned) {
    // What the compiler allocates today for this single-device step (with
    // the recompute pass's policy applied), plus what it does not see:
    // data-parallel buckets, the GEMM library's workspace.
    est.memory = policy == 0 ? m.bufferPlan : m.policyBufferPlan[policy];
    est.memory.comm = est.analytical.comm;
    est.memory.workspace += hw.gemmWorkspace;
    est.memorySource = "buffer-plan";
  }
  if (est.memory.total() > hw.memoryBytes)
    est.rejections.push_back("memory " + gib(est.memory.total()) + " > " + gib(hw.memoryBytes) +
                             " usable");

  // --- Time per microbatch on each pipeline rank ------------------------
  std::vector<double> fc(pp, 0), bc(pp, 0), comm(pp, 0), stageTotal(pp, 0);
  std::vector<double> fsdpF(pp, 0), fsdpB(pp, 0), fsdpFirst(pp, 0), fsdpLast(pp, 0);
  std::vector<int> groupsOnDevice(pp, 0);
  for (int g = 0; g < numGroups; ++g) {
    int d = deviceOf(g - 1, plan);
    const GroupTimes &t = gt[g];
    GroupStep step = groupStep(t, g, plan);
    fc[d] += step.forward;
    bc[d] += step.backward;
    comm[d] += step.comm;
    ++groupsOnDevice[d];
    if (plan.dpShard > 1) {
      const GroupStatic &s = statics[g];
      double tpLocal = s.paramReplicated + s.paramSharded / tp;
      double ag = allGatherTime(plan.dpShard, tpLocal * kActBytes, dpsLink); // bf16 weights
      double rs = reduceScatterTime(plan.dpShard, tpLocal * kGradBytes, dpsLink); // fp32 grads
      fsdpF[d] += ag;
      fsdpB[d] += ag + rs;
      fsdpFirst[d] = std::max(fsdpFirst[d], ag);
      fsdpLast[d] = std::max(fsdpLast[d], rs);
    }
  }
  double boundaryBytes = m.boundaryElements / shard * kActBytes;
  double p2p = pp > 1 ? 2 * plan.virtualStages * sendRecvTime(boundaryBytes, ppLink) : 0;
  for (int d = 0; d < pp; ++d) {
    // FSDP prefetches the next layer while this one computes: only what
    // does not fit behind compute shows, and never less than the first
    // gather (forward) or the last reduce-scatter (backward).
    double fsdp = 0;
    if (plan.dpShard > 1)
      fsdp = std::max(fsdpFirst[d], fsdpF[d] - fc[d]) + std::max(fsdpLast[d], fsdpB[d] - bc[d]);
    comm[d] += fsdp + p2p;
    stageTotal[d] = fc[d] + bc[d] + comm[d];
  }
  int b = int(std::max_element(stageTotal.begin(), stageTotal.end()) - stageTotal.begin());
  double bubble = 0;
  double perMbKernels = fc[b] + bc[b], perMbComm = comm[b]; // of the slowest rank
  const rt::PipelineSchedule *sched = structural ? pipelineSchedule(plan) : nullptr;
  const rt::StageCostProfile *measured = sched ? measuredStageCosts(plan, *sched) : nullptr;
  if (measured) {
    // The machine's own stage times (an unpipelined run of this split):
    // the schedule is timed with them and their transfer times, so the
    // transfers show in the makespan (receives wait for them), not as
    // per-microbatch communication.
    std::vector<double> kernels(size_t(pp), 0);
    for (int st = 0; st < sched->stages; ++st) {
      const rt::StageCost &c = measured->costs[size_t(st)];
      kernels[size_t(sched->stageRank[size_t(st)])] +=
          c.forward + (sched->splitBackward ? c.backwardInput + c.backwardWeight : c.backward);
    }
    rt::ScheduleTimeline t;
    std::string err;
    if (rt::simulateSchedule(*sched, measured->costs, t, err)) {
      perMbKernels = *std::max_element(kernels.begin(), kernels.end());
      perMbComm = 0;
      bubble = std::max(0.0, t.makespan - mb * perMbKernels);
      est.bubbleFraction = t.idleFraction;
      est.stageCostSource = measured->source;
    }
  } else if (sched) {
    const rt::PipelineSchedule &schedule = *sched;
    // The schedule the runtime runs, timed with these costs: each stage's
    // forward and backward (its share of its rank's time per microbatch,
    // split as the rank's kernels split; zero bubble halves the backward
    // into input and weight gradients). The bubble is what the busiest
    // rank waits.
    int chunks = pp * plan.virtualStages;
    std::vector<double> sf(size_t(chunks), 0), sb(size_t(chunks), 0);
    for (int g = 0; g < numGroups; ++g) {
      int st = stageOf(g - 1, plan);
      sf[size_t(st)] += gt[g].fwd;
      sb[size_t(st)] += gt[g].bwd;
    }
    std::vector<rt::StageCost> costs(static_cast<size_t>(chunks));
    for (int st = 0; st < chunks; ++st) {
      int d = schedule.stageRank[size_t(st)];
      double kernels = fc[d] + bc[d], share = kernels > 0 ? (sf[size_t(st)] + sb[size_t(st)]) / kernels
                                                          : 1.0 / plan.virtualStages;
      double total = stageTotal[d] * share;
      double fwd = sf[size_t(st)] + sb[size_t(st)] > 0
                       ? total * sf[size_t(st)] / (sf[size_t(st)] + sb[size_t(st)])
                       : total / 3;
      rt::StageCost &c = costs[size_t(st)];
      c.forward = fwd;
      c.backward = total - fwd;
      c.backwardInput = c.backwardWeight = c.backward / 2;
      c.transfer = 0; // the send/recv time is in the stage's exposed communication
    }
    rt::ScheduleTimeline t;
    std::string err;
    if (rt::simulateSchedule(schedule, costs, t, err)) {
      bubble = std::max(0.0, t.makespan - mb * stageTotal[b]);
      est.bubbleFraction = t.idleFraction;
    }
  } else if (pp > 1) {
    double sum = 0;
    for (double s : stageTotal) sum += s;
    bubble = (sum - stageTotal[b]) / (plan.schedule == Schedule::Interleaved ? plan.virtualStages : 1);
  }

  // --- Once per step: gradient sync, tied embedding, optimizer ----------
  int headDevice = deviceOf(m.headLayer(), plan), embedDevice = deviceOf(kEmbedLayer, plan);
  int embedGroup = groupIndex(kEmbedLayer);
  double tiedLocal = headDevice != embedDevice ? groupLocalParams(embedGroup, plan, true) : 0;
  double dpExposed = 0, optimizer = 0;
  for (int d = 0; d < pp; ++d) {
    double params = 0, optElements = 0;
    uint64_t kinds = d == 0 ? scalarOptKinds : 0;
    if (d == 0)
      optElements += scalarOptElements;
    for (int g = 0; g < numGroups; ++g) {
      if (deviceOf(g - 1, plan) != d)
        continue;
      const GroupStatic &s = statics[g];
      params += groupLocalParams(g, plan, false);
      optElements += (s.optReplicated + s.optSharded / tp) / plan.dpShard;
      kinds |= s.optKinds;
    }
    if (d == headDevice && tiedLocal > 0) {
      params += tiedLocal;
      optElements += 7 * tiedLocal; // AdamW on the head's copy: p, g, m, v in; p, m, v out
    }
    if (plan.dpReplicate > 1) {
      // Buckets all-reduce while the last microbatch's backward runs; the
      // last bucket (the first layers' gradients) cannot hide.
      double t = allReduceTime(plan.dpReplicate, params * kGradBytes, dprLink);
      double lastBucket = t / std::max(1, groupsOnDevice[d]);
      dpExposed = std::max(dpExposed, std::max(lastBucket, t - bc[d]));
    }
    // Multi-tensor (foreach) optimizer kernels: one launch per kind of op.
    double opt = optElements * 4 / hw.hbmBandwidth +
                 double(__builtin_popcountll(kinds)) * hw.kernelOverhead;
    optimizer = std::max(optimizer, opt);
  }
  double tied = 0;
  if (tiedLocal > 0)
    tied = allReduceTime(2, tiedLocal * kGradBytes, groupLink(hw, 2, (pp - 1) * ppStride(plan), gpn));

  est.time.compute = mb * perMbKernels + optimizer;
  est.time.comm = mb * perMbComm + dpExposed + tied;
  est.time.bubble = bubble;
  est.time.optimizer = optimizer;
  if (const ProgramTime *pt = programTime(plan)) {
    // The step each GPU runs is the compiled program: its instructions,
    // priced one by one, replace the IR walk's per-op model (the
    // data-parallel all-reduce stays as above).
    est.time.compute = pt->seconds;
    est.time.optimizer = pt->optimizer;
    est.timeSource = "program";
    est.programTime = *pt;
  }

  double microbatchesPerStep = mb * plan.dp();
  est.sequencesPerStep = microbatchesPerStep * m.batch;
  est.modelFlopsPerStep = flopsPerMicrobatch * microbatchesPerStep;
  double step = est.time.total();
  est.tokensPerSecond = step > 0 ? est.sequencesPerStep * m.seq / step : 0;
  est.mfu = step > 0 ? est.modelFlopsPerStep / (step * plan.gpus() * hw.peakBf16) : 0;

  if (!detail)
    return est;

  // --- Detail for --explain --------------------------------------------
  est.deviceGroups.assign(pp, {});
  for (int g = 0; g < numGroups; ++g)
    est.deviceGroups[deviceOf(g - 1, plan)].push_back(g - 1);
  const Link &tpLink = groupLink(hw, tp, 1, gpn);
  const Link &cpLink = groupLink(hw, cp, tp, gpn);
  if (tp > 1)
    for (const TpCollective &c : m.tpCollectives) {
      CollectiveUse u;
      u.group = "tp";
      u.layer = c.layer;
      u.phase = c.phase;
      u.kind = c.kind;
      u.ranks = tp;
      u.link = tpLink.name;
      u.bytes = c.elements / cp * (c.fp32 ? 4 : kActBytes);
      u.seconds = collectiveTime(c.kind, tp, u.bytes, tpLink);
      bool layer = c.layer >= 0 && c.layer < m.numLayers;
      u.callsPerStep = mb * (c.phase == Phase::Forward && layer && plan.checkpoint == Checkpoint::Full ? 2 : 1);
      u.what = c.what;
      est.collectives.push_back(u);
    }
  if (cp > 1)
    for (const CostOp &op : m.ops)
      if (op.kind == OpKind::Attention) {
        CollectiveUse u;
        u.group = "cp";
        u.layer = op.layer;
        u.phase = op.phase;
        u.kind = CommKind::SendRecv;
        u.ranks = cp;
        u.link = cpLink.name;
        u.bytes = op.kvElements / shard * kActBytes;
        u.seconds = sendRecvTime(u.bytes, cpLink);
        u.callsPerStep = mb * (cp - 1) * (op.phase == Phase::Forward ? 1 : 2);
        u.what = op.phase == Phase::Forward ? "ring attention: pass K/V chunk"
                                            : "ring attention backward: pass K/V and dK/dV";
        est.collectives.push_back(u);
      }
  if (plan.dpShard > 1)
    for (int g = 0; g < numGroups; ++g) {
      const GroupStatic &s = statics[g];
      double tpLocal = s.paramReplicated + s.paramSharded / tp;
      if (tpLocal == 0)
        continue;
      for (int k = 0; k < 3; ++k) {
        CollectiveUse u;
        u.group = "dp_shard";
        u.layer = g - 1;
        u.phase = k == 0 ? Phase::Forward : Phase::Backward;
        u.kind = k == 2 ? CommKind::ReduceScatter : CommKind::AllGather;
        u.ranks = plan.dpShard;
        u.link = dpsLink.name;
        u.bytes = tpLocal * (k == 2 ? kGradBytes : kActBytes);
        u.seconds = collectiveTime(u.kind, u.ranks, u.bytes, dpsLink);
        u.callsPerStep = mb;
        u.what = k == 2 ? "FSDP: reduce-scatter fp32 gradients"
                        : (k == 0 ? "FSDP: gather bf16 weights" : "FSDP: re-gather bf16 weights for backward");
        est.collectives.push_back(u);
      }
    }
  if (plan.dpReplicate > 1) {
    double grads = 0;
    for (int g = 0; g < numGroups; ++g)
      if (deviceOf(g - 1, plan) == b)
        grads += groupLocalParams(g, plan, false) * kGradBytes;
    if (b == headDevice)
      grads += tiedLocal * kGradBytes;
    CollectiveUse u;
    u.group = "dp_replicate";
    u.layer = m.numLayers + 1;
    u.phase = Phase::Backward;
    u.kind = CommKind::AllReduce;
    u.ranks = plan.dpReplicate;
    u.link = dprLink.name;
    u.bytes = grads;
    u.seconds = allReduceTime(u.ranks, grads, dprLink);
    u.callsPerStep = 1;
    u.what = plan.dpShard > 1 ? "HSDP: all-reduce sharded fp32 gradients (bucketed)"
                              : "DDP: all-reduce fp32 gradients (bucketed)";
    est.collectives.push_back(u);
  }
  if (pp > 1) {
    CollectiveUse u;
    u.group = "pp";
    u.layer = m.numLayers + 1;
    u.phase = Phase::Forward;
    u.kind = CommKind::SendRecv;
    u.ranks = pp;
    u.link = ppLink.name;
    u.bytes = boundaryBytes;
    u.seconds = sendRecvTime(boundaryBytes, ppLink);
    u.callsPerStep = 2 * mb * plan.virtualStages;
    u.what = "stage boundary: activation forward, its gradient backward";
    est.collectives.push_back(u);
    if (tiedLocal > 0) {
        const Link &l = groupLink(hw, 2, (pp - 1) * ppStride(plan), gpn);
        CollectiveUse t;
        t.group = "pp (tied embedding)";
        t.layer = m.numLayers + 1;
        t.phase = Phase::Backward;
        t.kind = CommKind::AllReduce;
        t.ranks = 2;
        t.link = l.name;
        t.bytes = tiedLocal * kGradBytes;
        t.seconds = allReduceTime(2, t.bytes, l);
        t.callsPerStep = 1;
        t.what = "sum the tied embedding / LM head gradient between first and last stage";
        est.collectives.push_back(t);
      }
  }
  return est;
}

} // namespace loom::planner
