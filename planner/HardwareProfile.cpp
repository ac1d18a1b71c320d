//===- HardwareProfile.cpp ------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "planner/HardwareProfile.h"
#include "loom/io/Json.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace loom::planner {

double EfficiencyCurve::at(double size) const {
  if (points.empty())
    return 1.0;
  if (size <= points.front().first)
    return points.front().second;
  if (size >= points.back().first)
    return points.back().second;
  for (size_t i = 1; i < points.size(); ++i) {
    if (size > points[i].first)
      continue;
    auto [x0, y0] = points[i - 1];
    auto [x1, y1] = points[i];
    double t = (std::log2(size) - std::log2(x0)) / (std::log2(x1) - std::log2(x0));
    return y0 + t * (y1 - y0);
  }
  return points.back().second;
}

namespace {

/// Reads numbers by dotted path and remembers the first one missing.
class Reader {
public:
  Reader(const json::Value &root, const std::string &origin) : root(root), origin(origin) {}

  const json::Value *find(const std::string &path) {
    const json::Value *v = &root;
    std::string part;
    std::stringstream ss(path);
    while (std::getline(ss, part, '.')) {
      if (!v->isObject() || !(v = v->get(part)))
        return nullptr;
    }
    return v;
  }

  double number(const std::string &path, bool positive = true) {
    const json::Value *v = find(path);
    if (!v || !v->isNumber()) {
      fail("missing number '" + path + "'");
      return 0;
    }
    if (positive && !(v->number() > 0)) {
      fail("'" + path + "' must be positive");
      return 0;
    }
    return v->number();
  }

  std::string string(const std::string &path) {
    const json::Value *v = find(path);
    if (!v || !v->isString()) {
      fail("missing string '" + path + "'");
      return "";
    }
    return v->str();
  }

  EfficiencyCurve curve(const std::string &path) {
    EfficiencyCurve c;
    const json::Value *v = find(path);
    if (!v || !v->isArray() || v->items().empty()) {
      fail("missing table '" + path + "' ([[size, fraction], ...])");
      return c;
    }
    for (const json::Value &p : v->items()) {
      if (!p.isArray() || p.items().size() != 2 || !p.items()[0].isNumber() ||
          !p.items()[1].isNumber()) {
        fail("'" + path + "' entries must be [size, fraction]");
        return c;
      }
      double size = p.items()[0].number(), frac = p.items()[1].number();
      if (!(size > 0) || !(frac > 0) || frac > 1) {
        fail("'" + path + "' needs sizes > 0 and fractions in (0, 1]");
        return c;
      }
      if (!c.points.empty() && size <= c.points.back().first) {
        fail("'" + path + "' sizes must ascend");
        return c;
      }
      c.points.emplace_back(size, frac);
    }
    return c;
  }

  Link link(const std::string &path) {
    Link l;
    l.name = string(path + ".link");
    double fraction = number(path + ".achieved_fraction");
    if (fraction > 1)
      fail("'" + path + ".achieved_fraction' must be at most 1");
    l.bandwidth = number(path + ".bandwidth_gbps") * 1e9 * fraction;
    l.alpha = number(path + ".alpha_us") * 1e-6;
    return l;
  }

  void fail(const std::string &msg) {
    if (err.empty())
      err = origin + ": " + msg;
  }

  std::string err;

private:
  const json::Value &root;
  std::string origin;
};

} // namespace

double HardwareProfile::TokenGrid::at(const std::vector<std::vector<double>> &table, double d0,
                                      double d1) const {
  // Position of x among dims in log2: index i and weight w toward i + 1.
  auto locate = [&](double x, size_t &i, double &w) {
    i = 0;
    w = 0;
    if (dims.size() < 2 || x <= dims.front())
      return;
    if (x >= dims.back()) {
      i = dims.size() - 1;
      return;
    }
    while (x > dims[i + 1]) ++i;
    w = std::log2(x / dims[i]) / std::log2(dims[i + 1] / dims[i]);
  };
  size_t i, j;
  double wi, wj;
  locate(d0, i, wi);
  locate(d1, j, wj);
  size_t i1 = std::min(i + 1, dims.size() - 1), j1 = std::min(j + 1, dims.size() - 1);
  double lo = table[i][j] * (1 - wj) + table[i][j1] * wj;
  double hi = table[i1][j] * (1 - wj) + table[i1][j1] * wj;
  return lo * (1 - wi) + hi * wi;
}

bool parseProfile(const std::string &text, const std::string &origin, HardwareProfile &out,
                  std::string &err) {
  json::Value root;
  std::string perr;
  if (!json::parse(text, root, perr)) {
    err = origin + ": not valid JSON (" + perr + ")";
    return false;
  }
  if (!root.isObject()) {
    err = origin + ": a profile must be a JSON object";
    return false;
  }
  Reader r(root, origin);
  HardwareProfile p;
  p.name = r.string("name");
  p.source = r.string("source");
  p.memoryBytes = r.number("memory.usable_gib") * 1024.0 * 1024.0 * 1024.0;
  p.peakBf16 = r.number("gemm.peak_tflops.bf16") * 1e12;
  p.peakFp8 = r.number("gemm.peak_tflops.fp8") * 1e12;
  p.gemm = r.curve("gemm.efficiency_by_min_dim");
  p.fp8Efficiency = r.number("gemm.fp8_efficiency_ratio");
  if (p.fp8Efficiency > 1)
    r.fail("'gemm.fp8_efficiency_ratio' must be at most 1");
  if (r.find("gemm.fp8_efficiency_by_min_dim")) // measured by loom calibrate (optional)
    p.gemmFp8 = r.curve("gemm.fp8_efficiency_by_min_dim");
  // Measured by a newer loom calibrate (optional, so older profiles load):
  // bf16 products with f32 results, f32 products, and the effective
  // bandwidth of each memory-bound opcode class.
  if (r.find("gemm.f32_out_efficiency_by_min_dim"))
    p.gemmF32Out = r.curve("gemm.f32_out_efficiency_by_min_dim");
  if (const json::Value *g = r.find("gemm.token_grid")) {
    HardwareProfile::TokenGrid &t = p.gemmTokens;
    t.tokens = r.number("gemm.token_grid.tokens");
    const json::Value *dims = r.find("gemm.token_grid.dims");
    if (!dims || !dims->isArray() || dims->items().empty())
      r.fail("'gemm.token_grid.dims' must be a non-empty array of widths");
    else
      for (const json::Value &d : dims->items()) {
        if (!d.isNumber() || !(d.number() > 0) || (!t.dims.empty() && d.number() <= t.dims.back())) {
          r.fail("'gemm.token_grid.dims' must be positive and ascending");
          break;
        }
        t.dims.push_back(d.number());
      }
    auto table = [&](const char *key, std::vector<std::vector<double>> &out) {
      const json::Value *v = g->get(key);
      bool ok = v && v->isArray() && v->items().size() == t.dims.size();
      for (size_t i = 0; ok && i < v->items().size(); ++i) {
        const json::Value &row = v->items()[i];
        ok = row.isArray() && row.items().size() == t.dims.size();
        std::vector<double> vals;
        for (size_t j = 0; ok && j < row.items().size(); ++j) {
          const json::Value &x = row.items()[j];
          ok = x.isNumber() && x.number() > 0 && x.number() <= 1;
          vals.push_back(ok ? x.number() : 0);
        }
        out.push_back(vals);
      }
      if (!ok)
        r.fail(std::string("'gemm.token_grid.") + key +
               "' must be a dims x dims table of fractions in (0, 1]");
    };
    if (r.err.empty()) {
      table("rows_bf16", t.rowsBf16);
      table("reduce_bf16", t.reduceBf16);
      table("reduce_f32", t.reduceF32);
    }
  }
  if (r.find("gemm.f32_efficiency_by_min_dim"))
    p.gemmF32 = r.curve("gemm.f32_efficiency_by_min_dim");
  if (const json::Value *classes = r.find("hbm.bandwidth_gbps_by_class")) {
    if (!classes->isObject())
      r.fail("'hbm.bandwidth_gbps_by_class' must be an object {\"opcode class\": GB/s, ...}");
    else
      for (const auto &[cls, v] : classes->fields()) {
        if (!v.isNumber() || !(v.number() > 0))
          r.fail("'hbm.bandwidth_gbps_by_class." + cls + "' must be a positive number");
        else
          p.classBandwidth[cls] = v.number() * 1e9;
      }
  }
  p.gemmWorkspace = r.number("gemm.workspace_mib") * 1024.0 * 1024.0;
  p.attention = r.curve("attention.efficiency_by_seq");
  p.attentionBackwardFactor = r.number("attention.backward_factor");
  if (const json::Value *dims = r.find("attention.by_head_dim")) {
    if (!dims->isObject())
      r.fail("'attention.by_head_dim' must be an object {\"head dim\": {...}, ...}");
    else
      for (const auto &[key, v] : dims->fields()) {
        int d = std::atoi(key.c_str());
        if (d <= 0 || std::to_string(d) != key) {
          r.fail("'attention.by_head_dim' keys must be head dims, not '" + key + "'");
          break;
        }
        std::string at = "attention.by_head_dim." + key;
        p.attentionByHeadDim[d] = {r.curve(at + ".efficiency_by_seq"), r.number(at + ".backward_factor")};
      }
  }
  double hbmFraction = r.number("hbm.achieved_fraction");
  if (hbmFraction > 1)
    r.fail("'hbm.achieved_fraction' must be at most 1");
  p.hbmBandwidth = r.number("hbm.bandwidth_gbps") * 1e9 * hbmFraction;
  p.kernelOverhead = r.number("kernel_overhead_us", false) * 1e-6;
  p.gpusPerNode = int(r.number("gpus_per_node"));
  p.intraNode = r.link("intra_node");
  p.interNode = r.link("inter_node");
  if (!r.err.empty()) {
    err = r.err;
    return false;
  }
  out = std::move(p);
  return true;
}

bool loadProfile(const std::string &nameOrPath, HardwareProfile &out, std::string &err) {
  std::string text = builtinProfileText(nameOrPath);
  if (!text.empty())
    return parseProfile(text, nameOrPath + " (built-in profile)", out, err);
  std::ifstream in(nameOrPath, std::ios::binary);
  if (!in) {
    err = "cannot open GPU profile '" + nameOrPath + "' (use h100, h200 or a JSON file)";
    return false;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return parseProfile(buf.str(), nameOrPath, out, err);
}

} // namespace loom::planner

namespace loom::planner {

std::string builtinProfileText(const std::string &name) {
#ifdef LOOM_PLANNER_BUILTIN_PROFILES
  // planner/profiles/*.json, pasted in at configure time so the driver
  // needs no data files next to it.
  static const std::pair<const char *, const char *> profiles[] = {
#include "planner/BuiltinProfiles.inc"
  };
  for (const auto &[n, text] : profiles)
    if (name == n)
      return text;
#else
  (void)name;
#endif
  return "";
}

} // namespace loom::planner
