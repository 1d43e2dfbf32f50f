#include "correlator/stall_detector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>

#include "collectors/job_cgroup.h"
#include "correlator/evidence.h"
#include "correlator/straggler.h"
#include "correlator/wait_channel.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;
using evidence::Check;
using evidence::compare;
using evidence::latencyAt;

constexpr double kQueueFloor = 0.1;
// The evidence that the job read at its cgroup's io.max limit: io-throttled, with the limit named.
constexpr std::string_view kAtIoLimit = "job_cgroup_read_bytes_per_s at ";
constexpr size_t kMinBaselineForAttribution = 5;

void attributeCause(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    Incident& inc);

// The healthy intervals an incident starting at FIRST is compared with: the unstalled ones
// among the baseline window before it.
std::vector<size_t> baselineBefore(size_t first, const std::vector<bool>& stalled,
                                   const DetectorConfig& cfg) {
  std::vector<size_t> base;
  const size_t from = first > cfg.baseline_intervals ? first - cfg.baseline_intervals : 0;
  for (size_t i = from; i < first; ++i) {
    if (!stalled[i]) base.push_back(i);
  }
  return base;
}

}  // namespace

void attributeIncident(const JobSeries& s, const std::vector<bool>& stalled,
                       const DetectorConfig& cfg, Incident& inc) {
  const std::vector<size_t> base = baselineBefore(inc.first, stalled, cfg);
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

namespace {

// A job reading at this share of its cgroup's io.max limit or more is held by the limit.
constexpr double kAtLimitShare = 0.8;
// A checkpoint's peak: at least this many bytes per second in one interval, and a burst that
// writes at least this many bytes counts even without a writeback wait seen.
constexpr double kCheckpointPeakFloor = 100e6;
constexpr double kCheckpointBytes = 1e9;

// The part of a job's cgroup limits about KIND ("io.max", "cpu.max"), or KIND alone.
std::string limitText(const std::string& limits, const std::string& kind) {
  size_t at = 0;
  while (at < limits.size()) {
    const size_t end = std::min(limits.find("; ", at), limits.size());
    if (limits.compare(at, kind.size(), kind) == 0) return limits.substr(at, end - at);
    at = end + 2;
  }
  return kind;
}

// Two devices wrote alike over a checkpoint when the lesser wrote at least this share of the
// greater (a loop device and the disk under it: the same bytes, flushed in bursts).
constexpr double kAlikeShare = 0.75;

// Devices stacked on others: their writes reach a disk below.
bool stacked(const std::string& name) {
  for (const char* prefix : {"loop", "dm-", "md", "nbd", "rbd", "drbd", "/"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The device a checkpoint went to: the one that wrote the most over the burst and the stall
// (a checkpoint may go to a disk the job never reads). A stacked device (a loop, dm or md
// device, a mount) carries its writes down to the disk below, which then writes as much: where
// they wrote alike, the stacked one is named, the other as its physical disk. Recordings
// without device write figures: the job's device whose writes took longest.
std::pair<const DeviceSeries*, const DeviceSeries*> checkpointTarget(
    const JobSeries& s, const std::vector<size_t>& around) {
  const DeviceSeries* target = nullptr;
  const DeviceSeries* below = nullptr;
  auto bytesWritten = [&](const DeviceSeries& d) {
    double sum = 0;
    for (size_t i : around) sum += at(d.write_bytes_per_s, i).value_or(0.0);
    return sum;
  };
  double most = 0;
  for (const DeviceSeries& d : s.devices) most = std::max(most, bytesWritten(d));
  if (most > 0) {
    for (const DeviceSeries& d : s.devices) {
      if (bytesWritten(d) < kAlikeShare * most) continue;
      if (!target || (stacked(d.name) && !stacked(target->name))) {
        if (target && !stacked(target->name)) below = target;
        target = &d;
      } else if (!stacked(d.name) && !below) {
        below = &d;
      }
    }
    return {target, below == target ? nullptr : below};
  }
  double slowest = -1;
  for (const DeviceSeries& d : s.devices) {
    if (!d.job_reads || !d.direct()) continue;
    const auto w = evidence::medianOver(around, [&](size_t i) { return at(d.w_await_ms, i); });
    if (w && *w > slowest) {
      slowest = *w;
      target = &d;
    }
  }
  return {target, nullptr};
}

// A neighbour's use of the device named is evidence when it is at least this many bytes/s
// and twice what the same cgroup did before the stall.
constexpr double kNeighbourFloor = 10e6;

// Who else used DEVICES (the one the stall names and the disk under it, or the one a limit the
// job ran into is on): the heaviest other cgroup or process over the stall and the interval
// before it (they are read every few seconds), against what it did in the baseline intervals
// where it was seen (0 where it was not).
void addNeighbour(const JobSeries& s, const std::vector<size_t>& base,
                  const std::vector<std::string>& devices, Incident& inc) {
  if (s.neighbour_io.empty()) return;
  auto onTarget = [&](const collectors::DeviceUser& u) {
    return !u.device.empty() &&
           std::find(devices.begin(), devices.end(), u.device) != devices.end();
  };
  std::map<std::pair<std::string, std::string>, double> during;  // (device, cgroup) -> max
  const size_t from = inc.first > 0 ? inc.first - 1 : 0;
  for (size_t i = from; i <= inc.last && i < s.neighbour_io.size(); ++i) {
    for (const auto& u : collectors::parseDeviceUsers(s.neighbour_io[i])) {
      if (!onTarget(u)) continue;
      double& m = during[{u.device, u.cgroup}];
      m = std::max(m, u.bytes_per_second());
    }
  }
  if (during.empty()) return;
  const auto heaviest =
      std::max_element(during.begin(), during.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<double> before;
  for (size_t i : base) {
    if (i >= s.neighbour_io.size()) continue;
    for (const auto& u : collectors::parseDeviceUsers(s.neighbour_io[i])) {
      if (u.device == heaviest->first.first && u.cgroup == heaviest->first.second)
        before.push_back(u.bytes_per_second());
    }
  }
  const double baseline = evidence::median(std::move(before)).value_or(0.0);
  const double now = heaviest->second;
  inc.evidence.push_back(
      {"neighbour_bytes_per_s " + heaviest->first.first + " " + heaviest->first.second, baseline,
       now, now >= kNeighbourFloor && now >= 2 * baseline});
}

// A job whose processes sat idle through a stall (no CPU, no reads, no I/O wait): where its main
// process slept is what it waited on (a lock, a poll on workers that send nothing, a child).
// Evidence of a hang, named; the share of intervals it slept there, during and before.
void addIdleWait(const JobSeries& s, const std::vector<size_t>& base, Incident& inc) {
  if (!processesIdle(s, inc)) return;
  std::vector<std::string> waits;
  for (size_t i = inc.first; i <= inc.last && i < s.sleep_wchan.size(); ++i)
    waits.push_back(s.sleep_wchan[i]);
  const std::string wait = mostCommonText(waits);
  auto shareAsleep = [&](const std::vector<size_t>& idx) {
    size_t n = 0, asleep = 0;
    for (size_t i : idx) {
      ++n;
      asleep += i < s.sleep_wchan.size() && !wait.empty() && s.sleep_wchan[i] == wait ? 1 : 0;
    }
    return n ? static_cast<double>(asleep) / static_cast<double>(n) : 0.0;
  };
  std::vector<size_t> during;
  for (size_t i = inc.first; i <= inc.last; ++i) during.push_back(i);
  EvidenceItem e;
  e.signal = "job_processes_idle";
  if (!wait.empty()) {
    const std::string subsystem = waitSubsystem(wait);
    e.signal += " asleep in " + wait + (subsystem.empty() ? "" : " (" + subsystem + ")");
  }
  e.baseline = shareAsleep(base);
  e.during = shareAsleep(during);
  e.supports = true;
  inc.evidence.push_back(e);
}

void attributeCause(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    Incident& inc) {
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };

  // 1. The job's own write burst (a checkpoint). A checkpoint writes its bytes in an interval
  // or two at full speed, then waits for writeback (a sync) with little written: its median
  // misses it, its peak does not.
  const Check writes = compare(
      "job_write_bytes_per_s", base, inc.first, inc.last,
      [&](size_t i) { return at(s.write_bytes_per_s, i); }, true, cfg.write_ratio,
      cfg.write_floor_bytes_per_s, cfg.write_floor_bytes_per_s);
  add(writes);
  // The incident's intervals, and the same from the one before it: a checkpoint's burst often
  // lands as the GPUs go idle.
  std::vector<size_t> during, around;
  for (size_t i = inc.first > 0 ? inc.first - 1 : 0; i <= inc.last; ++i) {
    around.push_back(i);
    if (i >= inc.first) during.push_back(i);
  }
  Check burst = writes;
  burst.item.signal = "job_write_bytes_per_s peak";
  burst.item.during = 0;
  double written = 0;
  for (size_t i : around) {
    const double w = at(s.write_bytes_per_s, i).value_or(0.0);
    burst.item.during = std::max(burst.item.during, w);
    written += w * (i < s.interval_s.size() ? s.interval_s[i] : 1.0);
  }
  burst.item.supports =
      burst.item.during >=
      std::max(cfg.write_ratio * std::max(writes.item.baseline, cfg.write_floor_bytes_per_s),
               kCheckpointPeakFloor);
  // Threads waiting for writeback or a journal commit: a sync after the write.
  size_t flushing = 0, blocked = 0;
  for (size_t i = inc.first; i <= inc.last && i < s.d_state_wchan.size(); ++i) {
    if (at(s.d_state_threads, i).value_or(0) < 1) continue;
    ++blocked;
    const std::string subsystem = waitSubsystem(s.d_state_wchan[i]);
    if (subsystem == "writeback" || subsystem == "journal") ++flushing;
  }
  const bool waits_for_writeback = flushing > 0 && 2 * flushing >= blocked;
  const bool checkpoint =
      writes.item.supports ||
      (burst.item.supports && (waits_for_writeback || written >= kCheckpointBytes));
  if (burst.item.supports || waits_for_writeback) {
    burst.item.signal += waits_for_writeback ? " (then waiting for writeback)" : "";
    add(burst);
  }

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

  // 3. Pressure above the devices, D-state workers, CPU: the job's own cgroup's where it has
  // one (the node's is moved by every other tenant), else the node's.
  auto known = [&](const Series& x) {
    for (size_t i = base.empty() ? inc.first : base.front(); i <= inc.last && i < x.size(); ++i) {
      if (x[i]) return true;
    }
    return false;
  };
  const bool own_io = known(s.cgroup_io_some), own_cpu = known(s.cgroup_cpu_some);
  const Series& io_series = own_io ? s.cgroup_io_some : s.io_some;
  const Series& cpu_series = own_cpu ? s.cgroup_cpu_some : s.cpu_some;
  const Check io = compare(
      own_io ? "io_some (the job's cgroup)" : "io_some", base, inc.first, inc.last,
      [&](size_t i) { return at(io_series, i); }, false, cfg.pressure_rise, 0, 0);
  Check dstate = compare(
      "job_d_state_threads", base, inc.first, inc.last,
      [&](size_t i) { return at(s.d_state_threads, i); }, false, 1.0, 0, 1.0);
  // Where they waited says which layer held them: the evidence names it (FUSE, NFS/RPC,
  // writeback, block I/O...).
  if (dstate.item.during >= 1) {
    std::vector<std::string> waits;
    for (size_t i = inc.first; i <= inc.last && i < s.d_state_wchan.size(); ++i) {
      if (at(s.d_state_threads, i).value_or(0) >= 1) waits.push_back(s.d_state_wchan[i]);
    }
    if (const std::string wait = mostCommonText(waits); !wait.empty()) {
      const std::string subsystem = waitSubsystem(wait);
      dstate.item.signal +=
          " waiting in " + wait + (subsystem.empty() ? "" : " (" + subsystem + ")");
    }
  }
  const Check cpu = compare(
      own_cpu ? "cpu_some (the job's cgroup)" : "cpu_some", base, inc.first, inc.last,
      [&](size_t i) { return at(cpu_series, i); }, false, cfg.pressure_rise, 0, 0);
  add(io);
  add(dstate);
  add(cpu);
  // Memory pressure in the job's cgroup: reclaim evicts the page cache, and reads that hit it
  // go to the disk. Evidence of its own; it decides no class.
  if (known(s.cgroup_memory_some)) {
    add(compare(
        "memory_some (the job's cgroup)", base, inc.first, inc.last,
        [&](size_t i) { return at(s.cgroup_memory_some, i); }, false, cfg.pressure_rise, 0, 0));
  }
  // The limits on the job's cgroup, named where the job ran into them: its reads on the device
  // io.max limits at 80 % of the limit or more, its CPU quota throttling it a larger share of
  // the time than before.
  std::optional<Check> at_io_limit, cpu_quota;
  std::vector<std::string> limits_during;
  for (size_t i = inc.first; i <= inc.last && i < s.cgroup_limits.size(); ++i)
    limits_during.push_back(s.cgroup_limits[i]);
  const std::string limits = mostCommonText(limits_during);  // the text most often in force
  if (known(s.cgroup_read_limit_bytes_per_s)) {
    Check c = compare(
        std::string(kAtIoLimit) + limitText(limits, "io.max"), base, inc.first, inc.last,
        [&](size_t i) { return at(s.cgroup_limited_read_bytes_per_s, i); }, false, 0, 0, 0);
    const auto limit = evidence::medianOver(
        during, [&](size_t i) { return at(s.cgroup_read_limit_bytes_per_s, i); });
    c.item.supports = limit && *limit > 0 && c.item.during >= kAtLimitShare * *limit;
    add(c);
    at_io_limit = c;
  }
  if (known(s.cgroup_cpu_throttled)) {
    Check c = compare(
        "job_cgroup_cpu_throttled_share under " + limitText(limits, "cpu.max"), base, inc.first,
        inc.last, [&](size_t i) { return at(s.cgroup_cpu_throttled, i); }, false, cfg.pressure_rise,
        0, 0);
    add(c);
    cpu_quota = c;
  }

  auto confidence = [](double share) { return std::clamp(0.5 + 0.5 * share, 0.0, 1.0); };
  if (checkpoint) {
    inc.cls = StallClass::kCheckpoint;
    inc.confidence = writes.item.supports ? confidence(writes.share_of_intervals) : 0.75;
    const auto chosen = checkpointTarget(s, around);
    const DeviceSeries* target = chosen.first;
    const DeviceSeries* below = chosen.second;
    if (target) {
      inc.device = target->name;
      if (below) inc.physical_device = below->name;
      Check device_writes = compare(
          "write_bytes_per_s " + target->name, base, inc.first, inc.last,
          [&](size_t i) { return at(target->write_bytes_per_s, i); }, true, cfg.write_ratio,
          cfg.write_floor_bytes_per_s, cfg.write_floor_bytes_per_s);
      // A write limit on the job's cgroup for that device held the checkpoint back: named.
      const std::string io_limits = limitText(limits, "io.max");
      if (io_limits.find("(" + target->name + ")") != std::string::npos &&
          io_limits.find("wbps=") != std::string::npos) {
        device_writes.item.signal += " under " + io_limits;
      }
      add(device_writes);
    }
    return;
  }
  // A limit on the job's own cgroup that it ran into explains a device that looks slow above
  // it (a loop device whose backing reads the limit holds back): the limit is the cause.
  if (at_io_limit && at_io_limit->item.supports) {
    inc.cls = StallClass::kIoThrottled;
    inc.confidence = confidence(1.0);
    // A limit shared with someone else (a parent's cap, a cgroup a sidecar shares): who.
    const std::string io_limits = limitText(limits, "io.max");
    const size_t open = io_limits.find('('), close = io_limits.find(')', open);
    if (open != std::string::npos && close != std::string::npos)
      addNeighbour(s, base, {io_limits.substr(open + 1, close - open - 1)}, inc);
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
    addNeighbour(s, base, {inc.device, inc.physical_device}, inc);
    return;
  }
  if (io.item.supports || dstate.item.supports) {
    inc.cls = StallClass::kIoThrottled;
    inc.confidence = confidence(std::max(io.share_of_intervals, dstate.share_of_intervals));
    return;
  }
  const bool quota = cpu_quota && cpu_quota->item.supports;
  if (cpu.item.supports || quota) {
    inc.cls = StallClass::kInputCpu;
    inc.confidence =
        confidence(std::max(cpu.share_of_intervals, quota ? cpu_quota->share_of_intervals : 0.0));
    return;
  }
  inc.cls = StallClass::kNotStorage;
  addIdleWait(s, base, inc);
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

// The job's last incident, when it is the job winding down (IdleSpan): it runs to the job's
// last sample, the job then exited, and its processes were idle throughout.
void separateIdleAtExit(const JobSeries& s, Analysis& a) {
  if (a.incidents.empty() || !s.ended_ms || s.size() == 0) return;
  const Incident& inc = a.incidents.back();
  const size_t n = s.size();
  if (inc.last + 1 != n) return;
  // The jobs collector notices the exit at its next discovery (every few ticks).
  const double interval_ms = s.interval_s.back() * 1000.0;
  if (static_cast<double>(*s.ended_ms - s.ts_ms.back()) > 10 * interval_ms) return;
  if (!processesIdle(s, inc)) return;
  a.idle_at_exit = IdleSpan{inc.start_ms, inc.end_ms, idleMedian(s.workers_cpu, inc),
                            idleMedian(s.read_bytes_per_s, inc)};
  a.gpu_seconds_lost[static_cast<int>(inc.cls)] -= inc.gpu_seconds_lost;
  a.incidents.pop_back();
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
           return e.supports && e.signal.starts_with(kAtIoLimit);
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
std::optional<std::vector<bool>> earlyStall(const std::vector<std::optional<double>>& progress,
                                            const std::vector<std::optional<double>>& baseline,
                                            double min_drop, const std::vector<double>& interval_s,
                                            const DetectorConfig& cfg) {
  const size_t n = progress.size();
  size_t cold = 0;  // intervals before the forward baseline is warm
  while (cold < n && !baseline[cold]) ++cold;
  if (cold == 0) return std::nullopt;
  std::vector<bool> later_stalled(n, false);
  ProgressBaseline backwards(cfg);
  for (size_t k = n; k-- > 0;) later_stalled[k] = backwards.judge(progress[k], min_drop);
  size_t first = 0;
  while (first < cold && !(progress[first] && *progress[first] > 0)) ++first;
  std::vector<bool> stalled(n, false);
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
                                    double min_drop, const DetectorConfig& cfg) {
  ProgressBaseline backwards(cfg);
  for (size_t k = progress.size(); k-- > i + 1;) backwards.judge(progress[k], min_drop);
  return backwards.current();
}

}  // namespace

bool processesIdle(const JobSeries& s, const Incident& inc) {
  constexpr double kIdleCores = 0.05, kIdleReadBytes = 1e6;
  double d_state = 0;
  for (size_t i = inc.first; i <= inc.last && i < s.size(); ++i)
    d_state = std::max(d_state, at(s.d_state_threads, i).value_or(0.0));
  return idleMedian(s.workers_cpu, inc) <= kIdleCores &&
         idleMedian(s.read_bytes_per_s, inc) <= kIdleReadBytes && d_state == 0;
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
  if (const auto early = earlyStall(progress, a.baseline, min_drop, s.interval_s, cfg)) {
    forward(*early);
    for (size_t i = 0; i < n && !a.baseline[i]; ++i) {
      if ((*early)[i]) a.baseline[i] = earlyBaseline(progress, i, min_drop, cfg);
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
      attributeIncident(s, a.stalled, cfg, inc);
      a.gpu_seconds_lost[static_cast<int>(inc.cls)] += inc.gpu_seconds_lost;
      a.incidents.push_back(std::move(inc));
    }
    i = j;
  }
  separateOutsideTheLoop(s, cfg, a);
  separateIdleAtExit(s, a);
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
