#include "correlator/stall_detector.h"

#include <algorithm>
#include <cmath>
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

// Per-interval progress: GPU utilisation, or steps per second for jobs without GPU data.
// A job that reports steps and then goes silent made no steps: that is 0, not unknown.
std::vector<std::optional<double>> progressOf(const JobSeries& s, std::string& signal) {
  std::vector<std::optional<double>> p(s.size());
  const bool gpu = s.gpu_count > 0 &&
                   std::any_of(s.gpu_util_percent.begin(), s.gpu_util_percent.end(),
                               [](const auto& v) { return v.has_value(); });
  if (gpu) {
    signal = "gpu_util";
    for (size_t i = 0; i < s.size(); ++i) p[i] = at(s.gpu_util_percent, i);
    return p;
  }
  bool reporting = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto steps = at(s.steps, i);
    reporting = reporting || steps.has_value();
    if (reporting && s.interval_s[i] > 0) p[i] = steps.value_or(0.0) / s.interval_s[i];
  }
  if (reporting) signal = "steps";
  return p;
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
    return x >= min_during && (ratio_mode ? x / reference >= threshold : x - reference >= threshold);
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
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };

  // 1. The job's own write burst (a checkpoint).
  const Check writes = compare("job_write_bytes_per_s", base, inc.first, inc.last,
                               [&](size_t i) { return at(s.write_bytes_per_s, i); }, true,
                               cfg.write_ratio, cfg.write_floor_bytes_per_s, cfg.write_floor_bytes_per_s);
  add(writes);

  // 2. The job's devices: latency and queue against their own baselines.
  struct Slow {
    const DeviceSeries* device;
    double strength;
    double share;
  };
  std::vector<Slow> slow;
  for (const DeviceSeries& d : s.devices) {
    const Check latency = compare("await_ms " + d.name, base, inc.first, inc.last,
                                  [&](size_t i) { return latencyAt(d, i); }, true,
                                  cfg.latency_ratio, cfg.latency_floor_ms, cfg.latency_floor_ms);
    const Check queue = compare("aqu_sz " + d.name, base, inc.first, inc.last,
                                [&](size_t i) { return at(d.aqu_sz, i); }, true, cfg.queue_ratio,
                                kQueueFloor, 1.0);
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
  const Check io = compare("io_some", base, inc.first, inc.last, [&](size_t i) { return at(s.io_some, i); },
                           false, cfg.pressure_rise, 0, 0);
  const Check dstate = compare("job_d_state_threads", base, inc.first, inc.last,
                               [&](size_t i) { return at(s.d_state_threads, i); }, false, 1.0, 0, 1.0);
  const Check cpu = compare("cpu_some", base, inc.first, inc.last, [&](size_t i) { return at(s.cpu_some, i); },
                            false, cfg.pressure_rise, 0, 0);
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
      if (sl.device->via == inc.device && inc.physical_device.empty()) inc.physical_device = sl.device->name;
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

const char* toString(StallClass c) {
  switch (c) {
    case StallClass::kDiskSlow: return "disk-slow";
    case StallClass::kIoThrottled: return "io-throttled";
    case StallClass::kInputCpu: return "input-cpu";
    case StallClass::kCheckpoint: return "checkpoint";
    case StallClass::kNotStorage: return "not-storage";
  }
  return "?";
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

bool ProgressBaseline::judge(std::optional<double> p, bool gpu) {
  if (!p) return false;
  bool stalled = false;
  if (const auto b = current(); b && *b > 0) {
    const bool low = *p < config_.stall_ratio * *b;
    const bool far = !gpu || *b - *p >= config_.min_gpu_drop_points;
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
  const auto progress = progressOf(s, a.progress_signal);
  for (size_t i = 0; i < n; ++i) a.gpu_seconds_total += s.interval_s[i] * s.gpu_count;
  if (a.progress_signal.empty()) return a;
  const bool gpu = a.progress_signal == "gpu_util";

  // A stall longer than the window keeps being judged against the job's behaviour before it.
  ProgressBaseline baseline(cfg);
  for (size_t i = 0; i < n; ++i) {
    a.baseline[i] = baseline.current();
    a.stalled[i] = baseline.judge(progress[i], gpu);
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
      inc.start_ms = s.ts_ms[i] - static_cast<int64_t>(s.interval_s[i] * 1000.0 + 0.5);
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

}  // namespace stallwatch::correlator
