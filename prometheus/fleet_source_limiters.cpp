// Each node's standing verdict over a run read from Prometheus: what its agent said minute by
// minute (agent/metrics_jobs.cpp's stallwatch_job_limiter, _input_wait_ratio and
// _speedup_on_offer), over the run's span.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "prometheus/fleet_source.h"

namespace stallwatch::prometheus {
std::vector<std::optional<model::LimiterVerdict>> FleetSource::limiters() {
  const size_t n = run_.nodes.size();
  std::vector<std::optional<model::LimiterVerdict>> out(n);
  if (n == 0) return out;
  const int64_t span_s = std::max<int64_t>(1, (run_.to_ms - run_.from_ms) / 1000);
  // Over the run's span, each node's own job only (joined to the run through its info series).
  const std::string on_run = fmt::format(
      " * on (instance, training_job) group_left () max by (instance, training_job) "
      "(max_over_time({}[{}s]))",
      selector("stallwatch_run_job_info", run_matcher_), span_s);
  auto over = [&](const char* fn, const char* metric) {
    return client_.queryRange(fmt::format("{}({}[{}s]){}", fn, selector(metric), span_s, on_run),
                              run_.to_ms, run_.to_ms, 1000);
  };
  auto nodeOf = [&](const RangeSeries& s) -> std::optional<size_t> {
    for (size_t k = 0; k < n; ++k) {
      if (s.label("instance") == run_.nodes[k].instance &&
          s.label("training_job") == run_.nodes[k].training_job)
        return k;
    }
    return std::nullopt;
  };
  auto value = [](const RangeSeries& s) -> std::optional<double> {
    if (s.values.empty() || !std::isfinite(s.values.front()) || s.values.front() < 0)
      return std::nullopt;
    return s.values.front();
  };
  std::vector<std::array<double, model::kLimiterCount>> minutes(n);
  for (const auto& s : over("count_over_time", "stallwatch_job_limiter")) {
    const auto k = nodeOf(s);
    const auto limiter = model::limiterNamed(s.label("limiter"));
    const auto v = value(s);
    if (k && limiter && v) minutes[*k][static_cast<size_t>(*limiter)] += *v;
  }
  for (size_t k = 0; k < n; ++k) {
    const auto& m = minutes[k];
    const auto most = std::max_element(m.begin(), m.end());
    if (*most <= 0) continue;
    model::LimiterVerdict v;
    v.limiter = static_cast<model::Limiter>(most - m.begin());
    v.start_ms = run_.from_ms - run_.shown_shift_ms;
    v.end_ms = run_.to_ms - run_.shown_shift_ms;
    v.seconds = static_cast<double>(span_s);
    v.gpus = run_.nodes[k].gpus;
    double all = 0;
    for (double x : m) all += x;
    v.confidence = *most / all;  // the share of its agent's readings that named it
    v.figures.push_back({model::FigureKind::kAgentReadingsNamingIt, *most / all, true, "",
                         "(the most common of the agent's readings over its last minute, read "
                         "from Prometheus)"});
    out[k] = std::move(v);
  }
  for (const auto& s : over("avg_over_time", "stallwatch_job_input_wait_ratio")) {
    const auto k = nodeOf(s);
    const auto v = value(s);
    if (!k || !v || !out[*k]) continue;
    out[*k]->input_wait_share = std::min(*v, 1.0);
    out[*k]->input_wait_gpu_seconds = out[*k]->input_wait_share * out[*k]->seconds * out[*k]->gpus;
  }
  for (const auto& s : over("avg_over_time", "stallwatch_job_speedup_on_offer")) {
    const auto k = nodeOf(s);
    const auto v = value(s);
    if (!k || !v || !out[*k] || *v < 1) continue;
    out[*k]->speedup = out[*k]->speedup_low = out[*k]->speedup_high = *v;
  }
  return out;
}

}  // namespace stallwatch::prometheus
