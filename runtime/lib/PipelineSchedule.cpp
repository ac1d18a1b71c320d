//===- PipelineSchedule.cpp - Building, checking and drawing schedules ----===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/runtime/PipelineSchedule.h"
#include "lib/Diagnostics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace loom::rt {

const char *pipeOpName(PipeOp op) {
  switch (op) {
  case PipeOp::Forward: return "F";
  case PipeOp::Backward: return "B";
  case PipeOp::BackwardInput: return "I";
  case PipeOp::BackwardWeight: return "W";
  case PipeOp::SendActivation: return "SEND_F";
  case PipeOp::RecvActivation: return "RECV_F";
  case PipeOp::SendGradient: return "SEND_B";
  case PipeOp::RecvGradient: return "RECV_B";
  }
  return "?";
}

std::string describeAction(const PipeAction &a, int peer) {
  std::string s = cat(pipeOpName(a.op), " stage ", a.stage, " mb ", a.microbatch);
  if (peer >= 0)
    s += cat(a.op == PipeOp::SendActivation || a.op == PipeOp::SendGradient ? " to rank "
                                                                              : " from rank ",
             peer);
  return s;
}

const char *scheduleKindName(ScheduleKind k) {
  switch (k) {
  case ScheduleKind::GPipe: return "gpipe";
  case ScheduleKind::OneFOneB: return "1f1b";
  case ScheduleKind::Interleaved: return "interleaved";
  case ScheduleKind::ZeroBubble: return "zb";
  case ScheduleKind::Custom: return "custom";
  }
  return "?";
}

bool parseScheduleKind(const std::string &name, ScheduleKind &out) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                         ScheduleKind::ZeroBubble})
    if (name == scheduleKindName(k)) {
      out = k;
      return true;
    }
  return false;
}

int PipelineSchedule::peerOf(const PipeAction &a) const {
  int s = a.stage;
  switch (a.op) {
  case PipeOp::SendActivation:
  case PipeOp::RecvGradient:
    return s + 1 < stages ? stageRank[size_t(s + 1)] : -1;
  case PipeOp::RecvActivation:
  case PipeOp::SendGradient:
    return s > 0 ? stageRank[size_t(s - 1)] : -1;
  default:
    return -1;
  }
}

namespace {

PipeAction act(PipeOp op, int stage, int mb) { return PipeAction{op, stage, mb}; }

/// ZB-H1 / ZBV: a greedy list schedule in unit time (module comment).
/// Each stage runs its forwards, input gradients and weight gradients in
/// microbatch order, so only the next of each per stage is a candidate.
void greedyZeroBubble(PipelineSchedule &s) {
  const int N = s.stages, M = s.microbatches, P = s.ranks;
  const int never = -1;
  const size_t nN = static_cast<size_t>(N), nM = static_cast<size_t>(M);
  // When each action finished (never: not yet), [stage * M + mb].
  std::vector<int> fDone(nN * nM, never), iDone(nN * nM, never);
  auto at = [&](int st, int i) { return size_t(st) * nM + size_t(i); };
  auto doneBy = [&](const std::vector<int> &d, int st, int i, int t) {
    return d[at(st, i)] != never && d[at(st, i)] <= t;
  };
  std::vector<int> nextF(nN, 0), nextI(nN, 0), nextW(nN, 0);
  std::vector<std::vector<int>> stagesOf(static_cast<size_t>(P));
  for (int st = N - 1; st >= 0; --st) stagesOf[size_t(s.stageRank[size_t(st)])].push_back(st);
  // Microbatch-stages past F and before their I (before their W).
  std::vector<int> waitingForI(static_cast<size_t>(P), 0), waitingForW(static_cast<size_t>(P), 0);
  int remaining = 3 * N * M;
  for (int t = 0; remaining > 0 && t < 16 * N * M + 16; ++t) {
    for (int r = 0; r < P; ++r) {
      int limit = s.virtualStages() == 1 ? P - r : 2 * P, limitW = 2 * limit - 1;
      // The oldest microbatch first, the deeper stage first; an input
      // gradient before a forward before a weight gradient.
      PipeAction best[3];
      bool found[3] = {false, false, false};
      auto offer = [&](int k, PipeOp op, int st, int i) {
        if (!found[k] || i < best[k].microbatch) {
          best[k] = act(op, st, i);
          found[k] = true;
        }
      };
      for (int st : stagesOf[size_t(r)]) { // deepest first
        int i = nextI[size_t(st)];
        if (i < M && doneBy(fDone, st, i, t) && (st == N - 1 || doneBy(iDone, st + 1, i, t)))
          offer(0, PipeOp::BackwardInput, st, i);
        i = nextF[size_t(st)];
        if (i < M && (st == 0 || doneBy(fDone, st - 1, i, t)) && waitingForI[size_t(r)] < limit &&
            waitingForW[size_t(r)] < limitW)
          offer(1, PipeOp::Forward, st, i);
        i = nextW[size_t(st)];
        if (i < M && doneBy(iDone, st, i, t))
          offer(2, PipeOp::BackwardWeight, st, i);
      }
      int k = found[0] ? 0 : found[1] ? 1 : found[2] ? 2 : -1;
      if (k < 0)
        continue;
      const PipeAction pick = best[k];
      s.actions[size_t(r)].push_back(pick);
      --remaining;
      int st = pick.stage;
      if (pick.op == PipeOp::Forward) {
        fDone[at(st, pick.microbatch)] = t + 1;
        ++nextF[size_t(st)];
        ++waitingForI[size_t(r)], ++waitingForW[size_t(r)];
      } else if (pick.op == PipeOp::BackwardInput) {
        iDone[at(st, pick.microbatch)] = t + 1;
        ++nextI[size_t(st)];
        --waitingForI[size_t(r)];
      } else {
        ++nextW[size_t(st)];
        --waitingForW[size_t(r)];
      }
    }
  }
}

} // namespace

bool buildSchedule(ScheduleKind kind, int P, int V, int M, PipelineSchedule &s,
                   std::string &err) {
  if (P < 1 || V < 1 || M < 1) {
    err = cat("a pipeline schedule needs at least one rank, stage per rank and microbatch (pp=",
              P, ", pp_virtual=", V, ", microbatches=", M, ")");
    return false;
  }
  const char *name = scheduleKindName(kind);
  if ((kind == ScheduleKind::GPipe || kind == ScheduleKind::OneFOneB) && V != 1) {
    err = cat(name, " runs one stage per rank (pp_virtual=1), not ", V,
              " (interleaved and zb take more)");
    return false;
  }
  if (kind == ScheduleKind::Interleaved && (V < 2 || M % P)) {
    err = V < 2 ? cat("interleaved needs pp_virtual of at least 2, not ", V)
                : cat("interleaved needs microbatches (", M, ") to be a multiple of pp (", P, ")");
    return false;
  }
  if (kind == ScheduleKind::ZeroBubble && V > 2) {
    err = cat("zb runs pp_virtual=1 (ZB-H1) or 2 (ZBV), not ", V);
    return false;
  }
  if (kind == ScheduleKind::Custom) {
    err = "a custom schedule comes from a CSV file";
    return false;
  }
  s = PipelineSchedule();
  s.kind = kind;
  s.name = name;
  s.ranks = P;
  s.stages = P * V;
  s.microbatches = M;
  s.splitBackward = kind == ScheduleKind::ZeroBubble;
  s.actions.assign(size_t(P), {});
  s.stageRank.resize(size_t(P * V));
  for (int st = 0; st < P * V; ++st)
    s.stageRank[size_t(st)] = kind == ScheduleKind::ZeroBubble && V == 2 && st >= P
                                  ? 2 * P - 1 - st // ZBV: the V comes back
                                  : st % P;
  for (int r = 0; r < P; ++r) {
    std::vector<PipeAction> &a = s.actions[size_t(r)];
    switch (kind) {
    case ScheduleKind::GPipe:
      for (int i = 0; i < M; ++i) a.push_back(act(PipeOp::Forward, r, i));
      for (int i = 0; i < M; ++i) a.push_back(act(PipeOp::Backward, r, i));
      break;
    case ScheduleKind::OneFOneB: {
      int warm = std::min(P - r - 1, M);
      for (int i = 0; i < warm; ++i) a.push_back(act(PipeOp::Forward, r, i));
      for (int j = 0; j < M - warm; ++j) {
        a.push_back(act(PipeOp::Forward, r, warm + j));
        a.push_back(act(PipeOp::Backward, r, j));
      }
      for (int j = M - warm; j < M; ++j) a.push_back(act(PipeOp::Backward, r, j));
      break;
    }
    case ScheduleKind::Interleaved: {
      // Megatron's order: the k-th forward of a rank is chunk (k / P) % V
      // of microbatch (k / (P V)) P + k % P; backwards walk the chunks in
      // reverse.
      int total = M * V;
      auto fwd = [&](int k) {
        int chunk = (k / P) % V, mb = (k / (P * V)) * P + k % P;
        return act(PipeOp::Forward, r + chunk * P, mb);
      };
      auto bwd = [&](int k) {
        int chunk = V - 1 - (k / P) % V, mb = (k / (P * V)) * P + k % P;
        return act(PipeOp::Backward, r + chunk * P, mb);
      };
      int warm = std::min(total, (P - r - 1) * 2 + (V - 1) * P);
      for (int k = 0; k < warm; ++k) a.push_back(fwd(k));
      for (int j = 0; j < total - warm; ++j) {
        a.push_back(fwd(warm + j));
        a.push_back(bwd(j));
      }
      for (int j = total - warm; j < total; ++j) a.push_back(bwd(j));
      break;
    }
    default:
      break;
    }
  }
  if (kind == ScheduleKind::ZeroBubble)
    greedyZeroBubble(s);
  insertTransfers(s);
  return true;
}

namespace {

bool isSend(PipeOp op) { return op == PipeOp::SendActivation || op == PipeOp::SendGradient; }

/// What a send carries, named by the receive that takes it.
PipeAction receiveOf(const PipeAction &send) {
  return send.op == PipeOp::SendActivation
             ? act(PipeOp::RecvActivation, send.stage + 1, send.microbatch)
             : act(PipeOp::RecvGradient, send.stage - 1, send.microbatch);
}

} // namespace

void insertTransfers(PipelineSchedule &s) {
  for (int r = 0; r < s.ranks; ++r) {
    std::vector<PipeAction> out;
    for (const PipeAction &a : s.actions[size_t(r)]) {
      if (isTransfer(a.op)) {
        out.push_back(a);
        continue;
      }
      int st = a.stage, i = a.microbatch;
      auto elsewhere = [&](int other) {
        return other >= 0 && other < s.stages && s.stageRank[size_t(other)] != r;
      };
      bool backwardIn = a.op == PipeOp::Backward || a.op == PipeOp::BackwardInput;
      if (a.op == PipeOp::Forward && elsewhere(st - 1))
        out.push_back(act(PipeOp::RecvActivation, st, i));
      if (backwardIn && elsewhere(st + 1))
        out.push_back(act(PipeOp::RecvGradient, st, i));
      out.push_back(a);
      if (a.op == PipeOp::Forward && elsewhere(st + 1))
        out.push_back(act(PipeOp::SendActivation, st, i));
      if (backwardIn && elsewhere(st - 1))
        out.push_back(act(PipeOp::SendGradient, st, i));
    }
    s.actions[size_t(r)] = std::move(out);
  }
  // Transfers between two ranks match in posting order, whatever they
  // carry. Under ZBV one pair carries activations one way and gradients
  // the same way, sent in the sender's compute order; a receive the
  // receiver needs later is then posted earlier, right before the first
  // receive that would otherwise take the wrong message (receiving early
  // only buffers the data; sends never move).
  std::map<std::pair<int, int>, std::vector<PipeAction>> expected; // (from, to): in send order
  for (int r = 0; r < s.ranks; ++r)
    for (const PipeAction &a : s.actions[size_t(r)])
      if (isSend(a.op))
        expected[{r, s.peerOf(a)}].push_back(receiveOf(a));
  for (int q = 0; q < s.ranks; ++q) {
    std::vector<PipeAction> &acts = s.actions[size_t(q)];
    std::map<int, size_t> next;
    for (size_t k = 0; k < acts.size(); ++k) {
      if (!isTransfer(acts[k].op) || isSend(acts[k].op))
        continue;
      int from = s.peerOf(acts[k]);
      std::vector<PipeAction> &want = expected[{from, q}];
      size_t &n = next[from];
      if (n < want.size() && !(want[n] == acts[k])) {
        auto it = std::find(acts.begin() + long(k) + 1, acts.end(), want[n]);
        if (it != acts.end()) {
          PipeAction early = *it;
          acts.erase(it);
          acts.insert(acts.begin() + long(k), early);
        }
      }
      ++n;
    }
  }
}

double ScheduleTimeline::bubble() const {
  if (idleFraction.empty())
    return 0;
  double sum = 0;
  for (double f : idleFraction) sum += f;
  return sum / double(idleFraction.size());
}

namespace {

/// What a rank holds: stage outputs and input gradients per microbatch.
enum Data : int { Activation = 0, Gradient = 1, ForwardDone = 2, InputGradDone = 3 };

} // namespace

void peakActivations(const PipelineSchedule &s, const std::vector<double> &bytesPerStage,
                     std::vector<int> &count, std::vector<double> &bytes) {
  count.assign(static_cast<size_t>(s.ranks), 0);
  bytes.assign(static_cast<size_t>(s.ranks), 0);
  for (int r = 0; r < s.ranks && size_t(r) < s.actions.size(); ++r) {
    int held = 0;
    double heldBytes = 0;
    for (const PipeAction &a : s.actions[size_t(r)]) {
      double b = size_t(a.stage) < bytesPerStage.size() ? bytesPerStage[size_t(a.stage)] : 0;
      if (a.op == PipeOp::Forward) {
        ++held;
        heldBytes += b;
        count[size_t(r)] = std::max(count[size_t(r)], held);
        bytes[size_t(r)] = std::max(bytes[size_t(r)], heldBytes);
      } else if (a.op == PipeOp::Backward || a.op == PipeOp::BackwardWeight) {
        --held;
        heldBytes -= b;
      }
    }
  }
}

bool simulateSchedule(const PipelineSchedule &s, const std::vector<StageCost> &costsIn,
                      ScheduleTimeline &out, std::string &err) {
  const int P = s.ranks, N = s.stages, M = s.microbatches;
  if (P < 1 || N < 1 || M < 1 || int(s.actions.size()) != P || int(s.stageRank.size()) != N) {
    err = "the schedule's ranks, stages and action lists disagree";
    return false;
  }
  std::vector<StageCost> costs = costsIn;
  if (costs.empty())
    costs.assign(static_cast<size_t>(N), StageCost());
  if (int(costs.size()) != N) {
    err = cat("the schedule has ", N, " stages but ", costs.size(), " stage costs");
    return false;
  }
  auto actionAt = [&](int r, size_t k) {
    const PipeAction &a = s.actions[size_t(r)][k];
    return cat("action ", k, " (", describeAction(a, s.peerOf(a)), ")");
  };
  auto where = [&](int r, size_t k) { return cat("rank ", r, " ", actionAt(r, k)); };
  // Static checks, rank by rank in order, and the transfer numbering: the
  // k-th send from a to b meets the k-th receive on b from a.
  std::map<std::pair<int, int>, std::vector<std::pair<int, size_t>>> sendsOf, recvsOf;
  std::vector<std::vector<size_t>> pairIndex(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    pairIndex[size_t(r)].resize(s.actions[size_t(r)].size());
    for (size_t k = 0; k < s.actions[size_t(r)].size(); ++k) {
      const PipeAction &a = s.actions[size_t(r)][k];
      if (a.stage < 0 || a.stage >= N || a.microbatch < 0 || a.microbatch >= M) {
        err = cat(where(r, k), " cannot proceed: the schedule has stages 0..", N - 1,
                  " and microbatches 0..", M - 1);
        return false;
      }
      if (!isTransfer(a.op)) {
        if (s.stageRank[size_t(a.stage)] != r) {
          err = cat(where(r, k), " cannot proceed: stage ", a.stage, " lives on rank ",
                    s.stageRank[size_t(a.stage)]);
          return false;
        }
        if (a.op != PipeOp::Forward && (a.op == PipeOp::Backward) == s.splitBackward) {
          err = cat(where(r, k), " cannot proceed: this schedule runs ",
                    s.splitBackward ? "the backward as I and W" : "the backward as B");
          return false;
        }
        continue;
      }
      if (s.stageRank[size_t(a.stage)] != r) {
        err = cat(where(r, k), " cannot proceed: stage ", a.stage, " lives on rank ",
                  s.stageRank[size_t(a.stage)]);
        return false;
      }
      int peer = s.peerOf(a);
      if (peer < 0 || peer == r) {
        err = cat(where(r, k), " cannot proceed: ",
                  peer < 0 ? cat("stage ", a.stage, " has no neighbour that way")
                           : cat("both stages are on rank ", r, ", nothing to transfer"));
        return false;
      }
      auto &list = isSend(a.op) ? sendsOf[{r, peer}] : recvsOf[{peer, r}];
      pairIndex[size_t(r)][k] = list.size();
      list.push_back({r, k});
    }
  }
  // Each transfer's counterpart (rank, action), or (-1, 0) when the peer
  // never posts it; looked up once.
  std::vector<std::vector<std::pair<int, size_t>>> counterparts(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    counterparts[size_t(r)].assign(s.actions[size_t(r)].size(), {-1, 0});
    for (size_t k = 0; k < s.actions[size_t(r)].size(); ++k) {
      const PipeAction &a = s.actions[size_t(r)][k];
      if (!isTransfer(a.op))
        continue;
      int peer = s.peerOf(a);
      auto &list = isSend(a.op) ? recvsOf[{r, peer}] : sendsOf[{peer, r}];
      size_t n = pairIndex[size_t(r)][k];
      if (n < list.size())
        counterparts[size_t(r)][k] = list[n];
    }
  }
  auto counterpart = [&](int r, size_t k) { return counterparts[size_t(r)][k]; };

  out = ScheduleTimeline();
  const size_t nP = static_cast<size_t>(P);
  out.ranks.assign(nP, {});
  for (int r = 0; r < P; ++r) {
    out.ranks[size_t(r)].resize(s.actions[size_t(r)].size());
    for (size_t k = 0; k < s.actions[size_t(r)].size(); ++k) out.ranks[size_t(r)][k].index = int(k);
  }
  out.busy.assign(nP, 0);
  // What each rank holds: data a stage's compute produced is on the
  // stage's rank; received data on the rank that received it (every
  // transfer sits on its stage's rank, checked above).
  const size_t nN = static_cast<size_t>(N), nM = static_cast<size_t>(M);
  auto idx = [&](int what, int st, int i) { return (size_t(what) * nN + size_t(st)) * nM + size_t(i); };
  std::vector<uint8_t> produced(4 * nN * nM, 0), ran(4 * nN * nM, 0);
  std::vector<int> receivedOn(2 * nN * nM, -1);
  auto has = [&](int r, int what, int st, int i) {
    return (produced[idx(what, st, i)] && s.stageRank[size_t(st)] == r) ||
           (what < 2 && receivedOn[idx(what, st, i)] == r);
  };
  std::vector<size_t> pc(nP, 0), groupEnd(nP, 0);
  std::vector<double> clock(nP, 0);
  std::vector<char> waiting(nP, 0); // in a group with receives
  // When each send was posted (-1: not yet).
  std::vector<std::vector<double>> sentAt(nP);
  for (int r = 0; r < P; ++r) sentAt[size_t(r)].assign(s.actions[size_t(r)].size(), -1);
  auto costOf = [&](const PipeAction &a) {
    const StageCost &c = costs[size_t(a.stage)];
    switch (a.op) {
    case PipeOp::Forward: return c.forward;
    case PipeOp::Backward: return c.backward;
    case PipeOp::BackwardInput: return c.backwardInput;
    case PipeOp::BackwardWeight: return c.backwardWeight;
    default: return c.transfer;
    }
  };

  // Sends are posted when the rank reaches them and never hold it up (the
  // runtime sends in the background); receives hold the rank until the
  // matching sends are posted. A group of consecutive transfers posts its
  // sends, then waits for all of its receives at once.
  while (true) {
    bool progress = false;
    for (int r = 0; r < P; ++r) {
      const std::vector<PipeAction> &acts = s.actions[size_t(r)];
      while (pc[size_t(r)] < acts.size() && !waiting[size_t(r)]) {
        size_t k = pc[size_t(r)];
        const PipeAction &a = acts[k];
        int st = a.stage, i = a.microbatch;
        if (isTransfer(a.op)) {
          size_t end = k;
          bool receives = false;
          for (; end < acts.size() && isTransfer(acts[end].op); ++end) {
            const PipeAction &t = acts[end];
            receives |= !isSend(t.op);
            if (!isSend(t.op))
              continue;
            bool ready = has(r, t.op == PipeOp::SendActivation ? Activation : Gradient, t.stage,
                             t.microbatch);
            if (!ready) {
              err = cat(where(r, end), " cannot proceed: rank ", r, " has not run the ",
                        t.op == PipeOp::SendActivation ? "forward" : "backward",
                        " whose result it sends");
              return false;
            }
            sentAt[size_t(r)][end] = clock[size_t(r)];
            out.ranks[size_t(r)][end] = {int(end), clock[size_t(r)], clock[size_t(r)]};
          }
          groupEnd[size_t(r)] = end;
          if (receives)
            waiting[size_t(r)] = 1;
          else
            pc[size_t(r)] = end;
          progress = true;
          continue;
        }
        // A compute action: its inputs are on the rank now or never (the
        // rank runs its list in order).
        std::string missing;
        if (ran[idx(int(a.op), st, i)])
          missing = cat("stage ", st, " microbatch ", i, " already ran ", pipeOpName(a.op));
        else if (a.op == PipeOp::Forward) {
          if (st > 0 && !has(r, Activation, st - 1, i))
            missing = s.stageRank[size_t(st - 1)] == r
                          ? cat("the forward of stage ", st - 1, " has not run on rank ", r)
                          : cat("its input was not received (no RECV_F before it)");
        } else if (a.op == PipeOp::BackwardWeight) {
          if (!has(r, InputGradDone, st, i))
            missing = cat("I stage ", st, " mb ", i, " has not run before it");
        } else {
          if (!has(r, ForwardDone, st, i))
            missing = cat("the forward of stage ", st, " microbatch ", i, " has not run on rank ",
                          r);
          else if (st + 1 < N && !has(r, Gradient, st + 1, i))
            missing = s.stageRank[size_t(st + 1)] == r
                          ? cat("the backward of stage ", st + 1, " has not run on rank ", r)
                          : cat("its output gradient was not received (no RECV_B before it)");
        }
        if (!missing.empty()) {
          err = cat(where(r, k), " cannot proceed: ", missing);
          return false;
        }
        ran[idx(int(a.op), st, i)] = 1;
        double start = clock[size_t(r)], end = start + costOf(a);
        out.ranks[size_t(r)][k] = {int(k), start, end};
        out.busy[size_t(r)] += end - start;
        clock[size_t(r)] = end;
        if (a.op == PipeOp::Forward) {
          produced[idx(Activation, st, i)] = produced[idx(ForwardDone, st, i)] = 1;
        } else if (a.op != PipeOp::BackwardWeight) {
          produced[idx(Gradient, st, i)] = produced[idx(InputGradDone, st, i)] = 1;
        }
        ++pc[size_t(r)];
        progress = true;
      }
    }
    // Receive groups whose sends are all posted complete.
    for (int r = 0; r < P; ++r) {
      if (!waiting[size_t(r)])
        continue;
      double done = clock[size_t(r)];
      bool all = true;
      for (size_t k = pc[size_t(r)]; k < groupEnd[size_t(r)] && all; ++k) {
        const PipeAction &a = s.actions[size_t(r)][k];
        if (isSend(a.op))
          continue;
        auto [q, j] = counterpart(r, k);
        all = q >= 0 && sentAt[size_t(q)][j] >= 0;
        if (!all)
          break;
        const PipeAction &snd = s.actions[size_t(q)][j];
        if (!(receiveOf(snd) == a)) {
          err = cat(where(r, k), " cannot proceed: it would receive rank ", q, "'s ",
                    describeAction(snd), " (action ", j, "): sends and receives do not match");
          return false;
        }
        done = std::max(done, sentAt[size_t(q)][j] + costOf(snd));
      }
      if (!all)
        continue;
      for (size_t k = pc[size_t(r)]; k < groupEnd[size_t(r)]; ++k) {
        const PipeAction &a = s.actions[size_t(r)][k];
        if (isSend(a.op))
          continue;
        out.ranks[size_t(r)][k] = {int(k), clock[size_t(r)], done};
        if (a.op == PipeOp::RecvActivation)
          receivedOn[idx(Activation, a.stage - 1, a.microbatch)] = r;
        else
          receivedOn[idx(Gradient, a.stage + 1, a.microbatch)] = r;
      }
      clock[size_t(r)] = done;
      pc[size_t(r)] = groupEnd[size_t(r)];
      waiting[size_t(r)] = 0;
      progress = true;
    }
    bool finished = true;
    for (int r = 0; r < P; ++r) finished &= pc[size_t(r)] == s.actions[size_t(r)].size();
    if (finished)
      break;
    if (progress)
      continue;
    // Nobody can move: name the first rank that waits and what for.
    for (int r = 0; r < P; ++r) {
      if (!waiting[size_t(r)])
        continue;
      for (size_t k = pc[size_t(r)]; k < groupEnd[size_t(r)]; ++k) {
        if (isSend(s.actions[size_t(r)][k].op))
          continue;
        auto [q, j] = counterpart(r, k);
        if (q >= 0 && sentAt[size_t(q)][j] >= 0)
          continue;
        int peer = s.peerOf(s.actions[size_t(r)][k]);
        std::string why;
        if (q < 0)
          why = cat("rank ", peer, " never sends it");
        else if (pc[size_t(q)] == s.actions[size_t(q)].size())
          why = cat("rank ", q, " has finished without sending it");
        else
          why = cat("rank ", q, " sends it at its action ", j, " but waits at ",
                    actionAt(q, pc[size_t(q)]));
        err = cat(where(r, k), " cannot proceed: deadlock: ", why);
        return false;
      }
    }
    err = "the schedule cannot proceed (no rank can move)";
    return false;
  }
  // Every send was received.
  for (int r = 0; r < P; ++r)
    for (size_t k = 0; k < s.actions[size_t(r)].size(); ++k)
      if (isSend(s.actions[size_t(r)][k].op) && counterpart(r, k).first < 0) {
        err = cat(where(r, k), " cannot proceed: rank ", s.peerOf(s.actions[size_t(r)][k]),
                  " never receives it");
        return false;
      }
  // Complete: every stage ran every microbatch's forward and backward.
  for (int st = 0; st < N; ++st)
    for (int i = 0; i < M; ++i) {
      std::vector<PipeOp> need = {PipeOp::Forward};
      if (s.splitBackward)
        need.insert(need.end(), {PipeOp::BackwardInput, PipeOp::BackwardWeight});
      else
        need.push_back(PipeOp::Backward);
      for (PipeOp op : need)
        if (!ran[idx(int(op), st, i)]) {
          int r = s.stageRank[size_t(st)];
          err = cat("rank ", r, " never runs ", describeAction(act(op, st, i)),
                    ": the schedule is incomplete (every microbatch must pass every stage)");
          return false;
        }
    }
  out.idleFraction.assign(nP, 0);
  for (int r = 0; r < P; ++r) out.makespan = std::max(out.makespan, clock[size_t(r)]);
  for (int r = 0; r < P; ++r)
    out.idleFraction[size_t(r)] = out.makespan > 0 ? 1 - out.busy[size_t(r)] / out.makespan : 0;
  std::vector<double> perStage;
  for (const StageCost &c : costs) perStage.push_back(c.activationBytes);
  peakActivations(s, perStage, out.peakInFlight, out.peakActivationBytes);
  return true;
}

std::string validateSchedule(const PipelineSchedule &s) {
  ScheduleTimeline t;
  std::string err;
  return simulateSchedule(s, {}, t, err) ? "" : err;
}

bool parseScheduleCsv(const std::string &text, const std::string &path, PipelineSchedule &out,
                      std::string &err) {
  out = PipelineSchedule();
  out.kind = ScheduleKind::Custom;
  out.name = path;
  std::istringstream in(text);
  std::string line;
  int lineNo = 0, maxRank = -1, maxStage = -1, maxMb = -1;
  bool transfers = false, sawB = false, sawIW = false;
  std::map<int, int> stageRank;
  std::vector<std::vector<PipeAction>> actions;
  while (std::getline(in, line)) {
    ++lineNo;
    if (auto hash = line.find('#'); hash != std::string::npos)
      line.resize(hash);
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) {
      cell.erase(0, cell.find_first_not_of(" \t\r"));
      cell.erase(cell.find_last_not_of(" \t\r") + 1);
      cells.push_back(cell);
    }
    if (cells.empty() || (cells.size() == 1 && cells[0].empty()))
      continue;
    if (cells[0] == "rank")
      continue; // header
    auto bad = [&](const std::string &why) {
      err = cat(path, ":", lineNo, ": ", why);
      return false;
    };
    if (cells.size() != 4)
      return bad("expected rank,action,stage,microbatch");
    int v[3];
    size_t idx[3] = {0, 2, 3};
    for (int c = 0; c < 3; ++c) {
      const std::string &t = cells[idx[c]];
      if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos)
        return bad(cat("'", t, "' is not a non-negative integer"));
      v[c] = std::stoi(t);
    }
    PipeAction a;
    bool known = false;
    for (PipeOp op : {PipeOp::Forward, PipeOp::Backward, PipeOp::BackwardInput,
                      PipeOp::BackwardWeight, PipeOp::SendActivation, PipeOp::RecvActivation,
                      PipeOp::SendGradient, PipeOp::RecvGradient})
      if (cells[1] == pipeOpName(op))
        a.op = op, known = true;
    if (!known)
      return bad(cat("unknown action '", cells[1], "' (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B)"));
    a.stage = v[1];
    a.microbatch = v[2];
    int r = v[0];
    if (!isTransfer(a.op)) {
      auto [it, fresh] = stageRank.insert({a.stage, r});
      if (!fresh && it->second != r)
        return bad(cat("stage ", a.stage, " runs on rank ", it->second, " and on rank ", r));
    }
    transfers |= isTransfer(a.op);
    sawB |= a.op == PipeOp::Backward;
    sawIW |= a.op == PipeOp::BackwardInput || a.op == PipeOp::BackwardWeight;
    maxRank = std::max(maxRank, r);
    maxStage = std::max(maxStage, a.stage);
    maxMb = std::max(maxMb, a.microbatch);
    if (int(actions.size()) <= r)
      actions.resize(size_t(r + 1));
    actions[size_t(r)].push_back(a);
  }
  if (maxRank < 0) {
    err = path + ": no actions";
    return false;
  }
  if (sawB && sawIW) {
    err = path + ": mixes B with I/W (a schedule splits the backward or does not)";
    return false;
  }
  out.ranks = maxRank + 1;
  out.stages = maxStage + 1;
  out.microbatches = maxMb + 1;
  out.splitBackward = sawIW;
  out.actions = std::move(actions);
  out.actions.resize(size_t(out.ranks));
  out.stageRank.assign(size_t(out.stages), -1);
  for (auto [st, r] : stageRank) out.stageRank[size_t(st)] = r;
  for (int st = 0; st < out.stages; ++st)
    if (out.stageRank[size_t(st)] < 0) {
      err = cat(path, ": stage ", st, " has no compute action, so no rank");
      return false;
    }
  if (out.stages % out.ranks) {
    err = cat(path, ": ", out.stages, " stages do not divide evenly over ", out.ranks, " ranks");
    return false;
  }
  if (!transfers)
    insertTransfers(out);
  return true;
}

std::string scheduleCsv(const PipelineSchedule &s) {
  std::ostringstream o;
  o << "rank,action,stage,microbatch\n";
  for (int r = 0; r < s.ranks; ++r)
    for (const PipeAction &a : s.actions[size_t(r)])
      o << r << "," << pipeOpName(a.op) << "," << a.stage << "," << a.microbatch << "\n";
  return o.str();
}

namespace {

std::string computeLabel(const PipelineSchedule &s, const PipeAction &a) {
  std::string l = cat(pipeOpName(a.op), a.microbatch);
  if (s.virtualStages() > 1)
    l += cat(".", a.stage);
  return l;
}

} // namespace

std::string scheduleTable(const PipelineSchedule &s) {
  ScheduleTimeline t;
  std::string err;
  std::ostringstream o;
  if (!simulateSchedule(s, {}, t, err))
    return "invalid schedule: " + err + "\n";
  int slots = int(std::lround(t.makespan));
  size_t width = 3;
  for (int r = 0; r < s.ranks; ++r)
    for (const PipeAction &a : s.actions[size_t(r)])
      if (!isTransfer(a.op))
        width = std::max(width, computeLabel(s, a).size() + 1);
  o << "time  ";
  for (int k = 0; k < slots; ++k) {
    std::string c = std::to_string(k);
    o << c << std::string(width > c.size() ? width - c.size() : 1, ' ');
  }
  o << "\n";
  for (int r = 0; r < s.ranks; ++r) {
    std::vector<std::string> row(size_t(slots), ".");
    for (const TimedAction &ta : t.ranks[size_t(r)]) {
      const PipeAction &a = s.actions[size_t(r)][size_t(ta.index)];
      if (isTransfer(a.op))
        continue;
      for (int k = int(std::lround(ta.start)); k < int(std::lround(ta.end)) && k < slots; ++k)
        row[size_t(k)] = computeLabel(s, a);
    }
    std::string label = cat("rank", r);
    o << label << std::string(label.size() < 6 ? 6 - label.size() : 1, ' ');
    for (const std::string &c : row) o << c << std::string(width - c.size(), ' ');
    o << "\n";
  }
  return o.str();
}

std::string scheduleSvg(const PipelineSchedule &s, const ScheduleTimeline &t,
                        const std::string &title) {
  const double left = 70, top = 40, rowH = 34, width = 900, right = 110;
  double span = t.makespan > 0 ? t.makespan : 1;
  auto x = [&](double v) { return left + v / span * (width - left - right); };
  std::ostringstream o;
  double height = top + rowH * s.ranks + 50;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << left << "\" y=\"22\" font-size=\"14\">";
  for (char c : title) {
    if (c == '<') o << "&lt;";
    else if (c == '&') o << "&amp;";
    else if (c == '>') o << "&gt;";
    else o << c;
  }
  o << "</text>\n";
  auto color = [](PipeOp op) {
    switch (op) {
    case PipeOp::Forward: return "#4c78a8";
    case PipeOp::Backward: return "#54a24b";
    case PipeOp::BackwardInput: return "#88d27a";
    case PipeOp::BackwardWeight: return "#f58518";
    default: return "#bbbbbb";
    }
  };
  for (int r = 0; r < s.ranks && size_t(r) < t.ranks.size(); ++r) {
    double y = top + rowH * r;
    o << "<text x=\"" << left - 8 << "\" y=\"" << y + rowH / 2 + 4
      << "\" text-anchor=\"end\">rank " << r << "</text>\n";
    for (const TimedAction &ta : t.ranks[size_t(r)]) {
      const PipeAction &a = s.actions[size_t(r)][size_t(ta.index)];
      if (isTransfer(a.op))
        continue;
      double x0 = x(ta.start), w = std::max(0.5, x(ta.end) - x0);
      o << "<rect x=\"" << x0 << "\" y=\"" << y + 3 << "\" width=\"" << w << "\" height=\""
        << rowH - 6 << "\" fill=\"" << color(a.op) << "\" stroke=\"white\" stroke-width=\"0.5\">"
        << "<title>" << describeAction(a) << "</title></rect>\n";
      if (w > 14)
        o << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y + rowH / 2 + 4
          << "\" text-anchor=\"middle\" fill=\"white\">" << computeLabel(s, a) << "</text>\n";
    }
    if (size_t(r) < t.idleFraction.size())
      o << "<text x=\"" << width - right + 8 << "\" y=\"" << y + rowH / 2 + 4 << "\">idle "
        << std::lround(t.idleFraction[size_t(r)] * 1000) / 10.0 << "%</text>\n";
  }
  double ly = top + rowH * s.ranks + 20, lx = left;
  for (PipeOp op : {PipeOp::Forward, PipeOp::Backward, PipeOp::BackwardInput,
                    PipeOp::BackwardWeight}) {
    if ((op == PipeOp::Backward) == s.splitBackward)
      continue;
    o << "<rect x=\"" << lx << "\" y=\"" << ly - 9 << "\" width=\"12\" height=\"12\" fill=\""
      << color(op) << "\"/><text x=\"" << lx + 16 << "\" y=\"" << ly + 1 << "\">"
      << (op == PipeOp::Forward         ? "forward"
          : op == PipeOp::Backward      ? "backward"
          : op == PipeOp::BackwardInput ? "backward (input)"
                                        : "backward (weights)")
      << "</text>\n";
    lx += 130;
  }
  o << "<text x=\"" << lx << "\" y=\"" << ly + 1 << "\">time: 0 .. " << t.makespan
    << "; mean idle " << std::lround(t.bubble() * 1000) / 10.0 << "%</text>\n</svg>\n";
  return o.str();
}

} // namespace loom::rt
