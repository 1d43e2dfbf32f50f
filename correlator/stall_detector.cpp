#include "correlator/stall_detector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

namespace stallwatch::correlator {
namespace {

constexpr double kQueueFloor = 0.1;
constexpr size_t kMinBaselineForAttribution = 5;

std::optional<double> at(const Series& s, size_t i) { return i < s.size() ? s[i] : std::nullopt; }

std::optional<double> median(std::vector<double> v) {
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

std::optional<double> latencyAt(const DeviceSeries& d, size_t i) {
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
Check compare(const std::string& signal, const std::vector<size_t>& base, size_t first, size_t last,
              Fn value, bool ratio_mode, double threshold, double floor, double min_during) {
  Check c;
  c.item.signal = signal;
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

std::optional<double> waitShareAt(const Series& wait, const std::vector<double>& interval_s,
                                  size_t i) {
  const auto w = at(wait, i);
  if (!w || i >= interval_s.size() || interval_s[i] <= 0) return std::nullopt;
  return std::clamp(*w / interval_s[i], 0.0, 1.0);
}

// Which rank held a synchronous job back during the incident. A starving rank's GPU goes
// idle while the others spin inside the collective that waits for it (their utilisation stays
// high), and its data wait rises while theirs does not. One starving rank is the straggler;
// several (a shared disk got slow for all) are said as such, with no single straggler.
// Returns the straggler's index in s.ranks.
std::optional<size_t> findStraggler(const JobSeries& s, const DetectorConfig& cfg,
                                    const std::vector<size_t>& base, Incident& inc) {
  struct Judged {
    bool idle = false, busy = false, waits = false;
  };
  std::vector<Judged> judged(s.ranks.size());
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    const RankSeries& rank = s.ranks[r];
    const std::string name = "rank " + std::to_string(rank.rank);
    Check util = compare(
        "gpu_util_percent " + name, base, inc.first, inc.last,
        [&](size_t i) { return at(rank.gpu_util_percent, i); }, true, 1.0, 0, 0);
    if (util.item.baseline > 0) {
      judged[r].idle = util.item.during < cfg.rank_idle_ratio * util.item.baseline &&
                       util.item.baseline - util.item.during >= cfg.min_gpu_drop_points;
      judged[r].busy = util.item.during >= cfg.rank_busy_ratio * util.item.baseline;
    }
    util.item.supports = judged[r].idle;
    add(util);
    const Check wait = compare(
        "data_wait_share " + name, base, inc.first, inc.last,
        [&](size_t i) { return waitShareAt(rank.data_wait_s, s.interval_s, i); }, false,
        cfg.rank_wait_rise, 0, 0);
    if (wait.share_of_intervals > 0 || wait.item.during > 0) {
      judged[r].waits = wait.item.supports;
      add(wait);
    }
  }
  // A rank that starves reports its data wait only when the batch finally comes (a blocked
  // loop sends nothing), so early in a stall there may be no wait figures at all: then the
  // GPUs' idling decides. Either is enough.
  std::vector<size_t> starved;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    const bool others_busy = std::any_of(
        judged.begin(), judged.end(), [&](const Judged& j) { return &j != &judged[r] && j.busy; });
    if (judged[r].waits || (judged[r].idle && others_busy)) starved.push_back(r);
  }
  if (starved.size() == 1) {
    const RankSeries& st = s.ranks[starved.front()];
    inc.straggler = Straggler{st.rank, st.pid, st.gpu};
    for (const RankSeries& r : s.ranks) {
      if (r.rank != st.rank) inc.waiting_ranks.push_back(r.rank);
    }
    return starved.front();
  }
  // Every rank (or several) starved alike, or none stood out: no single straggler.
  if (starved.size() > 1) {
    for (size_t r : starved) inc.ranks_starved.push_back(s.ranks[r].rank);
  } else {
    for (const RankSeries& r : s.ranks) inc.ranks_starved.push_back(r.rank);
  }
  return std::nullopt;
}

// The job seen through one rank: its processes' writes, reads, D-state threads and workers,
// with the job's devices and the host's pressure, so that the usual attribution names what
// starved that rank.
JobSeries throughRank(const JobSeries& s, const RankSeries& r) {
  JobSeries v;
  v.ts_ms = s.ts_ms;
  v.interval_s = s.interval_s;
  v.gpu_count = s.gpu_count;
  v.io_some = s.io_some;
  v.cpu_some = s.cpu_some;
  v.devices = s.devices;
  v.write_bytes_per_s = r.write_bytes_per_s;
  v.read_bytes_per_s = r.read_bytes_per_s;
  v.d_state_threads = r.d_state_threads;
  v.workers_cpu = r.workers_cpu;
  return v;
}

void attributeCause(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    Incident& inc);

void attribute(const JobSeries& s, const DetectorConfig& cfg, const std::vector<bool>& stalled,
               Incident& inc) {
  std::vector<size_t> base;
  const size_t from = inc.first > cfg.baseline_intervals ? inc.first - cfg.baseline_intervals : 0;
  for (size_t i = from; i < inc.first; ++i) {
    if (!stalled[i]) base.push_back(i);
  }
  if (base.size() < kMinBaselineForAttribution) {
    inc.evidence.push_back({"baseline_intervals", 0, static_cast<double>(base.size()), false});
    inc.confidence = 0.2;
    return;
  }
  if (s.ranks.size() >= 2) {
    if (const auto straggler = findStraggler(s, cfg, base, inc)) {
      attributeCause(throughRank(s, s.ranks[*straggler]), cfg, base, inc);
      return;
    }
  }
  attributeCause(s, cfg, base, inc);
}

void attributeCause(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    Incident& inc) {
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };

  // 1. The job's own write burst (a checkpoint).
  const Check writes = compare(
      "job_write_bytes_per_s", base, inc.first, inc.last,
      [&](size_t i) { return at(s.write_bytes_per_s, i); }, true, cfg.write_ratio,
      cfg.write_floor_bytes_per_s, cfg.write_floor_bytes_per_s);
  add(writes);

  // 2. The job's devices: latency and queue against their own baselines.
  struct Slow {
    const DeviceSeries* device;
    double strength;
    double share;
  };
  std::vector<Slow> slow;
  for (const DeviceSeries& d : s.devices) {
    const Check latency = compare(
        "await_ms " + d.name, base, inc.first, inc.last, [&](size_t i) { return latencyAt(d, i); },
        true, cfg.latency_ratio, cfg.latency_floor_ms, cfg.latency_floor_ms);
    const Check queue = compare(
        "aqu_sz " + d.name, base, inc.first, inc.last, [&](size_t i) { return at(d.aqu_sz, i); },
        true, cfg.queue_ratio, kQueueFloor, 1.0);
    Check l = latency, q = queue;
    if (!d.job_reads) {  // shown, never blamed
      l.item.signal += " (the job does not read it)";
      q.item.signal += " (the job does not read it)";
      l.item.supports = q.item.supports = false;
    }
    add(l);
    add(q);
    if (d.job_reads && (latency.item.supports || queue.item.supports)) {
      slow.push_back({&d, std::max(latency.ratio, queue.ratio),
                      std::max(latency.share_of_intervals, queue.share_of_intervals)});
    }
  }

  // 3. Pressure above the devices, D-state workers, CPU.
  const Check io = compare(
      "io_some", base, inc.first, inc.last, [&](size_t i) { return at(s.io_some, i); }, false,
      cfg.pressure_rise, 0, 0);
  const Check dstate = compare(
      "job_d_state_threads", base, inc.first, inc.last,
      [&](size_t i) { return at(s.d_state_threads, i); }, false, 1.0, 0, 1.0);
  const Check cpu = compare(
      "cpu_some", base, inc.first, inc.last, [&](size_t i) { return at(s.cpu_some, i); }, false,
      cfg.pressure_rise, 0, 0);
  add(io);
  add(dstate);
  add(cpu);

  auto confidence = [](double share) { return std::clamp(0.5 + 0.5 * share, 0.0, 1.0); };
  if (writes.item.supports) {
    inc.cls = StallClass::kCheckpoint;
    inc.confidence = confidence(writes.share_of_intervals);
    return;
  }
  if (!slow.empty()) {
    // Prefer the device the job's files are on; the disk under it is named as physical.
    auto best = std::max_element(slow.begin(), slow.end(), [](const Slow& a, const Slow& b) {
      const bool a_direct = a.device->direct(), b_direct = b.device->direct();
      if (a_direct != b_direct) return !a_direct;
      return a.strength < b.strength;
    });
    const DeviceSeries* chosen = best->device;
    inc.cls = StallClass::kDiskSlow;
    inc.device = chosen->direct() ? chosen->name : chosen->via;
    if (!chosen->direct()) inc.physical_device = chosen->name;
    for (const Slow& sl : slow) {
      if (sl.device->via == inc.device && inc.physical_device.empty())
        inc.physical_device = sl.device->name;
    }
    if (inc.physical_device.empty()) {
      for (const DeviceSeries& d : s.devices) {
        if (d.via == inc.device) {
          inc.physical_device = d.name;
          break;
        }
      }
    }
    inc.confidence = confidence(best->share);
    return;
  }
  if (io.item.supports || dstate.item.supports) {
    inc.cls = StallClass::kIoThrottled;
    inc.confidence = confidence(std::max(io.share_of_intervals, dstate.share_of_intervals));
    return;
  }
  if (cpu.item.supports) {
    inc.cls = StallClass::kInputCpu;
    inc.confidence = confidence(cpu.share_of_intervals);
    return;
  }
  inc.cls = StallClass::kNotStorage;
  // As sure as the storage signals were there to look at.
  const bool looked = !s.devices.empty() && !s.io_some.empty();
  inc.confidence = looked ? 0.7 : 0.4;
}

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

std::string rankSummary(const Incident& inc) {
  auto list = [](const std::vector<int32_t>& ranks) {
    std::string out;
    for (int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
  };
  if (!inc.straggler) {
    if (inc.ranks_starved.empty()) return {};
    return (inc.ranks_starved.size() == 1 ? "rank " : "ranks ") + list(inc.ranks_starved) +
           " starved alike: no single straggler";
  }
  const Straggler& st = *inc.straggler;
  std::string out = "rank " + std::to_string(st.rank) + " (pid " + std::to_string(st.pid) +
                    (st.gpu.empty() ? "" : ", " + st.gpu.substr(0, 12)) +
                    ") starved: " + toString(inc.cls);
  if (!inc.device.empty()) {
    out +=
        " " + inc.device + (inc.physical_device.empty() ? "" : " (on " + inc.physical_device + ")");
  }
  // The first signal that decided the class, not a per-rank one.
  for (const auto& e : inc.evidence) {
    if (!e.supports || e.signal.rfind("gpu_util_percent rank", 0) == 0 ||
        e.signal.rfind("data_wait_share rank", 0) == 0) {
      continue;
    }
    char figures[96];
    std::snprintf(figures, sizeof figures, " %.3g -> %.3g", e.baseline, e.during);
    out += ", " + e.signal + figures;
    break;
  }
  if (!inc.waiting_ranks.empty()) {
    out += "; rank" + std::string(inc.waiting_ranks.size() == 1 ? " " : "s ") +
           list(inc.waiting_ranks) + " waited";
  }
  return out;
}

std::string stallRankLabel(const Incident& inc) {
  if (inc.straggler) return std::to_string(inc.straggler->rank);
  return inc.ranks_starved.empty() ? "" : "all";
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

Analysis analyzeJob(const JobSeries& s, const DetectorConfig& cfg) {
  Analysis a;
  const size_t n = s.size();
  a.stalled.assign(n, false);
  a.baseline.assign(n, std::nullopt);
  const ProgressSignal signal = chooseProgressSignal(s);
  a.progress_signal = signal;
  for (size_t i = 0; i < n; ++i) a.gpu_seconds_total += s.interval_s[i] * s.gpu_count;
  if (signal == ProgressSignal::kNone) return a;
  std::vector<std::optional<double>> progress(n);
  bool reporting = false;
  for (size_t i = 0; i < n; ++i) {
    reporting = reporting || at(s.steps, i).has_value();
    progress[i] = progressAt(s, i, signal, reporting);
  }
  // Utilisation points: the loss in GPU-seconds is the points below the baseline (kept for
  // the one-GPU verdicts recorded so far); other signals lose their share of the baseline.
  const bool gpu =
      signal == ProgressSignal::kGpuUtil || signal == ProgressSignal::kSlowestRankGpuUtil;
  const double min_drop = minDrop(signal, cfg);

  // A stall longer than the window keeps being judged against the job's behaviour before it.
  ProgressBaseline baseline(cfg);
  for (size_t i = 0; i < n; ++i) {
    a.baseline[i] = baseline.current();
    a.stalled[i] = baseline.judge(progress[i], min_drop);
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
      attribute(s, cfg, a.stalled, inc);
      a.gpu_seconds_lost[static_cast<int>(inc.cls)] += inc.gpu_seconds_lost;
      a.incidents.push_back(std::move(inc));
    }
    i = j;
  }
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
