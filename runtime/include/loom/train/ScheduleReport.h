//===- ScheduleReport.h - A pipeline schedule, as `loom schedule` prints it -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TRAIN_SCHEDULEREPORT_H
#define LOOM_TRAIN_SCHEDULEREPORT_H

#include "loom/runtime/PipelineSchedule.h"

#include <string>

namespace loom::train {

/// The schedule's shape and stage placement, its rank x time table, each
/// rank's idle fraction and peak of microbatch-stages in flight, and the
/// bubble, all in unit costs; with `actions`, every rank's actions in
/// order, transfers included.
std::string scheduleReport(const rt::PipelineSchedule &s, const rt::ScheduleTimeline &t,
                           bool actions);

} // namespace loom::train

#endif
