#include "correlator/live_correlator.h"

#include <algorithm>

namespace stallwatch::correlator {
namespace {

std::optional<double> toOptional(const std::optional<uint64_t>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

template <typename T>
void dropFront(std::vector<T>& v, size_t n) {
  v.erase(v.begin(), v.begin() + static_cast<long>(std::min(n, v.size())));
}

template <typename T>
std::vector<T> from(const std::vector<T>& v, size_t first) {
  return first < v.size() ? std::vector<T>(v.begin() + static_cast<long>(first), v.end()) : std::vector<T>{};
}

// The series from interval FIRST on.
JobSeries tailOf(const JobSeries& s, size_t first) {
  JobSeries t = s;
  t.ts_ms = from(s.ts_ms, first);
  t.interval_s = from(s.interval_s, first);
  t.forEachSeries([&](Series& x) { x = from(x, first); });
  return t;
}

}  // namespace

LiveCorrelator::LiveCorrelator(LiveConfig config) : config_(std::move(config)) {
  config_.detector.min_duration_s = config_.open_after_s;
}

void LiveCorrelator::append(JobState& job, const collectors::JobSample& j, const collectors::SampleBatch& b) {
  JobSeries& s = job.series;
  s.ts_ms.push_back(b.wall_time_ms);
  s.interval_s.push_back(b.interval_seconds);
  s.gpu_count = std::max(s.gpu_count, static_cast<uint32_t>(j.gpus.size()));
  s.gpu_util_percent.push_back(j.gpu_util_percent);
  s.gpu_work_percent.push_back(j.gpu_work_percent);
  s.steps.push_back(toOptional(j.steps));
  s.data_wait_s.push_back(j.data_wait_seconds);
  s.step_s.push_back(j.step_seconds);
  s.read_bytes_per_s.push_back(j.read_bytes_per_second);
  s.write_bytes_per_s.push_back(j.write_bytes_per_second);
  s.workers_cpu.push_back(j.workers_cpu_ratio);
  s.d_state_threads.push_back(static_cast<double>(j.d_state_threads));
  std::optional<double> io, cpu;
  for (const auto& p : b.pressure) {
    if (p.resource == "io") io = p.some_ratio;
    if (p.resource == "cpu") cpu = p.some_ratio;
  }
  s.io_some.push_back(io);
  s.cpu_some.push_back(cpu);
  for (auto& d : s.devices) {
    std::optional<double> r, w, q;
    for (const auto& disk : b.disks) {
      if (disk.device == d.name) {
        r = disk.rates.r_await_ms;
        w = disk.rates.w_await_ms;
        q = disk.rates.aqu_sz;
        break;
      }
    }
    d.r_await_ms.push_back(r);
    d.w_await_ms.push_back(w);
    d.aqu_sz.push_back(q);
  }
  // Ranks: this tick's sample of each, a new rank's series starting empty up to now.
  for (const auto& r : b.ranks) {
    if (r.key != j.key) continue;
    auto rank = std::find_if(s.ranks.begin(), s.ranks.end(), [&](const RankSeries& x) { return x.rank == r.rank; });
    if (rank == s.ranks.end()) {
      RankSeries fresh;
      fresh.rank = r.rank;
      const size_t before = s.size() - 1;
      fresh.forEachSeries([&](Series& x) { x.assign(before, std::nullopt); });
      s.ranks.push_back(std::move(fresh));
      std::sort(s.ranks.begin(), s.ranks.end(), [](const RankSeries& x, const RankSeries& y) { return x.rank < y.rank; });
      rank = std::find_if(s.ranks.begin(), s.ranks.end(), [&](const RankSeries& x) { return x.rank == r.rank; });
    }
    if (auto d = job.rank_facts.find(r.rank); d != job.rank_facts.end()) {
      rank->pid = d->second.pid;
      rank->gpu = d->second.gpu;
    }
    rank->gpu_util_percent.push_back(r.gpu_util_percent);
    rank->gpu_work_percent.push_back(r.gpu_work_percent);
    rank->steps.push_back(toOptional(r.steps));
    rank->data_wait_s.push_back(r.data_wait_seconds);
    rank->read_bytes_per_s.push_back(r.read_bytes_per_second);
    rank->write_bytes_per_s.push_back(r.write_bytes_per_second);
    rank->workers_cpu.push_back(r.workers_cpu_ratio);
    rank->d_state_threads.push_back(static_cast<double>(r.d_state_threads));
  }
  // A rank with no sample this tick (exited, or not seen) gets an empty interval.
  for (auto& rank : s.ranks) {
    if (rank.gpu_util_percent.size() == s.size()) continue;
    rank.forEachSeries([&](Series& x) { x.resize(s.size()); });
  }
  trim(s);
}

void LiveCorrelator::trim(JobSeries& s) const {
  // In steps of an eighth of the window: dropping one interval from the front of every
  // series each tick would move the whole window each time.
  if (s.size() <= config_.window_intervals + config_.window_intervals / 8) return;
  const size_t n = s.size() - config_.window_intervals;
  dropFront(s.ts_ms, n);
  dropFront(s.interval_s, n);
  s.forEachSeries([&](Series& x) { dropFront(x, n); });
}

// An event about JOB's open incident as it stands.
IncidentEvent LiveCorrelator::eventOf(IncidentEventKind kind, const std::string& key, const JobState& job,
                                      int64_t ts_ms) {
  IncidentEvent e;
  e.kind = kind;
  e.live_id = job.open->live_id;
  e.ts_ms = ts_ms;
  e.job_key = key;
  e.job_label = job.label;
  e.incident = job.open->incident;
  return e;
}

std::optional<IncidentEvent> LiveCorrelator::closeOf(const std::string& key, JobState& job, int64_t ts_ms,
                                                     int64_t end_ms) {
  if (!job.open) return std::nullopt;
  IncidentEvent e = eventOf(IncidentEventKind::kClose, key, job, ts_ms);
  e.incident.end_ms = end_ms;
  job.open.reset();
  return e;
}

std::vector<IncidentEvent> LiveCorrelator::onBatch(const collectors::SampleBatch& batch) {
  std::vector<IncidentEvent> events;
  for (const auto& u : batch.job_updates) {
    auto& job = this->job(u.key);
    job.label = u.label;
    if (u.ended_ms) {
      if (auto e = closeOf(u.key, job, batch.wall_time_ms,
                           job.open ? job.open->last_stalled_ms : batch.wall_time_ms)) {
        events.push_back(std::move(*e));
      }
      jobs_.erase(u.key);
    }
  }
  for (const auto& r : batch.rank_updates) {
    if (auto it = jobs_.find(r.key); it != jobs_.end()) it->second.rank_facts[r.rank] = r;
  }
  for (const auto& f : batch.job_devices) {
    auto it = jobs_.find(f.key);
    if (it == jobs_.end() || !it->second.devices.insert({f.device, f.via}).second) continue;
    JobSeries& s = it->second.series;
    auto same = std::find_if(s.devices.begin(), s.devices.end(), [&](const DeviceSeries& d) { return d.name == f.device; });
    if (same != s.devices.end()) {
      // Both where some files are and under a device holding others: one series, both roles.
      if (same->via.empty() && !f.via.empty()) same->via = f.via;
      same->also_direct = true;
      continue;
    }
    DeviceSeries d;
    d.name = f.device;
    d.via = f.via;
    d.job_reads = true;
    d.r_await_ms.assign(s.size(), std::nullopt);
    d.w_await_ms.assign(s.size(), std::nullopt);
    d.aqu_sz.assign(s.size(), std::nullopt);
    s.devices.push_back(std::move(d));
  }

  for (const auto& sample : batch.jobs) {
    JobState& job = this->job(sample.key);
    append(job, sample, batch);
    judgeNewest(job);
    // Healthy and nothing open: no analysis needed (the common case, ~1 us).
    if (!job.open && job.since_stalled > 1) continue;
    // Only the tail decides what is going on now: the open stall (if any) and, before it,
    // twice the baseline window, so that the baseline and the attribution see the same
    // healthy intervals a whole-window analysis would. ~10x cheaper than the whole hour.
    const JobSeries& whole = job.series;
    size_t stall_start = whole.size();
    if (job.open) {
      stall_start = static_cast<size_t>(
          std::lower_bound(whole.ts_ms.begin(), whole.ts_ms.end(), job.open->incident.start_ms) - whole.ts_ms.begin());
    }
    const size_t margin = 2 * config_.detector.baseline_intervals + config_.detector.warmup_intervals +
                          static_cast<size_t>(config_.open_after_s + config_.close_after_s) + 2;
    const JobSeries s = tailOf(whole, stall_start > margin ? stall_start - margin : 0);
    const Analysis a = analyzeJob(s, config_.detector);
    // The incident still going on: its last stalled interval is this one or the one before
    // (the detector bridges a single healthy interval).
    const Incident* ongoing = nullptr;
    if (!a.incidents.empty() && a.incidents.back().last + 2 >= s.size()) ongoing = &a.incidents.back();

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
      const double quiet_s = static_cast<double>(batch.wall_time_ms - job.open->last_stalled_ms) / 1000.0;
      if (quiet_s >= config_.close_after_s) {
        if (auto e = closeOf(sample.key, job, batch.wall_time_ms, job.open->last_stalled_ms)) {
          events.push_back(std::move(*e));
        }
      }
    } else if (ongoing) {
      Open open;
      open.live_id = next_id_++;
      open.incident = *ongoing;
      open.last_stalled_ms = ongoing->end_ms;
      job.open = std::move(open);
      events.push_back(eventOf(IncidentEventKind::kOpen, sample.key, job, batch.wall_time_ms));
    }
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
  const bool stalled = job.baseline.judge(progressAt(s, i, signal, job.steps_seen), minDrop(signal, config_.detector));
  job.since_stalled = stalled ? 0 : (job.since_stalled == SIZE_MAX ? SIZE_MAX : job.since_stalled + 1);
}

std::vector<ActiveStall> LiveCorrelator::active() const {
  std::vector<ActiveStall> out;
  for (const auto& [key, job] : jobs_) {
    if (!job.open) continue;
    const Incident& i = job.open->incident;
    out.push_back({job.open->live_id, key, job.label, i.cls, i.device, i.physical_device, i.start_ms, stallRankLabel(i)});
  }
  return out;
}

}  // namespace stallwatch::correlator
