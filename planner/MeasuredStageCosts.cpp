//===- MeasuredStageCosts.cpp - loom plan --stage-costs -------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/MeasuredStageCosts.h"
#include "loom/io/FileBytes.h"

#include <sstream>

namespace loom::planner {

bool loadStageCostProfiles(const std::string &paths, const PlanRequest &req,
                           std::vector<rt::StageCostProfile> &out, std::string &err) {
  std::stringstream list(paths);
  std::string path;
  while (std::getline(list, path, ',')) {
    if (path.empty())
      continue;
    std::string text;
    if (!io::readFileBytes(path, text)) {
      err = "cannot read stage costs '" + path + "'";
      return false;
    }
    rt::StageCostProfile p;
    if (!rt::parseStageCostProfile(text, path, p, err))
      return false;
    if (p.microbatchRows != req.microbatch || p.seq != req.seq) {
      err = path + ": measured on microbatches of " + std::to_string(p.microbatchRows) + " x " +
            std::to_string(p.seq) + ", but --batch " + std::to_string(req.microbatch) +
            " --seq " + std::to_string(req.seq) + " plans " + std::to_string(req.microbatch) +
            " x " + std::to_string(req.seq);
      return false;
    }
    int world = p.ranks * p.tp * p.dpShard * p.dpReplicate;
    if (world > req.gpus) {
      err = path + ": measured on " + std::to_string(world) + " ranks, more than --gpus " +
            std::to_string(req.gpus);
      return false;
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) {
    err = "--stage-costs names no file";
    return false;
  }
  return true;
}

} // namespace loom::planner
