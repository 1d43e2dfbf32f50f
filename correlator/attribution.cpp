// Attribution: what caused an incident the detector found, from each candidate signal against
// its own baseline (correlator/stall_detector.h lists the classes and their order).
#include "correlator/attribution.h"

#include <algorithm>
#include <map>

#include "collectors/jobs/job_cgroup.h"
#include "correlator/checkpoint.h"
#include "correlator/evidence.h"
#include "correlator/read_tail.h"
#include "correlator/straggler.h"
#include "correlator/wait_channel.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;
using evidence::Check;
using evidence::compare;
using evidence::latencyAt;
using Metric = model::EvidenceMetric;
using Scope = model::EvidenceScope;

constexpr double kQueueFloor = 0.1;
// An io-throttled stall without a limit seen names the job's device whose latency or queue rose
// the most, if it rose by this much: less is a device answering as before (noise).
constexpr double kRoseEnoughToName = 1.5;

// A device of the job's that slowed: how far past its baseline, over which share of intervals.
struct SlowDevice {
  const DeviceSeries* device;
  double strength;
  double share;
};

// The job's devices against their own baselines, their latency and queue (and per-I/O tail)
// added to INC's evidence.
struct DeviceChecks {
  std::vector<SlowDevice> slow;  // those the job reads, past their thresholds
  // Of the devices the job reads, the one whose latency or queue rose the most, whether or not
  // past its threshold: where an io-throttled stall waits (its device, for alerts to route by).
  const DeviceSeries* most_risen = nullptr;
  double most_risen_ratio = 0;
  std::optional<Check> target_latency;  // the checkpoint's device: slowed or not
};

DeviceChecks judgeDevices(const JobSeries& s, const DetectorConfig& cfg,
                          const std::vector<size_t>& base,
                          std::pair<const DeviceSeries*, const DeviceSeries*> written_to,
                          Incident& inc) {
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };
  auto writtenByJob = [&](const DeviceSeries& d) {
    return &d == written_to.first || &d == written_to.second;
  };
  DeviceChecks out;
  for (const DeviceSeries& d : s.devices) {
    const Check latency = compare(
        {Metric::kAwaitMs, Scope::kDevice, d.name, ""}, base, inc.first, inc.last,
        [&](size_t i) { return latencyAt(d, i); }, true, cfg.latency_ratio, cfg.latency_floor_ms,
        cfg.latency_floor_ms);
    const Check queue = compare(
        {Metric::kAquSz, Scope::kDevice, d.name, ""}, base, inc.first, inc.last,
        [&](size_t i) { return at(d.aqu_sz, i); }, true, cfg.queue_ratio, kQueueFloor, 1.0);
    Check l = latency, q = queue;
    if (writtenByJob(d)) {
      if (&d == written_to.first) out.target_latency = latency;
      if (!d.job_reads) {  // written, not read: shown with its latency, not blamed as disk-slow
        model::addNote(l.item, "(the job writes it)");
        model::addNote(q.item, "(the job writes it)");
      }
    } else if (!d.job_reads) {  // shown, never blamed
      model::addNote(l.item, "(the job does not read it)");
      model::addNote(q.item, "(the job does not read it)");
      l.item.supports = q.item.supports = false;
    }
    add(l);
    add(q);
    // Per I/O, where it was measured: a tail of the job's own reads that rose is a slow device
    // of its own, even while the interval average (await) and the queue held.
    const ReadTail tail = d.job_reads ? readTail(d, cfg, base, inc.first, inc.last) : ReadTail{};
    for (const EvidenceItem& e : tail.items) inc.evidence.push_back(e);
    const bool slow_tail = tail.job && tail.job->item.supports;
    if (d.job_reads && (latency.item.supports || queue.item.supports || slow_tail)) {
      out.slow.push_back({&d,
                          std::max({latency.ratio, queue.ratio, slow_tail ? tail.job->ratio : 0}),
                          std::max({latency.share_of_intervals, queue.share_of_intervals,
                                    slow_tail ? tail.job->share_of_intervals : 0})});
    }
    if (d.job_reads && std::max(latency.ratio, queue.ratio) > out.most_risen_ratio) {
      out.most_risen_ratio = std::max(latency.ratio, queue.ratio);
      out.most_risen = &d;
    }
  }
  return out;
}

void attributeCause(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    Incident& inc);

}  // namespace

std::vector<size_t> baselineBefore(size_t first, const std::vector<bool>& stalled,
                                   const DetectorConfig& cfg) {
  std::vector<size_t> base;
  const size_t from = first > cfg.baseline_intervals ? first - cfg.baseline_intervals : 0;
  for (size_t i = from; i < first; ++i) {
    if (!stalled[i]) base.push_back(i);
  }
  return base;
}

void attributeIncident(const JobSeries& s, const std::vector<bool>& stalled,
                       const DetectorConfig& cfg, Incident& inc) {
  const std::vector<size_t> base = baselineBefore(inc.first, stalled, cfg);
  if (base.size() < kMinBaselineForAttribution) {
    inc.evidence.push_back(model::evidenceItem({Metric::kBaselineIntervals, Scope::kJob, "", ""}, 0,
                                               static_cast<double>(base.size()), false));
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
  // Who read (a cgroup or a process) from which device: the device the subject, the reader said.
  inc.evidence.push_back(model::evidenceItem(
      {Metric::kNeighbourBytesPerS, Scope::kDevice, heaviest->first.first, heaviest->first.second},
      baseline, now, now >= kNeighbourFloor && now >= 2 * baseline));
}

// Names DEVICE (the limited or the slowest) in INC as the disk-slow verdict names one: where the
// job's files are on a device stacked over it, that device, DEVICE as physical; where DEVICE
// holds files itself, it, with the device under it as physical.
void nameDevice(const JobSeries& s, const std::string& device, Incident& inc) {
  inc.device = device;
  inc.physical_device.clear();
  // Under a device the job's files are on (vda under loop0): that one, with DEVICE as physical,
  // even where the job also reads DEVICE directly (its scripts and libraries on the root disk).
  for (const DeviceSeries& d : s.devices) {
    if (d.name == device && !d.via.empty()) {
      inc.device = d.via;
      inc.physical_device = device;
      return;
    }
  }
  for (const DeviceSeries& d : s.devices) {
    if (d.via == device) {
      inc.physical_device = d.name;
      return;
    }
  }
}

// What a stalled job's processes were doing, where not storage: stopped (T) ones, and where its
// workers slept. A hang says who was stopped and who waited on what.
void addHangEvidence(const JobSeries& s, const std::vector<size_t>& base, Incident& inc) {
  const Check stopped = compare(
      {Metric::kJobProcessesStopped, Scope::kJob, "", ""}, base, inc.first, inc.last,
      [&](size_t i) { return at(s.stopped_processes, i); }, false, 1.0, 0, 1.0);
  if (stopped.item.during >= 1 || stopped.item.baseline >= 1) inc.evidence.push_back(stopped.item);
  // Who waited on the stopped ones: where the main process slept meanwhile.
  if (stopped.item.supports) {
    std::vector<std::string> main_waits;
    for (size_t i = inc.first; i <= inc.last && i < s.sleep_wchan.size(); ++i)
      main_waits.push_back(s.sleep_wchan[i]);
    if (const std::string wait = mostCommonText(main_waits); !wait.empty()) {
      size_t asleep = 0;
      for (const auto& w : main_waits) asleep += w == wait ? 1 : 0;
      const std::string subsystem = waitSubsystem(wait);
      inc.evidence.push_back(model::evidenceItem(
          {Metric::kMainProcessAsleep, Scope::kProcess, "",
           "in " + wait + (subsystem.empty() ? "" : " (" + subsystem + ")")},
          0, static_cast<double>(asleep) / static_cast<double>(main_waits.size()), true));
    }
  }
  std::vector<std::string> waits;
  for (size_t i = inc.first; i <= inc.last && i < s.workers_sleep_wchan.size(); ++i)
    waits.push_back(s.workers_sleep_wchan[i]);
  if (const std::string wait = mostCommonText(waits); !wait.empty()) {
    size_t asleep = 0;
    for (const auto& w : waits) asleep += w == wait ? 1 : 0;
    const std::string subsystem = waitSubsystem(wait);
    inc.evidence.push_back(model::evidenceItem(
        {Metric::kWorkersAsleep, Scope::kJob, "",
         "in " + wait + (subsystem.empty() ? "" : " (" + subsystem + ")")},
        0, static_cast<double>(asleep) / static_cast<double>(waits.size()), false));
  }
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
  std::string where;
  if (!wait.empty()) {
    const std::string subsystem = waitSubsystem(wait);
    where = "asleep in " + wait + (subsystem.empty() ? "" : " (" + subsystem + ")");
  }
  inc.evidence.push_back(model::evidenceItem({Metric::kJobProcessesIdle, Scope::kJob, "", where},
                                             shareAsleep(base), shareAsleep(during), true));
}

// Where the job's threads waited in D during INC says which layer held them: named in DSTATE
// (FUSE, NFS/RPC, writeback, block I/O...).
void nameDStateWait(const JobSeries& s, const Incident& inc, EvidenceItem& dstate) {
  if (dstate.during < 1) return;
  std::vector<std::string> waits;
  for (size_t i = inc.first; i <= inc.last && i < s.d_state_wchan.size(); ++i) {
    if (at(s.d_state_threads, i).value_or(0) >= 1) waits.push_back(s.d_state_wchan[i]);
  }
  if (const std::string wait = mostCommonText(waits); !wait.empty()) {
    const std::string subsystem = waitSubsystem(wait);
    model::addNote(dstate,
                   "waiting in " + wait + (subsystem.empty() ? "" : " (" + subsystem + ")"));
  }
}

// The limits on the job's cgroup, named where the job ran into them: its reads at its io.max
// limit (80 % of it or more), its CPU quota throttling it a larger share of the time than before.
struct LimitEvidence {
  std::optional<Check> at_io_limit, cpu_quota;
  std::string limits;   // the limits' text most often in force over the incident
  std::string binding;  // the limit that bound the reads (the collector's, else the first io.max)
};

LimitEvidence judgeLimits(const JobSeries& s, const DetectorConfig& cfg,
                          const std::vector<size_t>& base, const std::vector<size_t>& during,
                          Incident& inc) {
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };
  LimitEvidence out;
  auto known = [&](const Series& x) {  // read over the baseline or the incident (as attributeCause)
    for (size_t i = base.empty() ? inc.first : base.front(); i <= inc.last && i < x.size(); ++i) {
      if (x[i]) return true;
    }
    return false;
  };
  std::vector<std::string> limits_during;
  for (size_t i = inc.first; i <= inc.last && i < s.cgroup_limits.size(); ++i)
    limits_during.push_back(s.cgroup_limits[i]);
  out.limits = mostCommonText(limits_during);
  const std::string& limits = out.limits;
  // The limit that bound the reads, as the collector found it (the job's cgroup or one above
  // it, named with its level); recordings before it: the first io.max in force.
  std::vector<std::string> binding_during;
  for (size_t i = inc.first; i <= inc.last && i < s.cgroup_read_limit.size(); ++i)
    binding_during.push_back(s.cgroup_read_limit[i]);
  out.binding = mostCommonText(binding_during);
  if (out.binding.empty()) out.binding = limitText(limits, "io.max");
  const std::string& binding = out.binding;
  if (known(s.cgroup_read_limit_bytes_per_s)) {
    Check c = compare(
        {kAtIoLimitMetric, Scope::kCgroup, "", "at " + binding}, base, inc.first, inc.last,
        [&](size_t i) { return at(s.cgroup_limited_read_bytes_per_s, i); }, false, 0, 0, 0);
    const auto limit = evidence::medianOver(
        during, [&](size_t i) { return at(s.cgroup_read_limit_bytes_per_s, i); });
    c.item.supports = limit && *limit > 0 && c.item.during >= kAtLimitShare * *limit;
    add(c);
    out.at_io_limit = c;
  }
  if (known(s.cgroup_cpu_throttled)) {
    Check c = compare(
        {Metric::kJobCgroupCpuThrottledShare, Scope::kCgroup, "",
         "under " + limitText(limits, "cpu.max")},
        base, inc.first, inc.last, [&](size_t i) { return at(s.cgroup_cpu_throttled, i); }, false,
        cfg.pressure_rise, 0, 0);
    add(c);
    out.cpu_quota = c;
  }
  return out;
}

void attributeCause(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    Incident& inc) {
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };

  // 1. The job's own write burst (a checkpoint: correlator/checkpoint.h).
  const WriteBurst written = judgeWrites(s, cfg, base, inc);
  const Check& writes = written.writes;
  const bool checkpoint = written.checkpoint;
  const std::vector<size_t>& around = written.around;

  // Where a checkpoint went: a device the job writes, which it may never read (a second disk).
  const auto written_to = checkpoint ? checkpointTarget(s, around)
                                     : std::pair<const DeviceSeries*, const DeviceSeries*>{};
  // 2. The job's devices: latency and queue against their own baselines.
  const DeviceChecks devices = judgeDevices(s, cfg, base, written_to, inc);
  const std::vector<SlowDevice>& slow = devices.slow;

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
      own_io ? model::EvidenceName{Metric::kIoSome, Scope::kCgroup, "", "(the job's cgroup)"}
             : model::EvidenceName{Metric::kIoSome, Scope::kHost, "", ""},
      base, inc.first, inc.last, [&](size_t i) { return at(io_series, i); }, false,
      cfg.pressure_rise, 0, 0);
  Check dstate = compare(
      {Metric::kJobDStateThreads, Scope::kJob, "", ""}, base, inc.first, inc.last,
      [&](size_t i) { return at(s.d_state_threads, i); }, false, 1.0, 0, 1.0);
  nameDStateWait(s, inc, dstate.item);
  const Check cpu = compare(
      own_cpu ? model::EvidenceName{Metric::kCpuSome, Scope::kCgroup, "", "(the job's cgroup)"}
              : model::EvidenceName{Metric::kCpuSome, Scope::kHost, "", ""},
      base, inc.first, inc.last, [&](size_t i) { return at(cpu_series, i); }, false,
      cfg.pressure_rise, 0, 0);
  add(io);
  add(dstate);
  add(cpu);
  // Memory pressure in the job's cgroup: reclaim evicts the page cache, and reads that hit it
  // go to the disk. Evidence of its own; it decides no class.
  if (known(s.cgroup_memory_some)) {
    add(compare(
        {Metric::kMemorySome, Scope::kCgroup, "", "(the job's cgroup)"}, base, inc.first, inc.last,
        [&](size_t i) { return at(s.cgroup_memory_some, i); }, false, cfg.pressure_rise, 0, 0));
  }
  const LimitEvidence held = judgeLimits(s, cfg, base, written.during, inc);
  const std::optional<Check>& at_io_limit = held.at_io_limit;
  const std::optional<Check>& cpu_quota = held.cpu_quota;
  const std::string& limits = held.limits;
  const std::string& binding = held.binding;

  auto confidence = [](double share) { return std::clamp(0.5 + 0.5 * share, 0.0, 1.0); };
  if (checkpoint) {
    inc.cls = StallClass::kCheckpoint;
    inc.confidence = writes.item.supports ? confidence(writes.share_of_intervals) : 0.75;
    nameCheckpoint(s, cfg, base, around, limitText(limits, "io.max"), devices.target_latency, inc);
    return;
  }
  // A limit on the job's own cgroup that it ran into explains a device that looks slow above
  // it (a loop device whose backing reads the limit holds back): the limit is the cause.
  if (at_io_limit && at_io_limit->item.supports) {
    inc.cls = StallClass::kIoThrottled;
    inc.confidence = confidence(1.0);
    // The limited device, named as disk-slow names one: the device the job's files are on,
    // with the limited disk under it as physical.
    const size_t open = binding.find('('), close = binding.find(')', open);
    if (open != std::string::npos && close != std::string::npos) {
      const std::string limited = binding.substr(open + 1, close - open - 1);
      nameDevice(s, limited, inc);
      // A limit shared with someone else (a parent's cap, a cgroup a sidecar shares): who.
      addNeighbour(s, base, {limited}, inc);
    }
    return;
  }
  if (!slow.empty()) {
    // Prefer the device the job's files are on; the disk under it is named as physical.
    auto best = std::max_element(slow.begin(), slow.end(), [](const auto& a, const auto& b) {
      const bool a_direct = a.device->direct(), b_direct = b.device->direct();
      if (a_direct != b_direct) return !a_direct;
      return a.strength < b.strength;
    });
    const DeviceSeries* chosen = best->device;
    inc.cls = StallClass::kDiskSlow;
    inc.device = chosen->direct() ? chosen->name : chosen->via;
    if (!chosen->direct()) inc.physical_device = chosen->name;
    for (const SlowDevice& sl : slow) {
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
    // No device past its threshold: the one whose latency or queue rose the most is where the
    // job's reads waited (a limit not read, a throttle below the device's own figures).
    if (devices.most_risen && devices.most_risen_ratio >= kRoseEnoughToName)
      nameDevice(s, devices.most_risen->name, inc);
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
  addHangEvidence(s, base, inc);
  addIdleWait(s, base, inc);
  // As sure as the storage signals were there to look at.
  const bool looked = !s.devices.empty() && !s.io_some.empty();
  inc.confidence = looked ? 0.7 : 0.4;
}

}  // namespace

bool strongStorageEvidence(const Incident& inc) {
  auto supported = [&](Metric metric, double min_during = 0) {
    return std::any_of(inc.evidence.begin(), inc.evidence.end(), [&](const EvidenceItem& e) {
      return e.supports && e.name.metric == metric && e.during >= min_during;
    });
  };
  switch (inc.cls) {
    case StallClass::kIoThrottled:
      // Without the limit read, only where the device the reads wait on is named: a page that
      // names none is corrected a second later, two alerts for one stall (issue 42).
      return supported(kAtIoLimitMetric) || (supported(Metric::kJobDStateThreads, 2) &&
                                             supported(Metric::kIoSome) && !inc.device.empty());
    case StallClass::kDiskSlow:
      return supported(Metric::kJobDStateThreads);
    default:
      return false;
  }
}

}  // namespace stallwatch::correlator
