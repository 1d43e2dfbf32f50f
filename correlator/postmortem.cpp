#include "correlator/postmortem.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace stallwatch::correlator {

Goodput goodputOf(const Analysis& a, const JobSeries& s, const model::LimiterVerdict* standing) {
  // A stall is progress below the job's own healthy pace: without intervals to compare, a
  // signal to compare by, or any progress at all, nothing was judged.
  constexpr size_t kMinIntervals = 3;
  if (s.size() < kMinIntervals) return {std::nullopt, "fewer than 3 intervals: nothing to compare"};
  if (a.progress_signal == ProgressSignal::kNone)
    return {std::nullopt, "nothing judged its progress (no steps, GPU work or GPU utilisation)"};
  if (std::none_of(a.progress.begin(), a.progress.end(),
                   [](const auto& p) { return p && std::isfinite(*p) && *p > 0; })) {
    return {std::nullopt, "its progress was zero throughout: no healthy pace to compare with"};
  }
  double seconds = 0;
  for (double i : s.interval_s) seconds += i;
  if (seconds <= 0) return {std::nullopt, "its intervals have no length"};
  Goodput g;
  // Capacity: GPU-seconds, or seconds for a job without GPUs (its GPUs count as one).
  const bool by_gpu = a.gpu_seconds_total > 0;
  const double capacity = by_gpu ? a.gpu_seconds_total : seconds;
  const double gpus = by_gpu ? a.gpu_seconds_total / seconds : 1.0;
  if (by_gpu) {
    for (double l : a.gpu_seconds_lost) g.stall_gpu_seconds += l;
  } else {
    for (const auto& inc : a.incidents) {
      for (size_t k = inc.first; k <= inc.last && k < s.size(); ++k)
        g.stall_gpu_seconds += s.interval_s[k] * inc.idle_share;
    }
  }
  // The standing wait: its share of the time judged outside the incidents, on all the job's
  // GPUs (a synchronous job's ranks wait for the one that waits). Where the incidents were
  // judged with the rest, the part of the span outside them.
  if (!standing) {
    g.input_wait_not_counted = "no standing verdict";
  } else if (standing->wait_source == model::WaitSource::kNone) {
    g.input_wait_not_counted = "not measured (no hook, no main-thread samples)";
  } else if (standing->limiter == model::Limiter::kUnknown) {
    g.input_wait_not_counted = "uncertain (the limiter is unknown)";
  } else {
    const double outside = 1.0 - standing->incidents_included_share.value_or(0.0);
    g.input_wait_gpu_seconds =
        std::clamp(standing->input_wait_share, 0.0, 1.0) * standing->seconds * outside * gpus;
  }
  g.share = std::clamp(1.0 - (g.stall_gpu_seconds + g.input_wait_gpu_seconds) / capacity, 0.0, 1.0);
  return g;
}

void takeIncidentsFrom(const Analysis& context, const JobSeries& cs, Analysis& window,
                       const JobSeries& ws) {
  std::map<int64_t, size_t> in_window;  // interval end time -> its index in the window
  for (size_t k = 0; k < ws.size(); ++k) in_window.emplace(ws.ts_ms[k], k);
  window.incidents.clear();
  std::fill(std::begin(window.gpu_seconds_lost), std::end(window.gpu_seconds_lost), 0.0);
  for (const Incident& c : context.incidents) {
    std::optional<size_t> first, last;
    for (size_t i = c.first; i <= c.last && i < cs.size(); ++i) {
      const auto it = in_window.find(cs.ts_ms[i]);
      if (it == in_window.end()) continue;
      if (!first) first = it->second;
      last = it->second;
    }
    if (!first) continue;
    Incident inc = c;
    const double whole = static_cast<double>(c.last - c.first + 1);
    const double inside = static_cast<double>(*last - *first + 1);
    inc.first = *first;
    inc.last = *last;
    inc.start_ms = ws.ts_ms[*first] - static_cast<int64_t>(ws.interval_s[*first] * 1000.0);
    inc.end_ms = ws.ts_ms[*last];
    inc.gpu_seconds_lost = c.gpu_seconds_lost * std::min(1.0, inside / whole);
    window.gpu_seconds_lost[static_cast<size_t>(inc.cls)] += inc.gpu_seconds_lost;
    window.incidents.push_back(std::move(inc));
  }
}

std::vector<Gap> gapsOf(const JobSeries& s) {
  std::vector<Gap> gaps;
  if (s.size() < 2) return gaps;
  std::vector<double> intervals(s.interval_s.begin(), s.interval_s.end());
  std::nth_element(intervals.begin(), intervals.begin() + static_cast<long>(intervals.size() / 2),
                   intervals.end());
  const double typical_ms = std::max(1.0, intervals[intervals.size() / 2] * 1000.0);
  for (size_t i = 1; i < s.size(); ++i) {
    const double step_ms = static_cast<double>(s.ts_ms[i] - s.ts_ms[i - 1]);
    if (step_ms > 1.5 * typical_ms) {
      gaps.push_back({s.ts_ms[i - 1], s.ts_ms[i],
                      static_cast<int64_t>(std::llround(step_ms / typical_ms)) - 1});
    }
  }
  return gaps;
}

RankFigures rankFigures(const JobSeries& s, const RankSeries& r) {
  Series wait(s.size());
  for (size_t i = 0; i < s.size() && i < r.data_wait_s.size(); ++i) {
    if (r.data_wait_s[i] && s.interval_s[i] > 0) wait[i] = *r.data_wait_s[i] / s.interval_s[i];
  }
  Series steps_per_s(s.size());
  for (size_t i = 0; i < s.size() && i < r.steps.size(); ++i) {
    if (r.steps[i] && s.interval_s[i] > 0) steps_per_s[i] = *r.steps[i] / s.interval_s[i];
  }
  return {r.rank,
          r.pid,
          r.gpu,
          percentile(r.gpu_util_percent, 50),
          percentile(r.gpu_work_percent, 50),
          percentile(steps_per_s, 50),
          percentile(wait, 50),
          percentile(r.read_bytes_per_s, 50)};
}

DeviceLatency deviceLatency(const model::DeviceSeries& d) {
  return {d.name,
          d.via,
          d.job_reads,
          d.also_direct,
          percentile(d.r_await_ms, 50),
          percentile(d.r_await_ms, 99),
          percentile(d.w_await_ms, 50),
          percentile(d.w_await_ms, 99)};
}

JobSummary summarizeRecordedJob(JobSeries& series, const OtherDevices& other_devices,
                                const DetectorConfig& config, const LimiterConfig& limiter) {
  JobSummary j;
  j.analysis = analyzeJobOnHost(series, other_devices, config);
  j.limits = analyzeLimits(series, j.analysis, limiter);
  j.goodput = goodputOf(j.analysis, series, &j.limits.run);
  j.gaps = gapsOf(series);
  for (const auto& d : series.devices) {
    if (!d.job_reads) continue;
    j.devices.push_back(deviceLatency(d));
  }
  for (const auto& rank : series.ranks) j.ranks.push_back(rankFigures(series, rank));
  return j;
}

}  // namespace stallwatch::correlator
