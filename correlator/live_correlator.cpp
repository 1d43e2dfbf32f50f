#include "correlator/live_correlator.h"

#include <algorithm>

namespace stallwatch::correlator {
namespace {

std::optional<double> toOptional(const std::optional<uint64_t>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

uint32_t countGpus(const std::string& uuids) {
  if (uuids.empty()) return 0;
  return static_cast<uint32_t>(std::count(uuids.begin(), uuids.end(), ',')) + 1;
}

template <typename T>
void dropFront(std::vector<T>& v, size_t n) {
  v.erase(v.begin(), v.begin() + static_cast<long>(std::min(n, v.size())));
}

}  // namespace

const char* toString(IncidentEventKind kind) {
  switch (kind) {
    case IncidentEventKind::kOpen: return "open";
    case IncidentEventKind::kChange: return "change";
    case IncidentEventKind::kClose: return "close";
  }
  return "?";
}

LiveCorrelator::LiveCorrelator(LiveConfig config) : config_(std::move(config)) {
  config_.detector.min_duration_s = config_.open_after_s;
}

void LiveCorrelator::append(JobState& job, const collectors::JobSample& j, const collectors::SampleBatch& b) {
  JobSeries& s = job.series;
  s.ts_ms.push_back(b.wall_time_ms);
  s.interval_s.push_back(b.interval_seconds);
  s.gpu_count = std::max(s.gpu_count, countGpus(j.gpus));
  s.gpu_util_percent.push_back(j.gpu_util_percent);
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
  trim(s);
}

void LiveCorrelator::trim(JobSeries& s) const {
  if (s.size() <= config_.window_intervals) return;
  const size_t n = s.size() - config_.window_intervals;
  dropFront(s.ts_ms, n);
  dropFront(s.interval_s, n);
  for (Series* series : {&s.gpu_util_percent, &s.steps, &s.data_wait_s, &s.step_s, &s.read_bytes_per_s,
                         &s.write_bytes_per_s, &s.workers_cpu, &s.d_state_threads, &s.io_some, &s.cpu_some}) {
    dropFront(*series, n);
  }
  for (auto& d : s.devices) {
    dropFront(d.r_await_ms, n);
    dropFront(d.w_await_ms, n);
    dropFront(d.aqu_sz, n);
  }
}

std::optional<IncidentEvent> LiveCorrelator::closeOf(const std::string& key, JobState& job, int64_t ts_ms,
                                                     int64_t end_ms) {
  if (!job.open) return std::nullopt;
  IncidentEvent e;
  e.kind = IncidentEventKind::kClose;
  e.live_id = job.open->live_id;
  e.ts_ms = ts_ms;
  e.job_key = key;
  e.job_label = job.label;
  e.incident = job.open->incident;
  e.incident.end_ms = end_ms;
  job.open.reset();
  return e;
}

std::vector<IncidentEvent> LiveCorrelator::onBatch(const collectors::SampleBatch& batch) {
  std::vector<IncidentEvent> events;
  for (const auto& u : batch.job_updates) {
    auto& job = jobs_[u.key];
    job.label = u.label;
    if (u.ended_ms) {
      if (auto e = closeOf(u.key, job, batch.wall_time_ms,
                           job.open ? job.open->last_stalled_ms : batch.wall_time_ms)) {
        events.push_back(std::move(*e));
      }
      jobs_.erase(u.key);
    }
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
    auto it = jobs_.find(sample.key);
    if (it == jobs_.end()) it = jobs_.emplace(sample.key, JobState{}).first;
    JobState& job = it->second;
    append(job, sample, batch);
    const JobSeries& s = job.series;
    const Analysis a = analyzeJob(s, config_.detector);
    // The incident still going on: its last stalled interval is this one or the one before
    // (the detector bridges a single healthy interval).
    const Incident* ongoing = nullptr;
    if (!a.incidents.empty() && a.incidents.back().last + 2 >= s.size()) ongoing = &a.incidents.back();

    if (job.open && ongoing) {
      Open& open = *job.open;
      const std::string was_class = toString(open.incident.cls);
      const std::string was_device = open.incident.device;
      const int64_t start = std::min(open.incident.start_ms, ongoing->start_ms);
      open.incident = *ongoing;
      open.incident.start_ms = start;
      open.last_stalled_ms = ongoing->end_ms;
      if (was_class != toString(ongoing->cls) || was_device != ongoing->device) {
        IncidentEvent e;
        e.kind = IncidentEventKind::kChange;
        e.live_id = open.live_id;
        e.ts_ms = batch.wall_time_ms;
        e.job_key = sample.key;
        e.job_label = job.label;
        e.incident = open.incident;
        e.previous_class = was_class;
        e.previous_device = was_device;
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
      IncidentEvent e;
      e.kind = IncidentEventKind::kOpen;
      e.live_id = open.live_id;
      e.ts_ms = batch.wall_time_ms;
      e.job_key = sample.key;
      e.job_label = job.label;
      e.incident = open.incident;
      job.open = std::move(open);
      events.push_back(std::move(e));
    }
  }
  return events;
}

std::vector<ActiveStall> LiveCorrelator::active() const {
  std::vector<ActiveStall> out;
  for (const auto& [key, job] : jobs_) {
    if (!job.open) continue;
    const Incident& i = job.open->incident;
    out.push_back({job.open->live_id, key, job.label, i.cls, i.device, i.physical_device, i.start_ms});
  }
  return out;
}

}  // namespace stallwatch::correlator
