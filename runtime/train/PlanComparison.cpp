//===- PlanComparison.cpp -------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "loom/train/PlanComparison.h"
#include "loom/train/GradientError.h"
#include "loom/train/WeightFiles.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace loom::train {
namespace {

double l2(const std::vector<float> &v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

std::string jsonString(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string num(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string xmlText(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else o += c;
  }
  return o;
}

} // namespace

bool runPlan(TrainProgram &tp, const std::string &initWeights, int threads,
             const std::string &backend, const TokenFile &data, int64_t B, int64_t T,
             int64_t steps, BatchRule rule, PlanRun &r, std::string &err) {
  std::vector<std::string> hfNames;
  std::map<std::string, std::string> aliases;
  if (!initWeights.empty() && !loadInitWeights(initWeights, tp.params, hfNames, aliases, err))
    return false;
  std::unique_ptr<StepRunner> runner = StepRunner::create(tp, threads, err, backend);
  if (!runner) {
    err = "plan " + r.name + ": " + err;
    return false;
  }
  r.perRank = runner->perRank();
  r.device = runner->deviceMemoryPerRank();
  TrainState st;
  st.params = tp.params;
  for (const ParamSlot &p : st.params) {
    st.expAvg.emplace_back(p.value.size(), 0.0f);
    st.expAvgSq.emplace_back(p.value.size(), 0.0f);
    r.paramNames.push_back(p.name);
  }
  for (int64_t s = 0; s < steps; ++s) {
    Batch batch;
    if (!makeBatch(data, s, B, T, batch, err, rule))
      return false;
    StepResult out;
    if (!runner->step(st, s, batch, s == 0, out, err)) {
      err = "plan " + r.name + ", step " + std::to_string(s) + ": " + err;
      return false;
    }
    r.loss.push_back(out.loss);
    r.gradNorm.push_back(out.gradNorm);
    if (s == 0) {
      r.grads0 = std::move(out.grads);
      r.activationNorms0 = std::move(out.activationNorms);
    }
  }
  return true;
}

void compareWithFirst(std::vector<PlanRun> &runs, int64_t steps) {
  const PlanRun &ref = runs[0];
  for (PlanRun &r : runs) {
    double sum = 0;
    for (int64_t s = 0; s < steps; ++s) {
      double d = std::fabs(r.loss[s] - ref.loss[s]);
      r.maxAbs = std::max(r.maxAbs, d);
      r.maxRel = std::max(r.maxRel, d / std::max(1e-30, std::fabs(ref.loss[s])));
      sum += d;
    }
    r.meanAbs = sum / double(steps);
    r.finalAbs = std::fabs(r.loss.back() - ref.loss.back());
    double largest = 0; // for the floor of gradients that are zero (GradientError.h)
    for (const std::vector<float> &g : ref.grads0) {
      double r2 = 0;
      for (float x : g) r2 += double(x) * x;
      largest = std::max(largest, std::sqrt(r2));
    }
    for (size_t i = 0; i < r.grads0.size(); ++i) {
      double d2 = 0, r2 = 0;
      for (size_t k = 0; k < r.grads0[i].size(); ++k) {
        double d = double(r.grads0[i][k]) - ref.grads0[i][k];
        d2 += d * d;
        r2 += double(ref.grads0[i][k]) * ref.grads0[i][k];
      }
      bool floored;
      double rel = relativeGradientError(d2, r2, largest, floored);
      r.gradRel.push_back(rel);
      r.worstGradRel = std::max(r.worstGradRel, rel);
    }
  }

}

void printComparison(const std::string &model, int64_t B, int64_t T, const std::string &precision,
                     int64_t steps, const std::string &backend, const std::vector<PlanRun> &runs) {
  const PlanRun &ref = runs[0];
  std::printf("loom verify: %s, batch %lld x seq %lld, %s, %lld steps, %s backend, reference "
              "plan %s\n",
              model.c_str(), (long long)B, (long long)T, precision.c_str(), (long long)steps,
              backend.c_str(), ref.name.c_str());
  std::printf("%-28s %5s %11s %11s %11s %11s %10s %10s %10s %10s %10s\n", "plan", "ranks",
              "loss0", "final", "min", "mean", "max|d|", "mean|d|", "final|d|", "max rel",
              "grad rel");
  for (const PlanRun &r : runs) {
    double mn = *std::min_element(r.loss.begin(), r.loss.end()), mean = 0;
    for (double v : r.loss) mean += v / double(steps);
    std::printf("%-28s %5d %11.7f %11.7f %11.7f %11.7f %10.3e %10.3e %10.3e %10.3e %10.3e\n",
                r.name.c_str(), r.ranks, r.loss[0], r.loss.back(), mn, mean, r.maxAbs,
                r.meanAbs, r.finalAbs, r.maxRel, r.worstGradRel);
  }
  std::printf("step-0 gradient norms per parameter:\n%-48s", "parameter");
  for (const PlanRun &r : runs) std::printf(" %16s", r.name.substr(0, 16).c_str());
  std::printf("\n");
  for (size_t i = 0; i < ref.paramNames.size(); ++i) {
    std::printf("%-48s", ref.paramNames[i].substr(0, 48).c_str());
    for (const PlanRun &r : runs) std::printf(" %16.9g", l2(r.grads0[i]));
    std::printf("\n");
  }
  std::printf("step-0 activation norms (residual stream entering each norm, global batch):\n"
              "%-48s", "activation");
  for (const PlanRun &r : runs) std::printf(" %16s", r.name.substr(0, 16).c_str());
  std::printf("\n");
  for (size_t k = 0; k < ref.activationNorms0.size(); ++k) {
    std::printf("%-48s", ("norm input " + std::to_string(k)).c_str());
    for (const PlanRun &r : runs)
      std::printf(" %16.9g", k < r.activationNorms0.size() ? r.activationNorms0[k] : NAN);
    std::printf("\n");
  }
  for (const PlanRun &r : runs)
    for (size_t k = 0; k < r.device.size(); ++k) {
      const RankDeviceMemory &d = r.device[k];
      auto gib = [](double b) { return b / double(1ull << 30); };
      if (k == 0)
        std::printf("device memory per rank, GiB (parameters gradients optimizer activations "
                    "communication workspace | allocated measured): %s\n", r.name.c_str());
      std::printf("  rank %zu: %.4f %.4f %.4f %.4f %.4f %.4f | %.4f %.4f\n", k, gib(r.bufferPlan.params),
                  gib(r.bufferPlan.grads), gib(r.bufferPlan.optimizer), gib(r.bufferPlan.activations),
                  gib(r.bufferPlan.comm + double(d.allocated.communication)),
                  gib(r.bufferPlan.workspace + double(d.allocated.workspace)),
                  gib(double(d.allocated.total())), gib(double(d.measured)));
    }
  std::printf("per-rank bytes (parameters / gradients / optimizer state):\n");
  for (const PlanRun &r : runs)
    std::printf("  %-28s %llu / %llu / %llu\n", r.name.c_str(), (unsigned long long)r.perRank.params,
                (unsigned long long)r.perRank.grads, (unsigned long long)r.perRank.optimizer);

}

bool checkComparisonBounds(const std::vector<PlanRun> &runs, int64_t steps, double lossTol,
                           double gradTol, double absTol, double meanTol) {
  bool pass = true;
  for (const PlanRun &r : runs) {
    bool ok = r.maxRel <= lossTol && r.worstGradRel <= gradTol && r.maxAbs <= absTol &&
              r.meanAbs <= meanTol;
    std::printf("%s: %s: max relative loss difference %.3e over %lld steps, worst step-0 "
                "gradient relative L2 %.3e, |loss diff| max %.3e mean %.3e\n",
                ok ? "PASS" : "FAIL", r.name.c_str(), r.maxRel, (long long)steps,
                r.worstGradRel, r.maxAbs, r.meanAbs);
    pass &= ok;
  }
  return pass;
}

std::string comparisonJson(const std::string &model, int64_t steps, const std::vector<PlanRun> &runs) {
  std::ostringstream j;
  j << "{\n  \"model\": " << jsonString(model) << ",\n  \"steps\": " << steps
    << ",\n  \"reference_plan\": " << jsonString(runs[0].name) << ",\n  \"plans\": [\n";
  for (size_t k = 0; k < runs.size(); ++k) {
    const PlanRun &r = runs[k];
    auto list = [&](const std::vector<double> &v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
      return s + "]";
    };
    double mn = *std::min_element(r.loss.begin(), r.loss.end()), mean = 0;
    for (double v : r.loss) mean += v / double(r.loss.size());
    j << "    {\"plan\": " << jsonString(r.name) << ", \"ranks\": " << r.ranks
      << ",\n     \"initial_loss\": " << num(r.loss.front()) << ", \"final_loss\": "
      << num(r.loss.back()) << ", \"min_loss\": " << num(mn) << ", \"mean_loss\": " << num(mean)
      << ",\n     \"loss\": " << list(r.loss) << ",\n     \"grad_norm\": " << list(r.gradNorm)
      << ",\n     \"max_abs_loss_diff\": " << num(r.maxAbs)
      << ", \"mean_abs_loss_diff\": " << num(r.meanAbs)
      << ", \"final_abs_loss_diff\": " << num(r.finalAbs)
      << ", \"max_rel_loss_diff\": " << num(r.maxRel)
      << ", \"worst_grad_rel_l2\": " << num(r.worstGradRel)
      << ",\n     \"bytes_per_rank\": {\"parameters\": " << r.perRank.params
      << ", \"gradients\": " << r.perRank.grads << ", \"optimizer\": " << r.perRank.optimizer
      << "},\n     \"device_memory_per_rank\": [";
    for (size_t k = 0; k < r.device.size(); ++k) {
      const RankDeviceMemory &d = r.device[k];
      const BufferPlanBytes &b = r.bufferPlan;
      j << (k ? ", " : "") << "{\"parameters\": " << num(b.params) << ", \"gradients\": "
        << num(b.grads) << ", \"optimizer\": " << num(b.optimizer) << ", \"activations\": "
        << num(b.activations) << ", \"communication\": "
        << num(b.comm + double(d.allocated.communication)) << ", \"workspace\": "
        << num(b.workspace + double(d.allocated.workspace)) << ", \"allocated\": "
        << d.allocated.total() << ", \"measured\": " << d.measured << "}";
    }
    j << "],\n     \"step0_grad_norms\": {";
    for (size_t i = 0; i < r.grads0.size(); ++i)
      j << (i ? ", " : "") << jsonString(r.paramNames[i]) << ": " << num(l2(r.grads0[i]));
    j << "},\n     \"step0_activation_norms\": [";
    for (size_t k = 0; k < r.activationNorms0.size(); ++k)
      j << (k ? ", " : "") << num(r.activationNorms0[k]);
    j << "],\n     \"step0_grad_rel_l2\": {";
    for (size_t i = 0; i < r.gradRel.size(); ++i)
      j << (i ? ", " : "") << jsonString(r.paramNames[i]) << ": " << num(r.gradRel[i]);
    j << "}}" << (k + 1 < runs.size() ? "," : "") << "\n";
  }
  j << "  ]\n}\n";
  return j.str();
}

/// Loss curves, one polyline per plan; later plans dashed so that curves
/// lying on top of each other (the expected outcome) stay visible. Below
/// them a panel of |loss - reference loss| per step for every other plan,
/// on a log scale (fp32 plans differ by rounding, bf16 ones by far more).
std::string comparisonSvg(const std::string &model, const std::vector<PlanRun> &runs) {
  const double W = 720, H = 420, left = 70, right = 200, top = 40, bottom = 50;
  const double panelTop = H + 10, panelH = 200; // the |delta| panel, below
  double lo = INFINITY, hi = -INFINITY;
  size_t steps = 0;
  for (const PlanRun &r : runs) {
    steps = std::max(steps, r.loss.size());
    for (double v : r.loss)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(hi > lo)) hi = lo + 1;
  double pad = 0.05 * (hi - lo);
  lo -= pad, hi += pad;
  auto x = [&](size_t s) {
    return left + (steps > 1 ? double(s) / double(steps - 1) : 0.5) * (W - left - right);
  };
  auto y = [&](double v) { return top + (hi - v) / (hi - lo) * (H - top - bottom); };
  static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\""
    << panelTop + panelH + 40 << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << left << "\" y=\"22\" font-size=\"14\">loom verify: " << xmlText(model)
    << " loss per step</text>\n"
    << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\""
    << H - bottom << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom
    << "\" stroke=\"black\"/>\n";
  for (int t = 0; t <= 4; ++t) {
    double v = lo + (hi - lo) * t / 4;
    s << "<text x=\"" << left - 6 << "\" y=\"" << y(v) + 4 << "\" text-anchor=\"end\">" << num(v).substr(0, 6)
      << "</text>\n";
  }
  for (size_t t = 0; t < steps; t += std::max<size_t>(1, steps / 5))
    s << "<text x=\"" << x(t) << "\" y=\"" << H - bottom + 16 << "\" text-anchor=\"middle\">" << t
      << "</text>\n";
  s << "<text x=\"" << (left + W - right) / 2 << "\" y=\"" << H - 10
    << "\" text-anchor=\"middle\">step</text>\n";
  for (size_t k = 0; k < runs.size(); ++k) {
    const char *c = colors[k % 6];
    s << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"" << (k ? 1.5 : 3)
      << "\"" << (k ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t t = 0; t < runs[k].loss.size(); ++t)
      if (std::isfinite(runs[k].loss[t]))
        s << x(t) << "," << y(runs[k].loss[t]) << " ";
    s << "\"/>\n<text x=\"" << W - right + 10 << "\" y=\"" << top + 18 * k + 10 << "\" fill=\"" << c
      << "\">" << xmlText(runs[k].name) << "</text>\n";
  }
  // |delta loss| against the first plan, log10 from 1e-9 up to the largest.
  double dmax = 1e-9;
  for (size_t k = 1; k < runs.size(); ++k)
    for (size_t t = 0; t < runs[k].loss.size() && t < runs[0].loss.size(); ++t)
      dmax = std::max(dmax, std::fabs(runs[k].loss[t] - runs[0].loss[t]));
  double lhi = std::ceil(std::log10(dmax)), llo = std::min(lhi - 1, -9.0);
  auto yd = [&](double d) {
    double l = std::log10(std::max(d, 1e-9));
    return panelTop + (lhi - l) / (lhi - llo) * panelH;
  };
  s << "<text x=\"" << left << "\" y=\"" << panelTop - 4 << "\">|loss - loss(" << xmlText(runs[0].name)
    << ")| per step, log scale</text>\n"
    << "<line x1=\"" << left << "\" y1=\"" << panelTop + panelH << "\" x2=\"" << W - right << "\" y2=\""
    << panelTop + panelH << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << panelTop
    << "\" x2=\"" << left << "\" y2=\"" << panelTop + panelH << "\" stroke=\"black\"/>\n";
  for (double l = llo; l <= lhi; l += std::max(1.0, std::floor((lhi - llo) / 4)))
    s << "<text x=\"" << left - 6 << "\" y=\"" << yd(std::pow(10.0, l)) + 4
      << "\" text-anchor=\"end\">1e" << int(l) << "</text>\n";
  for (size_t k = 1; k < runs.size(); ++k) {
    s << "<polyline fill=\"none\" stroke=\"" << colors[k % 6] << "\" stroke-width=\"1.5\" points=\"";
    for (size_t t = 0; t < runs[k].loss.size() && t < runs[0].loss.size(); ++t)
      if (std::isfinite(runs[k].loss[t]))
        s << x(t) << "," << yd(std::fabs(runs[k].loss[t] - runs[0].loss[t])) << " ";
    s << "\"/>\n";
  }
  s << "</svg>\n";
  return s.str();
}

} // namespace loom::train
