#include "correlator/live_correlator.h"

#include <algorithm>
#include <cmath>

#include "model/io_latency_histogram.h"

namespace stallwatch::correlator {
namespace {

// The newest interval made progress: a stall held as a possible exit was not the exit.
bool progressCameBack(const Analysis& a) {
  return !a.progress.empty() && a.progress.back() && *a.progress.back() > 0 && !a.stalled.back();
}

std::optional<double> toOptional(const std::optional<uint64_t>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

// Interval I of a job's (or a rank's) pace from its sample: the figures JobSample and RankSample
// share, under the same names, and model::PaceSeries that JobSeries and RankSeries share.
template <typename Sample>
void setProcessFigures(model::PaceSeries& s, size_t i, const Sample& x) {
  s.gpu_util_percent[i] = x.gpu_util_percent;
  s.gpu_work_percent[i] = x.gpu_work_percent;
  s.steps[i] = toOptional(x.steps);
  s.data_wait_s[i] = x.data_wait_seconds;
  s.step_s[i] = x.step_seconds;
  s.read_bytes_per_s[i] = x.read_bytes_per_second;
  s.write_bytes_per_s[i] = x.write_bytes_per_second;
  s.workers_cpu[i] = x.workers_cpu_ratio;
  s.d_state_threads[i] = static_cast<double>(x.d_state_threads);
  s.main_thread_cpu[i] = x.main_thread_cpu_ratio;
  s.main_thread_runqueue[i] = x.main_thread_runqueue_ratio;
  s.workers[i] = static_cast<double>(x.workers);
  s.main_cpu[i] = x.main_cpu_ratio;
  s.stopped_processes[i] = static_cast<double>(x.stopped_processes);
  s.cgroup_limited_read_bytes_per_s[i] = x.cgroup_limited_read_bytes_per_second;
  s.cgroup_read_limit_bytes_per_s[i] = x.cgroup_read_limit_bytes_per_second;
  s.cgroup_cpu_throttled[i] = x.cgroup_cpu_throttled_ratio;
  s.cgroup_io_some[i] = x.cgroup_io_some;
  s.main_thread_loader_wait[i] = x.main_thread_loader_wait_ratio;
  s.main_thread_futex_wait[i] = x.main_thread_futex_wait_ratio;
  s.pin_memory[i] = x.pin_memory ? 1.0 : 0.0;
}

// Interval I of device D's per-I/O read latency (where the eBPF collector ran): the job's own
// reads and everyone else's, told apart by the sample's owner.
void setReadTail(DeviceSeries& d, size_t i, const std::string& job_key,
                 const collectors::SampleBatch& b) {
  model::IoLatencySplit split;
  bool any = false;
  for (const auto& row : b.io_latency) {
    if (row.device != d.name || row.op != "read") continue;
    split.add(row.job_key == job_key, row.count, row.slots);
    any = true;
  }
  if (!any) return;
  const double seconds = std::max(b.interval_seconds, 1e-3);
  d.job_read_p99_ms[i] = model::ioLatencyQuantileMs(split.job, 0.99);
  d.others_read_p99_ms[i] = model::ioLatencyQuantileMs(split.others, 0.99);
  d.job_reads_per_s[i] = static_cast<double>(split.job_count) / seconds;
  d.others_reads_per_s[i] = static_cast<double>(split.others_count) / seconds;
}

}  // namespace

LiveCorrelator::LiveCorrelator(const LiveConfig& config) : config_(config) {
  config_.detector.min_duration_s = config_.open_after_s;
}

void LiveCorrelator::setConfig(const LiveConfig& config) {
  config_ = config;
  config_.detector.min_duration_s = config_.open_after_s;
}

void LiveCorrelator::append(JobState& job, const collectors::JobSample& j,
                            const collectors::SampleBatch& b) {
  JobSeries& s = job.series;
  const size_t i = model::appendInterval(s, b.wall_time_ms, b.interval_seconds);
  s.gpu_count = std::max(s.gpu_count, static_cast<uint32_t>(j.gpus.size()));
  setProcessFigures(s, i, j);
  s.d_state_wchan[i] = j.top_wchan;
  s.sleep_wchan[i] = j.sleep_wchan;
  s.cgroup_cpu_some[i] = j.cgroup_cpu_some;
  s.cgroup_memory_some[i] = j.cgroup_memory_some;
  s.cgroup_limits[i] = j.cgroup_limits;
  s.neighbour_io[i] = j.neighbour_io.value_or("");
  s.workers_sleep_wchan[i] = j.workers_sleep_wchan;
  s.cgroup_read_limit[i] = j.cgroup_read_limit;
  s.cpus_allowed[i] = j.cpus_allowed;
  s.rchar_per_s[i] = j.rchar_per_second;
  for (const auto& p : b.pressure) {
    if (p.resource == "io") s.io_some[i] = p.some_ratio;
    if (p.resource == "cpu") s.cpu_some[i] = p.some_ratio;
    if (p.resource == "memory") s.memory_some[i] = p.some_ratio;
  }
  if (b.cpu) {
    s.host_busy_cores[i] = b.cpu->busy_cores;
    s.host_online_cpus[i] = static_cast<double>(b.cpu->online_cpus);
  }
  for (auto& d : s.devices) {
    for (const auto& disk : b.disks) {
      if (disk.device != d.name) continue;
      d.r_await_ms[i] = disk.rates.r_await_ms;
      d.w_await_ms[i] = disk.rates.w_await_ms;
      d.aqu_sz[i] = disk.rates.aqu_sz;
      d.write_bytes_per_s[i] = disk.rates.write_bytes_per_second;
      d.read_bytes_per_s[i] = disk.rates.read_bytes_per_second;
      d.util_percent[i] = disk.rates.util_percent;
      break;
    }
    setReadTail(d, i, j.key, b);
  }
  // Ranks: this tick's sample of each; a rank with no sample this tick (exited, or not seen)
  // keeps an empty interval.
  for (const auto& r : b.ranks) {
    if (r.key != j.key) continue;
    RankSeries& rank = model::addRank(s, r.rank);
    if (auto d = job.rank_facts.find(r.rank); d != job.rank_facts.end()) {
      rank.pid = d->second.pid;
      rank.gpu = d->second.gpu;
    }
    setProcessFigures(rank, i, r);
  }
  trim(s);
}

void LiveCorrelator::trim(JobSeries& s) const {
  // In steps of an eighth of the window: dropping one interval from the front of every
  // series each tick would move the whole window each time.
  if (s.size() <= config_.window_intervals + config_.window_intervals / 8) return;
  model::dropFront(s, s.size() - config_.window_intervals);
}

size_t LiveCorrelator::tailMargin() const {
  return 2 * config_.detector.baseline_intervals + config_.detector.warmup_intervals +
         static_cast<size_t>(config_.open_after_s + config_.close_after_s) + 2;
}

void LiveCorrelator::recordHostDisks(const collectors::SampleBatch& b) {
  for (const auto& disk : b.disks) {
    host_disks_[disk.device].push_back({b.wall_time_ms, disk.rates.r_await_ms,
                                        disk.rates.w_await_ms, disk.rates.aqu_sz,
                                        disk.rates.write_bytes_per_second});
  }
  // Kept only as far back as an analysis can look: the tail margin before now, or before the
  // start of the oldest open incident. (~30 disks x 265 intervals: 0.4 MB while all is well.)
  const double interval_ms = std::max(b.interval_seconds, 0.001) * 1000;
  int64_t keep_from = b.wall_time_ms;
  for (const auto& [key, job] : jobs_) {
    if (job.open) keep_from = std::min(keep_from, job.open->incident.start_ms);
  }
  keep_from -= static_cast<int64_t>(static_cast<double>(tailMargin() + 1) * interval_ms);
  for (auto it = host_disks_.begin(); it != host_disks_.end();) {
    auto& points = it->second;
    while (!points.empty() && points.front().ts_ms < keep_from) points.pop_front();
    it = points.empty() ? host_disks_.erase(it)
                        : std::next(it);  // a device gone that long is forgotten
  }
}

bool LiveCorrelator::fillFromHost(const JobSeries& s, DeviceSeries& d, size_t from,
                                  size_t to) const {
  auto host = host_disks_.find(d.name);
  if (host == host_disks_.end()) return false;
  const auto& points = host->second;
  bool any = false;
  for (size_t i = from; i < to; ++i) {
    auto at = std::lower_bound(points.begin(), points.end(), s.ts_ms[i],
                               [](const DiskPoint& p, int64_t ts) { return p.ts_ms < ts; });
    if (at == points.end() || at->ts_ms != s.ts_ms[i]) continue;
    d.r_await_ms[i] = at->r_await_ms;
    d.w_await_ms[i] = at->w_await_ms;
    d.aqu_sz[i] = at->aqu_sz;
    d.write_bytes_per_s[i] = at->write_bytes_per_s;
    any = true;
  }
  return any;
}

void LiveCorrelator::addOtherDevices(JobSeries& s,
                                     const std::vector<std::pair<size_t, size_t>>& windows) const {
  for (const auto& host : host_disks_) {
    const std::string& name = host.first;
    if (std::any_of(s.devices.begin(), s.devices.end(),
                    [&](const DeviceSeries& d) { return d.name == name; })) {
      continue;
    }
    DeviceSeries& d = model::addDevice(s, name, "", false);
    bool any = false;
    for (const auto& [first, last] : windows)
      any = fillFromHost(s, d, first, std::min(last + 1, s.size())) || any;
    if (!any) {
      s.devices.erase(std::find_if(s.devices.begin(), s.devices.end(),
                                   [&](const DeviceSeries& x) { return x.name == name; }));
    }
  }
}

// An event about JOB's open incident as it stands.
IncidentEvent LiveCorrelator::eventOf(IncidentEventKind kind, const std::string& key,
                                      const JobState& job, int64_t ts_ms) {
  IncidentEvent e;
  e.kind = kind;
  e.live_id = job.open->live_id;
  e.ts_ms = ts_ms;
  e.job_key = key;
  e.job_label = job.label;
  e.incident = job.open->incident;
  return e;
}

std::optional<IncidentEvent> LiveCorrelator::closeOf(const std::string& key, JobState& job,
                                                     int64_t ts_ms, int64_t end_ms) {
  if (!job.open) return std::nullopt;
  IncidentEvent e = eventOf(IncidentEventKind::kClose, key, job, ts_ms);
  e.incident.end_ms = end_ms;
  job.open.reset();
  return e;
}

std::vector<IncidentEvent> LiveCorrelator::onBatch(const collectors::SampleBatch& batch) {
  std::vector<IncidentEvent> events;
  recordHostDisks(batch);
  // A job that ended in this batch is forgotten after its last samples below: forgotten here,
  // those samples made it again, kept for good (issue 46: a flood of short jobs grew the agent
  // and /metrics without end).
  std::vector<const collectors::JobDescription*> ended;
  for (const auto& u : batch.job_updates) {
    auto& job = this->job(u.key);
    job.label = u.label;
    if (u.ended_ms) ended.push_back(&u);
  }
  for (const auto& r : batch.rank_updates) {
    if (auto it = jobs_.find(r.key); it != jobs_.end()) it->second.rank_facts[r.rank] = r;
  }
  for (const auto& f : batch.job_devices) {
    auto it = jobs_.find(f.key);
    if (it == jobs_.end() || !it->second.devices.insert({f.device, f.via}).second) continue;
    JobSeries& s = it->second.series;
    const bool fresh = std::none_of(s.devices.begin(), s.devices.end(),
                                    [&](const DeviceSeries& d) { return d.name == f.device; });
    DeviceSeries& d = model::addDevice(s, f.device, f.via, true);
    // Found now (open files are scanned every few ticks), sampled all along: its history
    // comes from the host's recent disk samples, as a post-mortem reads it from the DB.
    if (fresh) fillFromHost(s, d, 0, s.size());
  }

  for (const auto& sample : batch.jobs) {
    JobState& job = this->job(sample.key);
    append(job, sample, batch);
    judgeNewest(job);
    judgeLimiter(job);
    // Healthy and nothing open: no analysis needed (the common case, ~1 us).
    if (!job.open && !job.held && job.since_stalled > 1) continue;
    // Only the tail decides what is going on now: the open stall (if any) and, before it,
    // twice the baseline window, so that the baseline and the attribution see the same
    // healthy intervals a whole-window analysis would. ~10x cheaper than the whole hour.
    const JobSeries& whole = job.series;
    size_t stall_start = whole.size();
    if (const Incident* since = job.open ? &job.open->incident : job.held ? &*job.held : nullptr) {
      stall_start = static_cast<size_t>(
          std::lower_bound(whole.ts_ms.begin(), whole.ts_ms.end(), since->start_ms) -
          whole.ts_ms.begin());
    }
    const size_t margin = tailMargin();
    JobSeries s = model::tailOf(whole, stall_start > margin ? stall_start - margin : 0);
    // The tail is already cut to what the stall's attribution looks at (the post-mortem's
    // windows around an incident): the host's other devices over all of it, and one analysis,
    // instead of analyzeJobOnHost's detection pass to find those windows first.
    addOtherDevices(s, {{0, s.size() - 1}});
    const Analysis a = analyzeJob(s, config_.detector);
    // The incident still going on: its last stalled interval is this one or the one before
    // (the detector bridges a single healthy interval).
    const Incident* ongoing = nullptr;
    const Analysis* found_by = &a;
    if (!a.incidents.empty() && a.incidents.back().last + 2 >= s.size())
      ongoing = &a.incidents.back();
    // Not open yet and too short for open_after_s: reported sooner only on strong storage
    // evidence, judged on the same tail with the shorter minimum (the analysis above, which
    // the post-mortem repeats, is left as it was).
    Analysis fast;
    if (!job.open && !ongoing && job.since_stalled == 0 && config_.strong_open_after_s > 0 &&
        config_.strong_open_after_s < config_.open_after_s) {
      DetectorConfig shorter = config_.detector;
      shorter.min_duration_s = config_.strong_open_after_s;
      fast = analyzeJob(s, shorter);
      if (!fast.incidents.empty() && fast.incidents.back().last + 1 >= s.size() &&
          strongStorageEvidence(fast.incidents.back())) {
        ongoing = &fast.incidents.back();
        found_by = &fast;
      }
    }

    if (job.open && ongoing) {
      Open& open = *job.open;
      const std::string was_class = toString(open.incident.cls);
      const std::string was_device = open.incident.device;
      const std::string was_rank = stallRankLabel(open.incident);
      const int64_t start = std::min(open.incident.start_ms, ongoing->start_ms);
      open.incident = *ongoing;
      open.incident.start_ms = start;
      open.last_stalled_ms = ongoing->end_ms;
      if (was_class != toString(ongoing->cls) || was_device != ongoing->device ||
          was_rank != stallRankLabel(*ongoing)) {
        IncidentEvent e = eventOf(IncidentEventKind::kChange, sample.key, job, batch.wall_time_ms);
        e.previous_class = was_class;
        e.previous_device = was_device;
        e.previous_rank = was_rank;
        events.push_back(std::move(e));
      }
    } else if (job.open) {
      const double quiet_s =
          static_cast<double>(batch.wall_time_ms - job.open->last_stalled_ms) / 1000.0;
      if (quiet_s >= config_.close_after_s) {
        if (auto e = closeOf(sample.key, job, batch.wall_time_ms, job.open->last_stalled_ms)) {
          events.push_back(std::move(*e));
        }
      }
    } else if (ongoing && mayBeExit(s, *found_by, *ongoing, config_.detector,
                                    config_.idle_open_after_s, config_.exit_settle_s)) {
      job.held = *ongoing;  // the job may be winding down (its exit ends it unreported)
      continue;
    } else if (ongoing || (job.held && progressCameBack(a) &&
                           std::none_of(ended.begin(), ended.end(),
                                        [&](const auto* u) { return u->key == sample.key; }))) {
      // A stall, or one held as a possible exit whose progress came back before the job ended:
      // a hang after all, paged now (late), as the post-mortem records it (issue 42: a 41 s
      // mid-run hang was never paged).
      const Incident* found = ongoing;
      if (!found) {
        found = &*job.held;
        for (const Incident& inc : a.incidents) {
          if (inc.start_ms <= job.held->end_ms && inc.end_ms >= job.held->start_ms) found = &inc;
        }
      }
      Open open;
      open.live_id = next_id_++;
      open.incident = *found;
      open.last_stalled_ms = found->end_ms;
      job.open = std::move(open);
      job.held.reset();
      events.push_back(eventOf(IncidentEventKind::kOpen, sample.key, job, batch.wall_time_ms));
    }
  }
  for (const collectors::JobDescription* u : ended) {
    auto it = jobs_.find(u->key);
    if (it == jobs_.end()) continue;
    JobState& job = it->second;
    if (auto e = closeOf(u->key, job, batch.wall_time_ms,
                         job.open ? job.open->last_stalled_ms : batch.wall_time_ms)) {
      events.push_back(std::move(*e));
    }
    jobs_.erase(it);
  }
  return events;
}

LiveCorrelator::JobState& LiveCorrelator::job(const std::string& key) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) it = jobs_.emplace(key, JobState(config_.detector)).first;
  return it->second;
}

// The same progress signal analyzeJob chooses, from what the job has shown so far; when a
// better one appears (the first step report, the first GPM reading) the baseline starts over.
void LiveCorrelator::judgeNewest(JobState& job) {
  const JobSeries& s = job.series;
  const size_t i = s.size() - 1;
  job.steps_seen = job.steps_seen || s.steps[i].has_value();
  job.work_seen = job.work_seen || (s.gpu_count > 0 && s.gpu_work_percent[i].has_value());
  job.gpu_seen = job.gpu_seen || (s.gpu_count > 0 && s.gpu_util_percent[i].has_value());
  if (s.gpu_count > 0) {
    for (const RankSeries& r : s.ranks) {
      if (r.gpu_util_percent[i]) job.ranks_with_gpu.insert(r.rank);
    }
  }
  const ProgressSignal signal =
      progressSignalFrom(job.steps_seen, job.work_seen, job.ranks_with_gpu.size(), job.gpu_seen);
  if (signal != job.signal) {
    job.signal = signal;
    job.baseline = ProgressBaseline(config_.detector);
  }
  const bool stalled = job.baseline.judge(progressAt(s, i, signal, job.steps_seen),
                                          minDrop(signal, config_.detector));
  job.since_stalled =
      stalled ? 0 : (job.since_stalled == SIZE_MAX ? SIZE_MAX : job.since_stalled + 1);
}

void LiveCorrelator::judgeLimiter(JobState& job) {
  if (job.open || job.since_stalled < 2) return;  // a stall is the incident's account
  if (job.since_limiter != SIZE_MAX && ++job.since_limiter < config_.limiter_every) return;
  job.since_limiter = 0;
  const JobSeries& s = job.series;
  const size_t n = s.size();
  const size_t first = n > config_.limiter_intervals ? n - config_.limiter_intervals : 0;
  // From the job's first progress on: its start-up is no measure of its pace.
  size_t from = first;
  while (from < n && !(progressAt(s, from, job.signal, job.steps_seen).value_or(0) > 0)) ++from;
  if (from >= n) return;
  job.limiter = correlator::judgeSpan(s, from, n - 1, nullptr, config_.limiter);
}

std::vector<LiveLimiter> LiveCorrelator::limiters() const {
  std::vector<LiveLimiter> out;
  for (const auto& [key, job] : jobs_) {
    if (job.limiter) out.push_back({key, job.label, *job.limiter});
  }
  return out;
}

std::vector<ActiveStall> LiveCorrelator::active() const {
  std::vector<ActiveStall> out;
  for (const auto& [key, job] : jobs_) {
    if (!job.open) continue;
    const Incident& i = job.open->incident;
    out.push_back({job.open->live_id, key, job.label, i.cls, i.device, i.physical_device,
                   i.start_ms, stallRankLabel(i)});
  }
  return out;
}

}  // namespace stallwatch::correlator
