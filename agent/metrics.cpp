#include "agent/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <utility>

#include "agent/build_info.h"
#include "agent/metrics_io_latency.h"
#include "agent/metrics_jobs.h"
#include "agent/metrics_writer.h"
#include "common/text.h"

namespace stallwatch::agent {
namespace {

// The agent itself: build, intervals, each collector's health, the writer.
void renderAgent(const MetricsSnapshot& s, const std::optional<collectors::SelfProcess>& process,
                 MetricSink& w) {
  w.family("stallwatch_build_info", "gauge",
           "The agent's version and the source revision it was built from; always 1.");
  w.sample({{"version", s.version}, {"revision", kBuildRevision}}, 1);
  // The process's own cost, under the names every Prometheus client library gives it.
  if (process) {
    const collectors::SelfProcess& p = *process;
    w.family("process_cpu_seconds_total", "counter", "User and system CPU time spent, seconds.");
    w.sample(p.cpu_seconds);
    w.family("process_resident_memory_bytes", "gauge", "Resident memory size, bytes.");
    w.sample(static_cast<double>(p.resident_bytes));
    w.family("process_virtual_memory_bytes", "gauge", "Virtual memory size, bytes.");
    w.sample(static_cast<double>(p.virtual_bytes));
    if (p.open_fds) {
      w.family("process_open_fds", "gauge", "Open file descriptors.");
      w.sample(static_cast<double>(*p.open_fds));
    }
    if (p.max_fds) {
      w.family("process_max_fds", "gauge", "The most file descriptors it may open.");
      w.sample(static_cast<double>(*p.max_fds));
    }
    if (p.start_time_seconds) {
      w.family("process_start_time_seconds", "gauge", "When the process started (Unix time).");
      w.sample(*p.start_time_seconds);
    }
  }
  w.family("stallwatch_last_sample_timestamp_seconds", "gauge",
           "When the latest interval ended (Unix time).");
  w.sample(static_cast<double>(s.last_sample_ms) / 1000.0);
  w.family("stallwatch_intervals_total", "counter", "Sampling intervals completed.");
  w.sample(static_cast<double>(s.intervals));
  w.family("stallwatch_late_ticks_total", "counter",
           "Ticks skipped because a cycle overran the interval.");
  w.sample(static_cast<double>(s.late_ticks));

  // The agent's own health, per collector.
  w.family("stallwatch_collector_success", "gauge",
           "1 if the collector's last run succeeded, else 0 (an error, or its source missing "
           "on this host: no NVIDIA driver, no PSI).");
  for (const auto& c : s.collectors) w.sample({{"collector", c.name}}, c.last_ok ? 1 : 0);
  w.family("stallwatch_collector_available", "gauge",
           "0 if the collector's source is missing on this host (no NVIDIA driver, no PSI), "
           "else 1.");
  for (const auto& c : s.collectors) w.sample({{"collector", c.name}}, c.available ? 1 : 0);
  w.family("stallwatch_collector_duration_seconds", "gauge",
           "How long the collector's last run took.");
  for (const auto& c : s.collectors) {
    w.sample({{"collector", c.name}}, std::chrono::duration<double>(c.last_time).count());
  }
  w.family("stallwatch_collector_runs_total", "counter", "Collector runs by outcome.");
  for (const auto& c : s.collectors) {
    w.sample({{"collector", c.name}, {"outcome", "data"}}, static_cast<double>(c.data));
    w.sample({{"collector", c.name}, {"outcome", "no_data"}}, static_cast<double>(c.no_data));
    w.sample({{"collector", c.name}, {"outcome", "error"}}, static_cast<double>(c.errors));
  }
  w.family("stallwatch_collector_skipped_values_total", "counter",
           "Malformed or out-of-range values skipped.");
  for (const auto& c : s.collectors)
    w.sample({{"collector", c.name}}, static_cast<double>(c.skipped));
  w.family("stallwatch_collector_refused_total", "counter",
           "Items not taken because a bound was reached (the jobs collector: processes not "
           "tracked while --max-jobs jobs were).");
  for (const auto& c : s.collectors)
    w.sample({{"collector", c.name}}, static_cast<double>(c.refused));
  w.family("stallwatch_writer_queue_depth", "gauge", "Intervals waiting for the database writer.");
  w.sample(static_cast<double>(s.writer.queue_depth));
  w.family("stallwatch_writer_written_batches_total", "counter",
           "Intervals written to the database.");
  w.sample(static_cast<double>(s.writer.written_batches));
  w.family("stallwatch_writer_dropped_batches_total", "counter",
           "Intervals dropped because the database writer fell behind (oldest first).");
  w.sample(static_cast<double>(s.writer.dropped_batches));
  w.family("stallwatch_writer_failed_writes_total", "counter",
           "Database transactions that failed.");
  w.sample(static_cast<double>(s.writer.failed_writes));
  w.family("stallwatch_outside_texts_changed_total", "counter",
           "Texts from outside (job ids, command lines, mount points) that were not valid UTF-8 "
           "or were too long, and were replaced or cut where they entered.");
  w.sample(static_cast<double>(common::outsideTextsChanged()));
}

// Mounts no block device serves, over the last interval: NFS (nfsiostat's figures) and FUSE
// (requests waiting for the daemon). One series per mount point: bounded by the mount table.
void renderMounts(const MetricsSnapshot& s, MetricSink& w) {
  auto seconds = [](const std::optional<double>& ms) {
    return ms ? std::optional<double>(*ms / 1000.0) : std::nullopt;
  };
  struct MountGauge {
    const char* name;
    const char* help;
    bool nfs_only;
    std::function<std::optional<double>(const collectors::DiskSample&)> value;
  };
  const MountGauge gauges[] = {
      {"stallwatch_mount_queue_length",
       "Requests outstanding: NFS RPCs on average (execute time / interval), FUSE requests "
       "waiting for the daemon at the tick.",
       false, [](const auto& d) -> std::optional<double> { return d.rates.aqu_sz; }},
      {"stallwatch_mount_read_await_seconds",
       "NFS READ execute time per op (nfsiostat's avg exe); absent without reads.", true,
       [&](const auto& d) { return seconds(d.rates.r_await_ms); }},
      {"stallwatch_mount_write_await_seconds",
       "NFS WRITE execute time per op; absent without writes.", true,
       [&](const auto& d) { return seconds(d.rates.w_await_ms); }},
      {"stallwatch_mount_read_bytes_per_second", "NFS READ payload received per second.", true,
       [](const auto& d) -> std::optional<double> { return d.rates.read_bytes_per_second; }},
      {"stallwatch_nfs_read_rtt_seconds", "NFS READ round trip per op (avg RTT).", true,
       [&](const auto& d) { return seconds(d.nfs->read_rtt_ms); }},
      {"stallwatch_nfs_metadata_await_seconds",
       "NFS execute time per op of GETATTR, LOOKUP, ACCESS, OPEN and the other metadata ops.", true,
       [&](const auto& d) { return seconds(d.nfs->metadata_await_ms); }},
      {"stallwatch_nfs_retransmissions_per_second", "NFS RPC retransmissions per second.", true,
       [](const auto& d) -> std::optional<double> { return d.nfs->retransmissions_per_second; }},
      {"stallwatch_nfs_timeouts_per_second", "NFS RPC major timeouts per second.", true,
       [](const auto& d) -> std::optional<double> { return d.nfs->timeouts_per_second; }},
  };
  for (const auto& g : gauges) {
    w.family(g.name, "gauge", g.help);
    for (const auto& d : s.disks) {
      if (d.device.rfind('/', 0) != 0 || (g.nfs_only && !d.nfs)) continue;
      if (auto v = g.value(d))
        w.sample({{"mountpoint", d.device}, {"fstype", d.nfs ? "nfs" : "fuse"}}, *v);
    }
  }
}

// Block devices (iostat -x's figures in base units) and pressure, over the last interval.
void renderDevices(const MetricsSnapshot& s, MetricSink& w) {
  // Devices, over the last interval (iostat -x's figures in base units).
  struct DiskGauge {
    const char* name;
    const char* help;
    std::optional<double> (*value)(const collectors::DiskSample&);
  };
  static const DiskGauge disk_gauges[] = {
      {"stallwatch_disk_reads_per_second", "Reads completed per second (r/s).",
       [](const collectors::DiskSample& d) -> std::optional<double> {
         return d.rates.reads_per_second;
       }},
      {"stallwatch_disk_writes_per_second", "Writes completed per second (w/s).",
       [](const collectors::DiskSample& d) -> std::optional<double> {
         return d.rates.writes_per_second;
       }},
      {"stallwatch_disk_read_bytes_per_second", "Bytes read per second.",
       [](const collectors::DiskSample& d) -> std::optional<double> {
         return d.rates.read_bytes_per_second;
       }},
      {"stallwatch_disk_write_bytes_per_second", "Bytes written per second.",
       [](const collectors::DiskSample& d) -> std::optional<double> {
         return d.rates.write_bytes_per_second;
       }},
      {"stallwatch_disk_read_await_seconds",
       "Mean time per completed read (r_await); absent without reads.",
       [](const collectors::DiskSample& d) -> std::optional<double> {
         return d.rates.r_await_ms ? std::optional<double>(*d.rates.r_await_ms / 1000.0)
                                   : std::nullopt;
       }},
      {"stallwatch_disk_write_await_seconds",
       "Mean time per completed write (w_await); absent without writes.",
       [](const collectors::DiskSample& d) -> std::optional<double> {
         return d.rates.w_await_ms ? std::optional<double>(*d.rates.w_await_ms / 1000.0)
                                   : std::nullopt;
       }},
      {"stallwatch_disk_queue_length", "Mean requests queued or in service (aqu-sz).",
       [](const collectors::DiskSample& d) -> std::optional<double> { return d.rates.aqu_sz; }},
      {"stallwatch_disk_busy_ratio", "Share of the interval the device was busy (%util / 100).",
       [](const collectors::DiskSample& d) -> std::optional<double> {
         return d.rates.util_percent / 100.0;
       }},
  };
  // A mount that is a storage target of its own (NFS, FUSE) is named by its mount point and
  // has families of its own below: %util and r/s mean nothing for a FUSE queue.
  auto isMount = [](const collectors::DiskSample& d) { return d.device.rfind('/', 0) == 0; };
  for (const auto& g : disk_gauges) {
    w.family(g.name, "gauge", g.help);
    for (const auto& d : s.disks) {
      if (isMount(d)) continue;
      if (auto v = g.value(d)) w.sample({{"device", d.device}}, *v);
    }
  }
  renderMounts(s, w);

  // The same devices' cumulative counters (node_exporter's node_disk_*_total), for rate()
  // over any window: a scrape every 15 s sees every interval, and a short spike too.
  struct DiskCounter {
    const char* name;
    const char* help;
    uint64_t collectors::DiskTotals::*value;
    double scale;
  };
  using T = collectors::DiskTotals;
  static const DiskCounter disk_counters[] = {
      {"stallwatch_disk_reads_completed_total", "Reads completed.", &T::reads, 1.0},
      {"stallwatch_disk_read_bytes_total", "Bytes read.", &T::read_bytes, 1.0},
      {"stallwatch_disk_read_time_seconds_total",
       "Time spent on reads (rate() over reads_completed: the mean r_await).", &T::read_time_ms,
       1e-3},
      {"stallwatch_disk_writes_completed_total", "Writes completed.", &T::writes, 1.0},
      {"stallwatch_disk_written_bytes_total", "Bytes written.", &T::written_bytes, 1.0},
      {"stallwatch_disk_write_time_seconds_total", "Time spent on writes.", &T::write_time_ms,
       1e-3},
      {"stallwatch_disk_io_time_seconds_total", "Time the device was busy (rate(): %util / 100).",
       &T::io_time_ms, 1e-3},
      {"stallwatch_disk_io_time_weighted_seconds_total",
       "Time spent on I/O weighted by requests in flight (rate(): aqu-sz).",
       &T::weighted_io_time_ms, 1e-3},
  };
  for (const auto& c : disk_counters) {
    w.family(c.name, "counter", c.help);
    for (const auto& d : s.disks) {
      if (d.totals)
        w.sample({{"device", d.device}}, static_cast<double>((*d.totals).*(c.value)) * c.scale);
    }
  }

  w.family("stallwatch_pressure_some_ratio", "gauge",
           "Share of the interval some task stalled on the resource (PSI).");
  for (const auto& p : s.pressure) {
    if (p.some_ratio) w.sample({{"resource", p.resource}}, *p.some_ratio);
  }
  w.family("stallwatch_pressure_full_ratio", "gauge",
           "Share of the interval all non-idle tasks stalled (PSI).");
  for (const auto& p : s.pressure) {
    if (p.full_ratio) w.sample({{"resource", p.resource}}, *p.full_ratio);
  }
  w.family("stallwatch_pressure_some_seconds_total", "counter",
           "Time some task stalled on the resource (PSI total=), for rate() over any window.");
  for (const auto& p : s.pressure) {
    if (p.some_total_us)
      w.sample({{"resource", p.resource}}, static_cast<double>(*p.some_total_us) / 1e6);
  }
  w.family("stallwatch_pressure_full_seconds_total", "counter",
           "Time all non-idle tasks stalled on the resource (PSI total=).");
  for (const auto& p : s.pressure) {
    if (p.full_total_us)
      w.sample({{"resource", p.resource}}, static_cast<double>(*p.full_total_us) / 1e6);
  }
}

// GPUs, over the last interval.
void renderGpus(const MetricsSnapshot& s, MetricSink& w) {
  w.family("stallwatch_gpu_utilization_ratio", "gauge",
           "GPU busy share over the interval (NVML utilisation / 100).");
  for (const auto& g : s.gpus) {
    if (g.utilization_percent) {
      w.sample({{"gpu", std::to_string(g.gpu_index)}, {"uuid", g.uuid}},
               *g.utilization_percent / 100.0);
    }
  }
  w.family("stallwatch_gpu_sm_active_ratio", "gauge",
           "Share of the GPU's SMs busy over the interval (NVML GPM; a collective that waits for "
           "another "
           "rank reads low here and near 1 in utilisation).");
  for (const auto& g : s.gpus) {
    if (g.sm_active_percent) {
      w.sample({{"gpu", std::to_string(g.gpu_index)}, {"uuid", g.uuid}},
               *g.sm_active_percent / 100.0);
    }
  }
  w.family("stallwatch_gpu_work_ratio", "gauge",
           "GPM work: the busier of the GPU's tensor cores and DRAM bandwidth over the interval (0 "
           "while "
           "a collective only waits).");
  for (const auto& g : s.gpus) {
    if (const auto work = collectors::gpuWorkPercent(g)) {
      w.sample({{"gpu", std::to_string(g.gpu_index)}, {"uuid", g.uuid}}, *work / 100.0);
    }
  }
  w.family("stallwatch_gpu_power_watts", "gauge", "GPU power draw.");
  for (const auto& g : s.gpus) {
    if (g.power_watts)
      w.sample({{"gpu", std::to_string(g.gpu_index)}, {"uuid", g.uuid}}, *g.power_watts);
  }
  w.family("stallwatch_gpu_memory_used_bytes", "gauge", "GPU memory in use.");
  for (const auto& g : s.gpus) {
    if (g.memory_used_bytes) {
      w.sample({{"gpu", std::to_string(g.gpu_index)}, {"uuid", g.uuid}},
               static_cast<double>(*g.memory_used_bytes));
    }
  }
}

// Stalls open now, incidents and their notifications.
void renderStalls(const MetricsSnapshot& s, MetricSink& w) {
  w.family("stallwatch_stall_active", "gauge",
           "1 while the job is stalled; class and device say why, rank which rank held it back "
           "(\"all\": every rank starved alike; empty: a one-rank job).");
  // The rank label only where the job has ranks: one-rank jobs keep the series they had.
  auto stallLabels = [](const correlator::ActiveStall& st) {
    std::vector<Label> labels{
        {"training_job", st.job_key}, {"class", model::toString(st.cls)}, {"device", st.device}};
    if (!st.rank.empty()) labels.push_back({"rank", st.rank});
    return labels;
  };
  for (const auto& st : s.stalls) w.sample(stallLabels(st), 1);
  w.family("stallwatch_stall_start_timestamp_seconds", "gauge",
           "When the active stall began (Unix time).");
  for (const auto& st : s.stalls) {
    w.sample(stallLabels(st), static_cast<double>(st.start_ms) / 1000.0);
  }
  w.family("stallwatch_incidents_total", "counter",
           "Incidents opened by the live correlator, by class.");
  for (int c = 0; c < model::kStallClassCount; ++c) {
    w.sample({{"class", model::toString(static_cast<model::StallClass>(c))}},
             static_cast<double>(s.incidents_opened[static_cast<size_t>(c)]));
  }
  w.family("stallwatch_gpu_seconds_lost_total", "counter",
           "GPU-seconds the incidents closed by the live correlator lost, by their final class "
           "(the figure each incident's report gives).");
  for (int c = 0; c < model::kStallClassCount; ++c) {
    w.sample({{"class", model::toString(static_cast<model::StallClass>(c))}},
             s.gpu_seconds_lost[static_cast<size_t>(c)]);
  }
  w.family("stallwatch_incident_events_total", "counter", "Incident events (open, change, close).");
  for (int k = 0; k < 3; ++k) {
    w.sample({{"event", model::toString(static_cast<model::IncidentEventKind>(k))}},
             static_cast<double>(s.incident_events[static_cast<size_t>(k)]));
  }
  w.family("stallwatch_notifications_total", "counter",
           "Incident events sent to the hook and webhook, or suppressed as a flap.");
  w.sample({{"result", "sent"}}, static_cast<double>(s.notifier.sent));
  w.sample({{"result", "suppressed"}}, static_cast<double>(s.notifier.suppressed));
  if (s.hooks) {
    w.family("stallwatch_hook_runs_total", "counter", "Hook runs by result.");
    w.sample({{"result", "succeeded"}}, static_cast<double>(s.hooks->succeeded));
    w.sample({{"result", "failed"}}, static_cast<double>(s.hooks->failed));
    w.sample({{"result", "timed_out"}}, static_cast<double>(s.hooks->timed_out));
    w.sample({{"result", "spawn_error"}}, static_cast<double>(s.hooks->spawn_errors));
    w.sample({{"result", "dropped"}}, static_cast<double>(s.hooks->dropped));
    w.family("stallwatch_hooks_running", "gauge", "Hooks running now.");
    w.sample(static_cast<double>(s.hooks->running));
  }
  if (s.webhook) {
    w.family("stallwatch_webhook_posts_total", "counter", "Webhook events by result.");
    w.sample({{"result", "delivered"}}, static_cast<double>(s.webhook->delivered));
    w.sample({{"result", "given_up"}}, static_cast<double>(s.webhook->given_up));
    w.sample({{"result", "dropped"}}, static_cast<double>(s.webhook->dropped));
    w.family("stallwatch_webhook_failed_attempts_total", "counter",
             "Webhook POSTs that failed (each retry counts).");
    w.sample(static_cast<double>(s.webhook->failed_attempts));
  }
}

// Drives' health verdicts.
void renderHealth(const MetricsSnapshot& s, MetricSink& w) {
  w.family("stallwatch_drive_health", "gauge",
           "1 for the drive's current health verdict (ok, warning, failing, worn-out, unknown, "
           "unsupported).");
  for (const auto& h : s.health) w.sample({{"device", h.device}, {"verdict", h.verdict}}, 1);
}

}  // namespace

void writeMetrics(const MetricsSnapshot& s, const std::optional<collectors::SelfProcess>& process,
                  MetricSink& w) {
  std::map<std::string, MetricSink::OwnedLabels, std::less<>> pods;
  for (const auto& j : s.jobs) {
    if (!j.pod) continue;
    MetricSink::OwnedLabels& l = pods[j.key];
    l = {{"namespace", j.pod->ns}, {"pod", j.pod->name}};
    if (!j.pod->container.empty()) l.emplace_back("container", j.pod->container);
  }
  w.jobLabels(std::move(pods));
  renderAgent(s, process, w);
  renderDevices(s, w);
  renderGpus(s, w);
  renderIoLatency(s.io_latency, w);
  renderJobs(s, w);
  renderRanks(s, w);
  renderStalls(s, w);
  renderHealth(s, w);
}

std::string renderMetrics(const MetricsSnapshot& s,
                          const std::optional<collectors::SelfProcess>& process) {
  metrics_text::Writer w;
  writeMetrics(s, process, w);
  return w.take();
}

MetricsPageRenderer::MetricsPageRenderer() : memo_(std::make_unique<metrics_text::PageMemo>()) {}
MetricsPageRenderer::~MetricsPageRenderer() = default;

std::string MetricsPageRenderer::render(const MetricsSnapshot& s,
                                        const std::optional<collectors::SelfProcess>& process) {
  metrics_text::Writer w(memo_.get());
  writeMetrics(s, process, w);
  return w.take();
}

void MetricsBoard::publish(std::shared_ptr<const MetricsSnapshot> snapshot) {
  std::lock_guard lock(mutex_);
  latest_ = std::move(snapshot);
}

std::shared_ptr<const MetricsSnapshot> MetricsBoard::latest() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

}  // namespace stallwatch::agent
