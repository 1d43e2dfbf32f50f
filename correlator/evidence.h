// Comparing a signal during an incident with its baseline: the arithmetic every verdict's
// evidence comes from (stall_detector's attribution, straggler's per-rank judgement).
// Internal to the correlator.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "model/incident.h"
#include "model/series.h"

namespace stallwatch::correlator::evidence {

using model::DeviceSeries;
using model::EvidenceItem;
using model::Series;

using model::at;

// A job reading (or writing) at this share of its cgroup's io.max limit or more is held by the
// limit (the incident rule, a checkpoint's writes, the standing verdict and its spans alike).
inline constexpr double kAtLimitShare = 0.8;

inline std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) {
    m = (m + *std::max_element(v.begin(), v.begin() + static_cast<long>(mid))) / 2.0;
  }
  return m;
}

template <typename Fn>
std::optional<double> medianOver(const std::vector<size_t>& indices, Fn value) {
  std::vector<double> v;
  v.reserve(indices.size());
  for (size_t i : indices) {
    if (auto x = value(i)) v.push_back(*x);
  }
  return median(std::move(v));
}

inline std::optional<double> latencyAt(const DeviceSeries& d, size_t i) {
  const auto r = at(d.r_await_ms, i);
  const auto w = at(d.w_await_ms, i);
  if (r && w) return std::max(*r, *w);
  return r ? r : w;
}

struct Check {
  EvidenceItem item;
  double ratio = 0;
  double share_of_intervals = 0;  // incident intervals past the threshold
};

// Compares SERIES over the incident with its baseline window. RATIO_MODE: during/baseline
// must reach THRESHOLD (baseline floored at FLOOR); else during - baseline must reach it.
template <typename Fn>
Check compare(model::EvidenceName name, const std::vector<size_t>& base, size_t first, size_t last,
              Fn value, bool ratio_mode, double threshold, double floor, double min_during) {
  Check c;
  c.item.signal = model::displayName(name);
  c.item.name = std::move(name);
  std::vector<size_t> during;
  for (size_t i = first; i <= last; ++i) during.push_back(i);
  const auto b = medianOver(base, value);
  const auto d = medianOver(during, value);
  c.item.baseline = b.value_or(0.0);
  c.item.during = d.value_or(0.0);
  if (!d) return c;
  const double reference = ratio_mode ? std::max(c.item.baseline, floor) : c.item.baseline;
  auto crosses = [&](double x) {
    return x >= min_during &&
           (ratio_mode ? x / reference >= threshold : x - reference >= threshold);
  };
  c.ratio = ratio_mode ? *d / reference : *d - reference;
  c.item.supports = crosses(*d);
  size_t over = 0, known = 0;
  for (size_t i : during) {
    if (auto x = value(i)) {
      ++known;
      over += crosses(*x);
    }
  }
  c.share_of_intervals = known ? static_cast<double>(over) / static_cast<double>(known) : 0.0;
  return c;
}

inline std::optional<double> waitShareAt(const Series& wait, const std::vector<double>& interval_s,
                                         size_t i) {
  const auto w = at(wait, i);
  if (!w || i >= interval_s.size() || interval_s[i] <= 0) return std::nullopt;
  return std::clamp(*w / interval_s[i], 0.0, 1.0);
}

}  // namespace stallwatch::correlator::evidence
