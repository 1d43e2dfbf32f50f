#include "correlator/stall_detector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>

#include "correlator/attribution.h"
#include "correlator/evidence.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;

}  // namespace

ProgressSignal progressSignalFrom(bool steps, bool gpu_work, size_t ranks_with_gpu, bool gpu_util) {
  if (steps) return ProgressSignal::kSteps;
  if (gpu_work) return ProgressSignal::kGpuWork;
  if (ranks_with_gpu >= 2) return ProgressSignal::kSlowestRankGpuUtil;
  if (gpu_util) return ProgressSignal::kGpuUtil;
  return ProgressSignal::kNone;
}

ProgressSignal chooseProgressSignal(const JobSeries& s) {
  auto any = [](const Series& x) {
    return std::any_of(x.begin(), x.end(), [](const auto& v) { return v.has_value(); });
  };
  const bool gpus = s.gpu_count > 0;
  const size_t ranks_with_gpu =
      static_cast<size_t>(std::count_if(s.ranks.begin(), s.ranks.end(), [&](const RankSeries& r) {
        return any(r.gpu_util_percent);
      }));
  return progressSignalFrom(any(s.steps), gpus && any(s.gpu_work_percent),
                            gpus ? ranks_with_gpu : 0, gpus && any(s.gpu_util_percent));
}

std::optional<double> progressAt(const JobSeries& s, size_t i, ProgressSignal signal,
                                 bool reporting) {
  switch (signal) {
    case ProgressSignal::kNone:
      return std::nullopt;
    case ProgressSignal::kSteps:
      if (!reporting || i >= s.interval_s.size() || s.interval_s[i] <= 0) return std::nullopt;
      return at(s.steps, i).value_or(0.0) / s.interval_s[i];
    case ProgressSignal::kGpuWork:
      return at(s.gpu_work_percent, i);
    case ProgressSignal::kSlowestRankGpuUtil: {
      std::optional<double> slowest;
      for (const RankSeries& r : s.ranks) {
        if (const auto u = at(r.gpu_util_percent, i); u && (!slowest || *u < *slowest)) slowest = u;
      }
      return slowest;
    }
    case ProgressSignal::kGpuUtil:
      return at(s.gpu_util_percent, i);
  }
  return std::nullopt;
}

double minDrop(ProgressSignal signal, const DetectorConfig& cfg) {
  switch (signal) {
    case ProgressSignal::kGpuUtil:
    case ProgressSignal::kSlowestRankGpuUtil:
      return cfg.min_gpu_drop_points;
    case ProgressSignal::kGpuWork:
      return cfg.min_work_drop_points;
    default:
      return 0;
  }
}

std::optional<double> percentile(const Series& values, double p) {
  std::vector<double> v;
  v.reserve(values.size());
  for (const auto& x : values) {
    if (x) v.push_back(*x);
  }
  if (v.empty()) return std::nullopt;
  // Linear interpolation between the two ranks around P; nth_element, not a full sort.
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(lo), v.end());
  const double low = v[lo];
  if (lo + 1 >= v.size()) return low;
  const double high = *std::min_element(v.begin() + static_cast<long>(lo) + 1, v.end());
  return low + (high - low) * (rank - static_cast<double>(lo));
}

std::optional<double> ProgressBaseline::current() const {
  if (sorted_.empty() || sorted_.size() < config_.warmup_intervals) return std::nullopt;
  const size_t mid = sorted_.size() / 2;
  return sorted_.size() % 2 ? sorted_[mid] : (sorted_[mid - 1] + sorted_[mid]) / 2.0;
}

bool ProgressBaseline::judge(std::optional<double> p, double min_drop) {
  if (!p) return false;
  bool stalled = false;
  if (const auto b = current(); b && *b > 0) {
    const bool low = *p < config_.stall_ratio * *b;
    const bool far = *b - *p >= min_drop;
    stalled = low && far;
  }
  if (stalled) return true;
  arrivals_.push_back(*p);
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), *p), *p);
  if (arrivals_.size() > config_.baseline_intervals) {
    sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), arrivals_.front()));
    arrivals_.pop_front();
  }
  return false;
}

namespace {

// The median of X over INC's intervals, a missing value counting as 0 (nothing done).
double idleMedian(const Series& x, const Incident& inc) {
  std::vector<double> v;
  for (size_t i = inc.first; i <= inc.last; ++i) v.push_back(at(x, i).value_or(0.0));
  return evidence::median(v).value_or(0.0);
}

// The job's exit (IdleSpan): its last incident, when no progress resumed after it began, the
// job then ended (its end seen within ten intervals of its last sample: the jobs collector
// notices an exit at its next discovery) and it may be the exit (mayBeExit). It need not run to
// the last sample: a job that has let go of its GPU before its processes are gone has no
// progress reading at all in its last intervals.
void separateExit(const JobSeries& s, const DetectorConfig& cfg, Analysis& a) {
  if (a.incidents.empty() || !s.ended_ms || s.size() == 0) return;
  const Incident& inc = a.incidents.back();
  const size_t n = s.size();
  const double interval_ms = s.interval_s.back() * 1000.0;
  if (static_cast<double>(*s.ended_ms - s.ts_ms.back()) > 10 * interval_ms) return;
  for (size_t i = inc.last + 1; i < n; ++i) {
    if (a.progress[i] && *a.progress[i] > 0 && !a.stalled[i]) return;  // progress resumed
  }
  if (!mayBeExit(s, a, inc, cfg, cfg.exit_hold_s, 0)) return;
  Incident span = inc;
  span.last = n - 1;  // to the job's last sample: its processes wound down until then
  span.end_ms = std::max(inc.end_ms, s.ts_ms.back());
  a.idle_at_exit = IdleSpan{span.start_ms,
                            span.end_ms,
                            idleMedian(s.workers_cpu, span),
                            idleMedian(s.main_cpu, span),
                            idleMedian(s.read_bytes_per_s, span),
                            idleMedian(s.write_bytes_per_s, span),
                            processesIdle(s, span)};
  a.gpu_seconds_lost[static_cast<int>(inc.cls)] -= inc.gpu_seconds_lost;
  a.incidents.pop_back();
}

// Incidents that are the job's standing condition rather than a change for the worse (issue 41):
// with too few healthy intervals before them while a read limit held the job's reads through
// them (a limit from the first second), or io-throttled by a limit that held the reads over
// most of their baseline too. Moved to STANDING; their time stays in the limiter's account.
void separateStanding(const JobSeries& s, const DetectorConfig& cfg, Analysis& a) {
  // Whether the job's reads sat at 80 % of an io.max limit or more in most of INTERVALS.
  auto limitHeld = [&](const std::vector<size_t>& intervals) {
    size_t held = 0;
    for (size_t i : intervals) {
      const auto limit = at(s.cgroup_read_limit_bytes_per_s, i);
      const auto read = at(s.cgroup_limited_read_bytes_per_s, i);
      if (limit && *limit > 0 && read && *read >= kAtLimitShare * *limit) ++held;
    }
    return !intervals.empty() && 2 * held > intervals.size();
  };
  std::vector<Incident> kept;
  for (Incident& inc : a.incidents) {
    const std::vector<size_t> base = baselineBefore(inc.first, a.stalled, cfg);
    std::vector<size_t> during;
    for (size_t i = inc.first; i <= inc.last; ++i) during.push_back(i);
    // Too little before it (a stall in the job's first seconds, judged against its later pace):
    // a change for the worse unless a limit held the job from the start.
    const bool standing = base.size() < kMinBaselineForAttribution
                              ? limitHeld(during)
                              : inc.cls == StallClass::kIoThrottled && limitHeld(base);
    if (!standing) {
      kept.push_back(std::move(inc));
      continue;
    }
    a.standing.push_back(
        {inc.start_ms, inc.end_ms, inc.cls, base.size() < kMinBaselineForAttribution});
    a.gpu_seconds_lost[static_cast<int>(inc.cls)] -= inc.gpu_seconds_lost;
  }
  a.incidents = std::move(kept);
}

// Incidents during which a job judged by its steps sent (almost) none, while its workers kept
// computing (half their CPU before or more) and reading (a quarter of their reads before or more):
// a phase outside the reported loop (an evaluation), moved to OUTSIDE_LOOP. A job hung or starved
// stops reading or computing too, and stays a stall.
void separateOutsideTheLoop(const JobSeries& s, const DetectorConfig& cfg, Analysis& a) {
  if (a.progress_signal != ProgressSignal::kSteps) return;
  constexpr double kCpuShare = 0.5, kReadShare = 0.25, kBusyCores = 0.1;
  std::vector<Incident> kept;
  for (Incident& inc : a.incidents) {
    // Silent: no step in three intervals of four or more (the first and last may hold the
    // steps before and after the phase).
    size_t quiet = 0;
    for (size_t i = inc.first; i <= inc.last; ++i) quiet += at(s.steps, i).has_value() ? 0 : 1;
    const bool silent = 4 * quiet >= 3 * (inc.last - inc.first + 1);
    const std::vector<size_t> base = baselineBefore(inc.first, a.stalled, cfg);
    std::vector<size_t> during;
    for (size_t i = inc.first; i <= inc.last; ++i) during.push_back(i);
    auto medianOf = [&](const Series& x, const std::vector<size_t>& idx) {
      return evidence::medianOver(idx, [&](size_t i) { return at(x, i); });
    };
    const auto cpu_before = medianOf(s.workers_cpu, base), cpu = medianOf(s.workers_cpu, during);
    const auto reads_before = medianOf(s.read_bytes_per_s, base),
               reads = medianOf(s.read_bytes_per_s, during);
    // Only where storage, a limit or the CPU does not explain the silence. An io-throttled
    // verdict that rests on pressure or a thread in D alone (no io.max the job ran into) does
    // not: an evaluation's loader starting up put one thread in D for 3 s (issue 16), and a job
    // that keeps reading a quarter of its reads was not held back by I/O.
    const bool explained =
        inc.cls != StallClass::kNotStorage &&
        (inc.cls != StallClass::kIoThrottled ||
         std::any_of(inc.evidence.begin(), inc.evidence.end(), [](const EvidenceItem& e) {
           return e.supports && e.name.metric == kAtIoLimitMetric;
         }));
    const bool working = silent && !explained && !base.empty() && cpu_before && cpu &&
                         reads_before && reads && *cpu_before > kBusyCores &&
                         *cpu >= kCpuShare * *cpu_before && *reads >= kReadShare * *reads_before;
    if (!working) {
      kept.push_back(std::move(inc));
      continue;
    }
    WorkSpan w{inc.start_ms, inc.end_ms, *cpu, *cpu_before, *reads, *reads_before, std::nullopt};
    const Series& gpu =
        s.gpu_count > 0 && std::any_of(s.gpu_work_percent.begin(), s.gpu_work_percent.end(),
                                       [](const auto& v) { return v.has_value(); })
            ? s.gpu_work_percent
            : s.gpu_util_percent;
    const auto gpu_before = medianOf(gpu, base), gpu_during = medianOf(gpu, during);
    if (gpu_before && gpu_during && *gpu_before > 0) w.gpu_share = *gpu_during / *gpu_before;
    a.outside_loop.push_back(w);
    a.gpu_seconds_lost[static_cast<int>(inc.cls)] -= inc.gpu_seconds_lost;
  }
  a.incidents = std::move(kept);
}

// The intervals of a stall that begins before the forward baseline is warm (BASELINE none), as
// judged against the job's later healthy intervals, when they last min_duration_s or more from
// the job's first progress; none otherwise.
// The intervals the backward pass judges: up to the job's last one that the forward pass did
// not find stalled, with progress. A job's idle end (issue 48: a minute of winding down) would
// otherwise become the backward baseline, and a stall before the forward baseline was warm would
// be judged against the job's idle exit and missed.
size_t backwardEnd(const std::vector<std::optional<double>>& progress,
                   const std::vector<bool>& stalled) {
  size_t end = progress.size();
  while (end > 0 && (stalled[end - 1] || !progress[end - 1])) --end;
  return end;
}

// N: the backward pass's end (backwardEnd).
std::optional<std::vector<bool>> earlyStall(const std::vector<std::optional<double>>& progress,
                                            const std::vector<std::optional<double>>& baseline,
                                            size_t n, double min_drop,
                                            const std::vector<double>& interval_s,
                                            const DetectorConfig& cfg) {
  size_t cold = 0;  // intervals before the forward baseline is warm
  while (cold < n && !baseline[cold]) ++cold;
  if (cold == 0) return std::nullopt;
  std::vector<bool> later_stalled(progress.size(), false);
  ProgressBaseline backwards(cfg);
  for (size_t k = n; k-- > 0;) later_stalled[k] = backwards.judge(progress[k], min_drop);
  size_t first = 0;
  while (first < cold && !(progress[first] && *progress[first] > 0)) ++first;
  std::vector<bool> stalled(progress.size(), false);
  bool any = false;
  for (size_t i = first; i < cold;) {
    if (!later_stalled[i]) {
      ++i;
      continue;
    }
    size_t last = i, j = i + 1;  // a run, single-interval gaps bridged, past the cold start
    while (j < n && (later_stalled[j] || (j + 1 < n && later_stalled[j + 1]))) {
      if (later_stalled[j]) last = j;
      ++j;
    }
    double duration = 0;
    for (size_t k = i; k <= last; ++k) duration += interval_s[k];
    if (duration >= cfg.min_duration_s) {
      for (size_t k = i; k <= last; ++k) stalled[k] = later_stalled[k];
      any = true;
    }
    i = j;
  }
  if (!any) return std::nullopt;
  return stalled;
}

// The baseline interval I was judged against backwards: the median of the healthy progress
// after it, as earlyStall's backward pass saw it.
std::optional<double> earlyBaseline(const std::vector<std::optional<double>>& progress, size_t i,
                                    size_t end, double min_drop, const DetectorConfig& cfg) {
  ProgressBaseline backwards(cfg);
  for (size_t k = end; k-- > i + 1;) backwards.judge(progress[k], min_drop);
  return backwards.current();
}

}  // namespace

bool processesIdle(const JobSeries& s, const Incident& inc) {
  constexpr double kIdleCores = 0.05, kIdleReadBytes = 1e6;
  double d_state = 0;
  for (size_t i = inc.first; i <= inc.last && i < s.size(); ++i)
    d_state = std::max(d_state, at(s.d_state_threads, i).value_or(0.0));
  // A stopped process is held, not winding down: a hang to report, not an exit to wait for.
  double stopped = 0;
  for (size_t i = inc.first; i <= inc.last && i < s.size(); ++i)
    stopped = std::max(stopped, at(s.stopped_processes, i).value_or(0.0));
  // The main process counts too: a job without workers computes in it (issue 36).
  return idleMedian(s.workers_cpu, inc) <= kIdleCores &&
         idleMedian(s.main_cpu, inc) <= kIdleCores &&
         idleMedian(s.read_bytes_per_s, inc) <= kIdleReadBytes && d_state == 0 && stopped == 0;
}

bool hangEvidence(const JobSeries& s, const Incident& inc) {
  constexpr double kStuckBytes = 1e6;
  size_t stuck = 0;
  for (size_t i = inc.first; i <= inc.last && i < s.size(); ++i) {
    if (at(s.stopped_processes, i).value_or(0.0) > 0) return true;
    const double moved =
        at(s.read_bytes_per_s, i).value_or(0.0) + at(s.write_bytes_per_s, i).value_or(0.0);
    if (at(s.d_state_threads, i).value_or(0.0) > 0 && moved < kStuckBytes && ++stuck >= 2)
      return true;
  }
  return false;
}

bool progressStopped(const Analysis& a, const Incident& inc, const DetectorConfig& cfg) {
  if (inc.first >= a.baseline.size() || inc.last >= a.progress.size()) return false;
  const auto b = a.baseline[inc.first];
  if (!b || *b <= 0) return false;
  std::vector<double> p;
  for (size_t i = inc.first; i <= inc.last; ++i) p.push_back(a.progress[i].value_or(0.0));
  return evidence::median(p).value_or(0.0) <= cfg.stopped_share * *b;
}

bool stillWorking(const JobSeries& s, const Analysis& a, const Incident& inc,
                  const DetectorConfig& cfg) {
  constexpr double kShare = 0.5, kBusyReadBytes = 1e6, kBusyCores = 0.1;
  const std::vector<size_t> base = baselineBefore(inc.first, a.stalled, cfg);
  std::vector<size_t> during;
  for (size_t i = inc.first; i <= inc.last && i < s.size(); ++i) during.push_back(i);
  auto medianOf = [&](const Series& x, const std::vector<size_t>& idx) {
    return evidence::medianOver(idx, [&](size_t i) { return at(x, i); });
  };
  auto kept = [&](const Series& x, double floor) {
    const auto before = medianOf(x, base), now = medianOf(x, during);
    return before && now && *before > floor && *now >= kShare * *before;
  };
  return kept(s.read_bytes_per_s, kBusyReadBytes) || kept(s.workers_cpu, kBusyCores);
}

bool mayBeExit(const JobSeries& s, const Analysis& a, const Incident& inc,
               const DetectorConfig& cfg, double hold_s, double settle_s) {
  const double lasted_s = static_cast<double>(inc.end_ms - inc.start_ms) / 1000.0;
  if (inc.cls != StallClass::kNotStorage || lasted_s >= hold_s || !progressStopped(a, inc, cfg) ||
      hangEvidence(s, inc))
    return false;
  return lasted_s < settle_s || !stillWorking(s, a, inc, cfg);
}

Analysis analyzeJob(const JobSeries& s, const DetectorConfig& cfg) {
  Judging own;
  own.signal = chooseProgressSignal(s);
  own.progress = [&](size_t i, bool reporting) { return progressAt(s, i, own.signal, reporting); };
  own.attribute = [&](const std::vector<bool>& stalled, Incident& inc) {
    attributeIncident(s, stalled, cfg, inc);
  };
  return analyzeJob(s, cfg, own);
}

Analysis analyzeJob(const JobSeries& s, const DetectorConfig& cfg, const Judging& judging) {
  Analysis a;
  const size_t n = s.size();
  a.stalled.assign(n, false);
  a.baseline.assign(n, std::nullopt);
  const ProgressSignal signal = judging.signal;
  a.progress_signal = signal;
  for (size_t i = 0; i < n; ++i) a.gpu_seconds_total += s.interval_s[i] * s.gpu_count;
  if (signal == ProgressSignal::kNone) return a;
  std::vector<std::optional<double>>& progress = a.progress;
  progress.assign(n, std::nullopt);
  bool reporting = false;
  for (size_t i = 0; i < n; ++i) {
    reporting = reporting || at(s.steps, i).has_value();
    progress[i] = judging.progress(i, reporting);
  }
  // Utilisation points: the loss in GPU-seconds is the points below the baseline (kept for
  // the one-GPU verdicts recorded so far); other signals lose their share of the baseline.
  const bool gpu =
      signal == ProgressSignal::kGpuUtil || signal == ProgressSignal::kSlowestRankGpuUtil;
  const double min_drop = minDrop(signal, cfg);

  // A stall longer than the window keeps being judged against the job's behaviour before it.
  auto forward = [&](const std::vector<bool>& forced) {
    ProgressBaseline baseline(cfg);
    for (size_t i = 0; i < n; ++i) {
      a.baseline[i] = baseline.current();
      a.stalled[i] = forced[i] || baseline.judge(progress[i], min_drop);
    }
  };
  forward(std::vector<bool>(n, false));
  // A stall that begins before the baseline is warm (its first warmup_intervals healthy ones)
  // cannot be judged forward: the post-mortem judges those first intervals against the job's
  // later healthy ones (the same rule run backwards from the end), so that a job starved from
  // its first seconds is found from its true start (issue 31). Only a stall long enough to be
  // an incident, and only from the job's first progress on (its start-up is no stall):
  // otherwise the forward verdict stands as the live correlator reached it.
  const size_t backward_end = backwardEnd(progress, a.stalled);
  if (const auto early =
          earlyStall(progress, a.baseline, backward_end, min_drop, s.interval_s, cfg)) {
    forward(*early);
    for (size_t i = 0; i < n && !a.baseline[i]; ++i) {
      if ((*early)[i]) a.baseline[i] = earlyBaseline(progress, i, backward_end, min_drop, cfg);
    }
  }

  // Runs of stalled intervals, bridging single-interval gaps.
  size_t i = 0;
  while (i < n) {
    if (!a.stalled[i]) {
      ++i;
      continue;
    }
    size_t last = i;
    size_t j = i + 1;
    while (j < n && (a.stalled[j] || (j + 1 < n && a.stalled[j + 1]))) {
      if (a.stalled[j]) last = j;
      ++j;
    }
    double duration = 0;
    for (size_t k = i; k <= last; ++k) duration += s.interval_s[k];
    if (duration < cfg.min_duration_s) {
      ++a.blips;
    } else {
      Incident inc;
      inc.first = i;
      inc.last = last;
      inc.start_ms = s.ts_ms[i] - static_cast<int64_t>(std::llround(s.interval_s[i] * 1000.0));
      inc.end_ms = s.ts_ms[last];
      double lost = 0, capacity = 0;
      for (size_t k = i; k <= last; ++k) {
        const double b = a.baseline[k].value_or(0.0);
        const double p = progress[k].value_or(b);
        const double drop = b > 0 ? std::clamp((b - p) / b, 0.0, 1.0) : 0.0;
        capacity += s.interval_s[k];
        lost += drop * s.interval_s[k];
        inc.gpu_seconds_lost += gpu ? std::max(0.0, b - p) / 100.0 * s.interval_s[k] * s.gpu_count
                                    : drop * s.interval_s[k] * s.gpu_count;
      }
      inc.idle_share = capacity > 0 ? lost / capacity : 0.0;
      judging.attribute(a.stalled, inc);
      a.gpu_seconds_lost[static_cast<int>(inc.cls)] += inc.gpu_seconds_lost;
      a.incidents.push_back(std::move(inc));
    }
    i = j;
  }
  separateOutsideTheLoop(s, cfg, a);
  separateExit(s, cfg, a);
  separateStanding(s, cfg, a);
  return a;
}

Analysis analyzeJobOnHost(JobSeries& series, const OtherDevices& other_devices,
                          const DetectorConfig& config) {
  Analysis a = analyzeJob(series, config);
  if (a.incidents.empty() || !other_devices) return a;
  std::vector<std::pair<size_t, size_t>> windows;
  for (const auto& inc : a.incidents) {
    const size_t from =
        inc.first > config.baseline_intervals * 2 ? inc.first - config.baseline_intervals * 2 : 0;
    windows.emplace_back(from, inc.last);
  }
  other_devices(series, windows);
  return analyzeJob(series, config);  // detection does not look at devices: same incidents
}

}  // namespace stallwatch::correlator
