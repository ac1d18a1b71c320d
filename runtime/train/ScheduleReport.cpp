//===- ScheduleReport.cpp -------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/ScheduleReport.h"

#include <cstdarg>
#include <cstdio>

namespace loom::train {
namespace {

/// printf into `out`.
void appendf(std::string &out, const char *fmt, ...) {
  va_list ap, copy;
  va_start(ap, fmt);
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string buf(size_t(n) + 1, '\0');
  std::vsnprintf(buf.data(), buf.size(), fmt, ap);
  va_end(ap);
  out.append(buf.data(), size_t(n));
}

} // namespace

std::string scheduleReport(const rt::PipelineSchedule &s, const rt::ScheduleTimeline &t,
                           bool actions) {
  std::string out;
  appendf(out, "schedule %s: pp=%d, %d stage%s (%d per rank), %d microbatches, backward %s\n",
          s.name.c_str(), s.ranks, s.stages, s.stages == 1 ? "" : "s", s.virtualStages(),
          s.microbatches, s.splitBackward ? "split into I and W" : "whole (B)");
  std::string placement;
  for (int st = 0; st < s.stages; ++st)
    placement += (st ? " " : "") + std::to_string(st) + "->" + std::to_string(s.stageRank[st]);
  appendf(out, "stage -> rank: %s\n", placement.c_str());
  appendf(out, "%s", rt::scheduleTable(s).c_str());
  for (int r = 0; r < s.ranks; ++r)
    appendf(out, "rank %d: idle %.1f%%, peak %d microbatch-stage%s in flight\n", r,
            100 * t.idleFraction[r], t.peakInFlight[r], t.peakInFlight[r] == 1 ? "" : "s");
  appendf(out, "bubble (mean idle fraction, unit costs): %.4f\n", t.bubble());
  if (actions)
    for (int r = 0; r < s.ranks; ++r) {
      appendf(out, "rank %d:", r);
      for (const rt::PipeAction &a : s.actions[r])
        appendf(out, " %s(s%d,m%d)", rt::pipeOpName(a.op), a.stage, a.microbatch);
      appendf(out, "\n");
    }
  return out;
}

} // namespace loom::train
