#include "agent/recorder.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <future>
#include <thread>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>

#include "collectors/block_devices.h"
#include "collectors/gpu.h"
#include "collectors/mountinfo.h"
#include "storage/writer_lock.h"
#include "storage/writer.h"

namespace stallwatch::agent {
namespace {

using Clock = std::chrono::steady_clock;

int64_t wallTimeMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t monotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}


// Sleeps until DEADLINE unless a stop signal arrives first; true means "stop".
bool sleepUntil(Clock::time_point deadline, const sigset_t& stop_signals) {
  while (true) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(left.count() % 1'000'000'000);
    const int sig = ::sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig > 0) {
      spdlog::info("received signal {}, flushing and stopping", sig);
      return true;
    }
    if (errno != EAGAIN && errno != EINTR) return false;
  }
}

const char* outcomeName(collectors::Outcome o) {
  switch (o) {
    case collectors::Outcome::kData: return "data";
    case collectors::Outcome::kNoData: return "no data";
    case collectors::Outcome::kError: return "error";
  }
  return "?";
}

struct ActiveCollector {
  std::unique_ptr<collectors::Collector> collector;
  CollectorStats stats;
  std::optional<collectors::Outcome> last_outcome;
  std::string last_message;
};

}  // namespace

std::string hostName() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown";
  return buffer;
}

RecorderSummary record(const RecorderOptions& options, const sigset_t& stop_signals) {
  // First of all: a second recorder on the same DB must not take over the first one's
  // dataloader socket, bind its port, or move aside or migrate the file it is writing.
  const auto db_lock = std::make_shared<const storage::WriterLock>(options.db_path);
  RecorderSummary summary;
  std::vector<ActiveCollector> active;
  std::string enabled_names;
  collectors::GpuCollector* gpu = nullptr;
  collectors::JobTracker* jobs = nullptr;
  for (const auto& entry : collectors::collectorTable()) {
    if (!options.enabled_collectors.count(entry.name)) continue;
    ActiveCollector a;
    a.collector = entry.make(options.collector_config);
    a.stats.name = entry.name;
    if (auto* g = dynamic_cast<collectors::GpuCollector*>(a.collector.get())) gpu = g;
    if (auto* j = dynamic_cast<collectors::JobTracker*>(a.collector.get())) jobs = j;
    active.push_back(std::move(a));
    enabled_names += (enabled_names.empty() ? "" : ",") + entry.name;
  }

  LiveOptions live_options = options.live;
  live_options.host = hostName();
  LivePipeline live(live_options);
  std::string moved_to;
  auto store = storage::Store::openOrMoveAside(options.db_path, &moved_to);
  if (!moved_to.empty()) {
    spdlog::error("the database was corrupt and was moved aside to {}; recording into a new {}", moved_to,
                  options.db_path.string());
  }
  const int64_t started_ms = wallTimeMs();
  const int64_t interval_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(options.interval).count();
  const int64_t run_id = store->beginRun(
      {started_ms, hostName(), STALLWATCH_VERSION, interval_ms, enabled_names});
  // Shared with the thread that finishes it (see the end): a stop must not wait on a disk
  // that does not answer.
  auto writer = std::make_shared<storage::SampleWriter>(std::move(store), run_id, options.queue_capacity,
                                                        options.flush_interval);
  writer->setRetention(options.retain);
  if (!moved_to.empty()) {
    writer->submitEvent({started_ms, "writer", "error", "the database found at start was corrupt; moved aside to " + moved_to});
  }
  spdlog::info("recording to {} every {} ms (run {}); collectors: {}", options.db_path.string(),
               interval_ms, run_id, enabled_names.empty() ? "none" : enabled_names);

  // Drive health on a thread of its own; each verdict goes to the DB and the endpoint.
  std::unique_ptr<HealthMonitor> health;
  std::mutex verdicts_mutex;
  std::map<std::string, std::string> verdicts;
  // A captured tree (--root) has no drives to ask: only the host's are read.
  if (options.health && !options.drive_reader && !options.collector_config.root.isHost()) {
    spdlog::info("health: off (--root is not the live host)");
  } else if (options.health) {
    auto reader = options.drive_reader ? options.drive_reader : std::make_shared<health::NativeDriveReader>();
    health = std::make_unique<HealthMonitor>(*options.health, reader, [&](const HealthResult& r) {
      writer->submitHealth({r.ts_ms, r.reading, r.verdict});
      const std::string verdict = health::toString(r.verdict.verdict);
      if (r.changed) {
        const std::string text = "drive " + r.target.device + ": " + r.previous_verdict + " -> " + verdict;
        spdlog::warn("health: {}", text);
        writer->submitEvent({r.ts_ms, "health", "warning", text});
      }
      std::vector<DriveHealthMetric> all;
      {
        std::lock_guard lock(verdicts_mutex);
        verdicts[r.target.device] = verdict;
        for (const auto& [device, v] : verdicts) all.push_back({device, v});
      }
      live.setHealth(std::move(all));
    });
    // A disk blamed for a stall is read at once, whatever the cadence.
    live.onEvent([&](const model::IncidentEvent& e) {
      if (e.kind == model::IncidentEventKind::kClose || e.incident.cls != model::StallClass::kDiskSlow) return;
      health->requestNow(e.incident.physical_device.empty() ? e.incident.device : e.incident.physical_device);
    });
  }

  const bool want_devices = options.enabled_collectors.count("diskstats") > 0 || jobs || health;
  auto udev = collectors::makeUdevSourceFor(options.collector_config.root);
  auto rescanDevices = [&] {
    auto tree = std::make_shared<const collectors::DeviceTree>(
        collectors::scanBlockDevices(options.collector_config.root, *udev));
    if (jobs) jobs->setDeviceTree(tree);
    if (health) health->setTargets(health::driveTargets(*tree, options.collector_config.root.dev.string()));
    writer->submitDevices(*tree, wallTimeMs());
  };
  if (want_devices) rescanDevices();
  if (jobs) {
    if (jobs->socket()) {
      spdlog::info("jobs: dataloader socket at {}", jobs->socket()->path().string());
    } else if (!jobs->socketError().empty()) {
      spdlog::warn("jobs: no dataloader socket: {}", jobs->socketError());
    }
  }

  auto collectAll = [&](const collectors::Tick& tick, collectors::SampleBatch& batch) {
    for (auto& a : active) {
      const auto t0 = Clock::now();
      collectors::CollectResult r = a.collector->collect(tick, batch);
      a.stats.last_time = Clock::now() - t0;
      a.stats.total_time += a.stats.last_time;
      a.stats.last_ok = r.outcome != collectors::Outcome::kError;
      a.stats.skipped += r.skipped;
      switch (r.outcome) {
        case collectors::Outcome::kData: ++a.stats.data; break;
        case collectors::Outcome::kNoData: ++a.stats.no_data; break;
        case collectors::Outcome::kError: ++a.stats.errors; break;
      }
      if (!r.notice.empty()) {
        spdlog::info("{}: {}", a.stats.name, r.notice);
        writer->submitEvent({tick.wall_time_ms, a.stats.name, "info", r.notice});
      }
      // Log and record a change of state, not every repetition of it. A collector's first
      // reading only primes its counters (no data, no reason): that is not news, and neither
      // is its first success.
      const bool priming = r.outcome == collectors::Outcome::kNoData && r.message.empty();
      if (!priming) {
        const bool changed = a.last_outcome != r.outcome ||
                             (r.outcome == collectors::Outcome::kError && r.message != a.last_message);
        const bool first_success = !a.last_outcome && r.outcome == collectors::Outcome::kData;
        if (changed && !first_success) {
          const bool bad = r.outcome == collectors::Outcome::kError;
          const std::string text =
              std::string(outcomeName(r.outcome)) + (r.message.empty() ? "" : ": " + r.message);
          if (bad) {
            spdlog::warn("{}: {}", a.stats.name, text);
          } else {
            spdlog::info("{}: {}", a.stats.name, text);
          }
          writer->submitEvent({tick.wall_time_ms, a.stats.name, bad ? "error" : "info", text});
        }
        a.last_outcome = r.outcome;
        a.last_message = r.message;
      }
      if (r.skipped > 0 && r.outcome == collectors::Outcome::kData && a.stats.skipped == r.skipped) {
        spdlog::warn("{}: skipped {} malformed value(s), first: {}", a.stats.name, r.skipped,
                     r.message);
      }
    }
  };

  // Priming read: rates need a previous reading.
  collectors::Tick previous{monotonicNs(), wallTimeMs()};
  {
    collectors::SampleBatch priming;
    priming.wall_time_ms = previous.wall_time_ms;
    collectAll(previous, priming);
    // Interval figures need two readings; facts (jobs found at start) stand on their own.
    priming.disks.clear();
    priming.pressure.clear();
    priming.gpus.clear();
    priming.gpu_processes.clear();
    priming.jobs.clear();
    if (!priming.job_updates.empty() || !priming.job_processes.empty() ||
        !priming.job_devices.empty()) {
      writer->submit(std::move(priming));
    }
  }
  const auto start = Clock::now();
  auto last_rescan = start;
  // --duration D records the ticks that fall within D, one interval each.
  const uint64_t last_tick =
      options.duration ? static_cast<uint64_t>(options.duration->count() / options.interval.count())
                       : UINT64_MAX;
  bool gpus_described = false;
  collectors::MountWatcher mounts_changed(options.collector_config.root);
  std::vector<std::string> disk_names;  // diskstats' devices last tick, in the kernel's order
  uint64_t k = 0;
  while (k < last_tick) {
    ++k;
    if (sleepUntil(start + k * options.interval, stop_signals)) break;
    collectors::Tick tick{monotonicNs(), wallTimeMs()};
    collectors::SampleBatch batch;
    batch.wall_time_ms = tick.wall_time_ms;
    batch.interval_seconds = static_cast<double>(tick.monotonic_ns - previous.monotonic_ns) / 1e9;
    collectAll(tick, batch);
    previous = tick;
    collectors::attachJobGpuUtilization(batch);
    ++summary.intervals;
    {
      // The agent's own figures only matter to the endpoint: not gathered every tick without it.
      AgentCounters counters{summary.intervals, summary.late_ticks, nullptr, {}};
      std::vector<CollectorStats> stats;
      if (live.metricsPort()) {
        for (const auto& a : active) stats.push_back(a.stats);
        counters.collectors = &stats;
        counters.writer = writer->stats();
      }
      live.onBatch(batch, writer.get(), counters);
    }
    if (gpu && !gpus_described && !batch.gpus.empty()) {
      writer->submitGpus(gpu->gpus(), batch.gpus, tick.wall_time_ms);
      gpus_described = true;
    }
    std::vector<std::string> batch_disk_names;
    batch_disk_names.reserve(batch.disks.size());
    for (const auto& d : batch.disks) batch_disk_names.push_back(d.device);
    writer->submit(std::move(batch));
    // A cycle that overran (a stopped process, a loaded host) skips the ticks it missed
    // instead of firing them back to back.
    const auto now = Clock::now();
    const uint64_t due = static_cast<uint64_t>((now - start) / options.interval);
    if (due > k) {
      summary.late_ticks += due - k;
      k = due;
    }
    if (want_devices) {
      bool devices_changed = batch_disk_names.size() != disk_names.size() ||
                             !std::equal(batch_disk_names.begin(), batch_disk_names.end(), disk_names.begin());
      devices_changed = devices_changed && !disk_names.empty();
      disk_names = std::move(batch_disk_names);
      if (devices_changed || mounts_changed.changed() || now - last_rescan >= options.device_rescan) {
        rescanDevices();
        last_rescan = now;
      }
    }
  }

  if (jobs && jobs->socket()) {
    const auto s = jobs->socket()->stats();
    spdlog::info("dataloader socket: {} datagrams, {} metrics, {} malformed lines, {} unknown "
                 "metrics, {} oversized datagrams, {} from senders past the cap",
                 s.datagrams, s.metrics, s.malformed_lines, s.unknown_metrics,
                 s.oversized_datagrams, s.dropped_senders);
  }
  // Hooks and posts of the last events get their timeouts; then the run is closed.
  live.drain(std::chrono::seconds(10));
  if (health) {
    summary.health = health->stats();
    health.reset();  // before the writer closes: its callback writes
  }
  summary.incident_events = live.eventCounts();
  summary.hooks = live.hookStats();
  summary.webhook = live.webhookStats();
  summary.notifier = live.notifierStats();
  // The final flush on a thread of its own, waited for at most stop_timeout: on a frozen or
  // hung filesystem a write does not return, and systemd would SIGKILL an agent that waits.
  // Past the timeout the stop goes on and says what was not written; the thread is left
  // with the writer (the process exits with it still blocked in the kernel).
  const auto before_stop = writer->stats();
  auto finished = std::make_shared<std::promise<bool>>();
  auto result = finished->get_future();
  // The lock goes with it: no other recorder may take the DB while this one may still write.
  std::thread finisher([writer, db_lock, finished, ended_ms = wallTimeMs()] {
    finished->set_value(writer->finish(ended_ms));
  });
  if (result.wait_for(options.stop_timeout) == std::future_status::ready) {
    // Joined, so that its references are gone and the DB is closed (WAL checkpointed) when
    // this function returns, not whenever the thread gets round to it.
    finisher.join();
    summary.store_ok = result.get();
    const auto stats = writer->stats();
    summary.written_batches = stats.written_batches;
    summary.dropped_batches = stats.dropped_batches;
  } else {
    finisher.detach();
    summary.store_ok = false;
    summary.abandoned = true;
    summary.written_batches = before_stop.written_batches;
    summary.dropped_batches = before_stop.dropped_batches;
    summary.unwritten_batches = before_stop.queue_depth;
  }
  for (auto& a : active) summary.collectors.push_back(a.stats);
  return summary;
}

}  // namespace stallwatch::agent
