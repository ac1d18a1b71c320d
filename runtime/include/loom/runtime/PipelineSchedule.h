//===- PipelineSchedule.h - Pipeline schedules as data ----------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A pipeline schedule is, per pipeline rank, the ordered list of what the
// rank does during one training step: run the forward of microbatch i on
// stage s (F), its backward (B), or the backward split in two as zero-bubble
// schedules do (I: input gradient, what the previous stage waits for; W:
// weight gradient, which nothing waits for), and the point-to-point
// transfers between ranks (SEND_F/RECV_F: a stage's output activation;
// SEND_B/RECV_B: the gradient of a stage's input). Consecutive receives of
// a rank form one group (Communicator::sendRecv): posted together, done
// together; sends go out in the background in posting order.
//
// The same object is generated here (GPipe, 1F1B, Megatron's interleaved
// 1F1B, zero bubble), read from a CSV file, validated, printed as a table
// or an SVG timeline, executed by the runtime (tools/loom/PipelineRunner)
// and timed by the planner (simulateSchedule with its per-stage costs):
// what loom plan predicts is what loom train runs.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_PIPELINESCHEDULE_H
#define LOOM_RUNTIME_PIPELINESCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::rt {

enum class PipeOp : uint8_t {
  Forward,        // F: stage s, microbatch i
  Backward,       // B: input and weight gradients at once
  BackwardInput,  // I: the gradient of the stage's input
  BackwardWeight, // W: the weight gradients (after I)
  SendActivation, // SEND_F: stage s's output of microbatch i to stage s+1's rank
  RecvActivation, // RECV_F: stage s's input of microbatch i from stage s-1's rank
  SendGradient,   // SEND_B: the gradient of stage s's input to stage s-1's rank
  RecvGradient,   // RECV_B: the gradient of stage s's output from stage s+1's rank
};

/// "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B".
const char *pipeOpName(PipeOp op);
inline bool isTransfer(PipeOp op) { return op >= PipeOp::SendActivation; }

struct PipeAction {
  PipeOp op = PipeOp::Forward;
  int stage = 0;
  int microbatch = 0;
  bool operator==(const PipeAction &o) const {
    return op == o.op && stage == o.stage && microbatch == o.microbatch;
  }
};

/// "F stage 1 mb 3" (transfers add the peer: "SEND_F stage 1 mb 3 to rank 2").
std::string describeAction(const PipeAction &a, int peer = -1);

enum class ScheduleKind : uint8_t { GPipe, OneFOneB, Interleaved, ZeroBubble, Custom };
const char *scheduleKindName(ScheduleKind k);
/// "gpipe", "1f1b", "interleaved", "zb" -> kind; false otherwise.
bool parseScheduleKind(const std::string &name, ScheduleKind &out);

struct PipelineSchedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  std::string name; // the kind's name, or the CSV file's
  int ranks = 1;    // pipeline ranks (pp)
  int stages = 1;   // model chunks: pp * virtual stages per rank
  int microbatches = 1;
  bool splitBackward = false;      // I and W instead of B
  std::vector<int> stageRank;      // stage -> pipeline rank
  std::vector<std::vector<PipeAction>> actions; // per rank, in order

  int virtualStages() const { return ranks ? stages / ranks : 1; }
  /// The pipeline rank a transfer action talks to (-1 for compute).
  int peerOf(const PipeAction &a) const;
};

/// Builds `kind` for `ranks` pipeline ranks, `virtualStages` stages per
/// rank and `microbatches`, with the transfers inserted:
///   gpipe        every forward, then every backward (V = 1);
///   1f1b         min(P - r - 1, M) warm-up forwards, then one forward one
///                backward, then the remaining backwards (V = 1);
///   interleaved  Megatron's interleaved 1F1B: stage s on rank s % P,
///                forwards in rounds of P microbatches per chunk, warm-up
///                2 (P - r - 1) + (V - 1) P (V >= 2, M a multiple of P);
///   zb           zero bubble, the backward split into I and W: V = 1 is
///                ZB-H1 (stage s on rank s), V = 2 ZBV (rank r holds
///                stages r and 2P - 1 - r); the order comes from a greedy
///                list schedule with unit costs that runs an I as soon as
///                it is ready, a forward while at most 1F1B's count of
///                microbatches wait for their I (P - r; 2P under ZBV) and
///                fewer than twice that for their W, and a W when nothing
///                else can run.
/// False with a one-line `err` when the combination is not supported.
bool buildSchedule(ScheduleKind kind, int ranks, int virtualStages, int microbatches,
                   PipelineSchedule &out, std::string &err);

/// Adds, around every compute action whose input comes from or whose
/// output goes to a stage on another rank, the RECV before and the SEND
/// after it (what buildSchedule and a CSV of compute actions only get);
/// where a pair of ranks would otherwise receive out of the order it
/// sends, a receive is posted earlier.
void insertTransfers(PipelineSchedule &s);

/// Per stage, what the simulation charges (seconds, or unit costs) and the
/// bytes a microbatch in flight keeps (its saved activations).
struct StageCost {
  double forward = 1, backward = 2, backwardInput = 1, backwardWeight = 1;
  double transfer = 0; // one activation or gradient transfer
  double activationBytes = 1;
};

/// One action as simulated (or measured): when it ran.
struct TimedAction {
  int index = 0; // into the rank's action list
  double start = 0, end = 0;
};

struct ScheduleTimeline {
  std::vector<std::vector<TimedAction>> ranks; // per rank, in order
  double makespan = 0;
  std::vector<double> busy;            // per rank: time in compute actions
  std::vector<double> idleFraction;    // per rank: 1 - busy / makespan
  std::vector<int> peakInFlight;       // per rank: most microbatch-stages holding activations
  std::vector<double> peakActivationBytes; // per rank: the same in bytes
  double bubble() const;               // mean idle fraction over the ranks
};

/// Checks the schedule and runs it on a model of the machine: every rank
/// executes its actions in order; a compute action starts when the rank is
/// free and runs for its cost (its inputs must be on the rank: received or
/// computed there). Sends are posted when the rank reaches them and never
/// hold it up (the runtime sends in the background, as pipelining runtimes
/// do with isend); consecutive transfers are one group, which holds the
/// rank until all of its receives are matched: the k-th send from a to b
/// with the k-th receive on b from a, the data there after the transfer
/// cost. Activations are held from F to B (or W).
/// Fails with a one-line error naming the first rank and action that
/// cannot proceed (a deadlock, a missing input, a transfer matched with the
/// wrong data) or, for an incomplete schedule, the first rank and the
/// action it never runs. `costs` has one entry per stage (empty: unit
/// costs).
bool simulateSchedule(const PipelineSchedule &s, const std::vector<StageCost> &costs,
                      ScheduleTimeline &out, std::string &err);

/// The most saved activations each rank holds at once, walking its
/// actions in order (a microbatch-stage is held from its F to its B or
/// W): in microbatch-stages, and in bytes with `bytesPerStage`. The order
/// alone decides it, so no timing is needed (the planner's memory).
void peakActivations(const PipelineSchedule &s, const std::vector<double> &bytesPerStage,
                     std::vector<int> &count, std::vector<double> &bytes);

/// simulateSchedule's checks with unit costs: "" when valid.
std::string validateSchedule(const PipelineSchedule &s);

/// CSV: one action per line, `rank,action,stage,microbatch` (header and
/// '#' comments allowed), in each rank's order; actions as pipeOpName.
/// Without any SEND/RECV line the transfers are inserted as for the built
/// schedules. The stage count and each stage's rank come from the compute
/// actions. False with `err` naming the file and line.
bool parseScheduleCsv(const std::string &text, const std::string &path, PipelineSchedule &out,
                      std::string &err);
std::string scheduleCsv(const PipelineSchedule &s);

/// A rank x time table of the compute actions on the unit-cost timeline
/// (F, B twice as long, I, W), one column per time unit.
std::string scheduleTable(const PipelineSchedule &s);

/// An SVG timeline (rank x time) of `t` (simulated or measured), one box
/// per compute action labelled with its microbatch (and stage when a rank
/// holds several), coloured by kind, and the idle fraction per rank.
std::string scheduleSvg(const PipelineSchedule &s, const ScheduleTimeline &t,
                        const std::string &title);

} // namespace loom::rt

#endif
