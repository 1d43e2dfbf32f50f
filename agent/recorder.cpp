#include "agent/recorder.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/collector_set.h"
#include "agent/device_topology.h"
#include "agent/tick_schedule.h"
#include "common/service_manager.h"
#include "storage/writer.h"
#include "storage/writer_lock.h"

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

// The writer thread, with this run begun in the DB (a corrupt DB moved aside first).
std::shared_ptr<storage::SampleWriter> startWriter(const RecorderOptions& options,
                                                   const std::string& collector_names,
                                                   int64_t started_ms) {
  std::string moved_to;
  auto store = storage::Store::openOrMoveAside(options.db_path, &moved_to);
  if (!moved_to.empty()) {
    spdlog::error("the database was corrupt and was moved aside to {}; recording into a new {}",
                  moved_to, options.db_path.string());
  }
  const int64_t interval_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(options.interval).count();
  const storage::RunInfo run{started_ms, options.live.host.empty() ? hostName() : options.live.host,
                             STALLWATCH_VERSION, interval_ms, collector_names};
  const int64_t run_id = store->beginRun(run);
  // Shared with the thread that finishes it (finishWriter): a stop must not wait on a disk
  // that does not answer.
  auto writer = std::make_shared<storage::SampleWriter>(
      std::move(store), run_id, options.queue_capacity, options.flush_interval);
  writer->setRetention(options.retain);
  // Damage found while writing: the same as at start, the file moved aside and a new one
  // begun with this run's facts; the writer puts what was queued into it.
  writer->onCorruption([path = options.db_path, run](const std::string& why) {
    const std::string aside = storage::Store::moveAside(path, why);
    spdlog::error(
        "the database became corrupt while recording and was moved aside to {}; "
        "recording into a new {}",
        aside, path.string());
    auto fresh = storage::Store::open(path);
    const int64_t new_run = fresh->beginRun(run);
    return std::pair{std::move(fresh), new_run};
  });
  if (!moved_to.empty()) {
    writer->submitEvent({started_ms, "writer", "error",
                         "the database found at start was corrupt; moved aside to " + moved_to});
  }
  if (options.db_group) {
    if (const std::string why = storage::shareWithGroup(options.db_path, *options.db_group);
        !why.empty())
      spdlog::warn("--db-group: {}", why);
  }
  spdlog::info("recording to {} every {} ms (run {}); collectors: {}", options.db_path.string(),
               interval_ms, run_id, collector_names.empty() ? "none" : collector_names);
  return writer;
}

// Drive health on a thread of its own: each verdict goes to the DB and the endpoint, a change
// of verdict to the log, and a disk blamed for a stall is read at once. Null when off.
class HealthWiring {
 public:
  HealthWiring(const RecorderOptions& options, storage::SampleWriter& writer, LivePipeline& live) {
    if (!options.health) return;
    // A captured tree (--root) has no drives to ask: only the host's are read.
    if (!options.drive_reader && !options.collector_config.root.isHost()) {
      spdlog::info("health: off (--root is not the live host)");
      return;
    }
    auto reader =
        options.drive_reader ? options.drive_reader : std::make_shared<health::NativeDriveReader>();
    monitor_ = std::make_unique<HealthMonitor>(
        *options.health, reader, [this, &writer, &live](const HealthResult& r) {
          writer.submitHealth({r.ts_ms, r.reading, r.verdict});
          const std::string verdict = health::toString(r.verdict.verdict);
          if (r.changed) {
            const std::string text =
                "drive " + r.target.device + ": " + r.previous_verdict + " -> " + verdict;
            spdlog::warn("health: {}", text);
            writer.submitEvent({r.ts_ms, "health", "warning", text});
          }
          std::vector<DriveHealthMetric> all;
          {
            std::lock_guard lock(mutex_);
            verdicts_[r.target.device] = verdict;
            for (const auto& [device, v] : verdicts_) all.push_back({device, v});
          }
          live.setHealth(std::move(all));
        });
    live.onEvent([this](const model::IncidentEvent& e) {
      if (e.kind == model::IncidentEventKind::kClose ||
          e.incident.cls != model::StallClass::kDiskSlow)
        return;
      monitor_->requestNow(e.incident.physical_device.empty() ? e.incident.device
                                                              : e.incident.physical_device);
    });
  }
  HealthMonitor* monitor() { return monitor_.get(); }
  // Stops the thread (before the writer closes: its callback writes) and says what it did.
  std::optional<HealthStats> stop() {
    if (!monitor_) return std::nullopt;
    auto stats = monitor_->stats();
    monitor_.reset();
    return stats;
  }

 private:
  std::unique_ptr<HealthMonitor> monitor_;
  std::mutex mutex_;
  std::map<std::string, std::string> verdicts_;
};

// The ticks: one batch per interval from the collectors, through the live half, to the
// writer, until the duration passes or a stop signal arrives. The endpoint is served from this
// loop, between ticks: a scrape that comes when a tick is due takes it (TickSchedule), one
// wake-up for both and a page of that moment.
class TickLoop {
 public:
  TickLoop(const RecorderOptions& options, const sigset_t& stop_signals, CollectorSet& collectors,
           DeviceTopology* topology, LivePipeline& live, storage::SampleWriter& writer,
           RecorderSummary& summary)
      : options_(options),
        collectors_(collectors),
        topology_(topology),
        live_(live),
        writer_(writer),
        summary_(summary),
        server_(live.metricsServer()),
        // The stop signals are blocked in every thread: read here, between ticks.
        signal_fd_(signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK)),
        // --duration D records the ticks that fall within D, one interval each.
        last_tick_(options.duration
                       ? static_cast<uint64_t>(options.duration->count() / options.interval.count())
                       : UINT64_MAX) {
    if (signal_fd_ < 0) throw std::runtime_error("cannot take the stop signals (signalfd)");
  }
  ~TickLoop() { close(signal_fd_); }
  TickLoop(const TickLoop&) = delete;
  TickLoop& operator=(const TickLoop&) = delete;

  void run() {
    previous_ = {monotonicNs(), wallTimeMs()};
    if (auto facts = collectors_.prime(previous_); facts.hasFacts())
      writer_.submit(std::move(facts));
    const auto start = Clock::now();
    schedule_.emplace(options_.interval, start);
    next_progress_ = start + options_.progress_every;
    if (server_) {
      server_->onPageRequest([this](Clock::time_point now, std::optional<Clock::duration> since) {
        if (ticks_ < last_tick_ && schedule_->onScrape(now, since)) tick(now, true);
      });
    }
    // Under systemd (Type=notify): the DB is open, the endpoint bound, the collectors primed.
    if (const std::string why = common::notifyServiceManager("READY=1"); !why.empty())
      spdlog::warn("telling systemd the agent is ready: {}", why);
    while (ticks_ < last_tick_) {
      const Woke woke = wait();
      if (woke == Woke::kStop) break;
      if (woke == Woke::kTick) tick(schedule_->due(), false);
    }
    if (server_) server_->onPageRequest(nullptr);
  }

 private:
  enum class Woke { kTick, kStop, kDone };

  // Serves the endpoint until the next tick is due, a stop signal comes, or a scrape took the
  // last tick of --duration.
  Woke wait() {
    std::vector<pollfd> fds;
    for (;;) {
      if (ticks_ >= last_tick_) return Woke::kDone;
      auto now = Clock::now();
      const auto wake = schedule_->wakeAt();
      if (now >= wake) return Woke::kTick;
      fds.assign({{signal_fd_, POLLIN, 0}});
      const auto until = server_ ? std::min(wake, server_->pollFds(fds)) : wake;
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::max(until - now, Clock::duration::zero()));
      const timespec ts{static_cast<time_t>(left.count() / 1'000'000'000),
                        static_cast<long>(left.count() % 1'000'000'000)};
      if (ppoll(fds.data(), fds.size(), &ts, nullptr) < 0) {
        if (errno == EINTR) continue;
        spdlog::error("waiting for the next tick: {}", std::strerror(errno));
        return Woke::kStop;
      }
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info{};
        while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
          if (info.ssi_signo != SIGHUP) {
            spdlog::info("received signal {}, flushing and stopping", info.ssi_signo);
            return Woke::kStop;
          }
          reload();
        }
      }
      if (server_) server_->serve(std::span(fds).subspan(1), Clock::now());
    }
  }

  // SIGHUP is not a stop: what can change without a restart is read again.
  void reload() {
    spdlog::info("received SIGHUP: reading the settings again");
    common::notifyServiceManager(common::reloadingState());
    if (auto fresh = options_.reload ? options_.reload() : std::nullopt) {
      live_.reconfigure(*fresh);
    } else {
      spdlog::warn("SIGHUP: the settings in force are kept");
    }
    common::notifyServiceManager("READY=1");
  }

  // One tick, due AT (the timer's) or taken now by a scrape (BY_SCRAPE).
  void tick(Clock::time_point at, bool by_scrape) {
    ++ticks_;
    collectors::Tick tick{monotonicNs(), wallTimeMs()};
    collectors::SampleBatch batch;
    batch.wall_time_ms = tick.wall_time_ms;
    batch.interval_seconds = static_cast<double>(tick.monotonic_ns - previous_.monotonic_ns) / 1e9;
    collectors_.collect(tick, batch);
    previous_ = tick;
    collectors::attachJobGpuUtilization(batch);
    ++summary_.intervals;
    if (by_scrape) ++summary_.ticks_by_scrape;
    {
      // The agent's own figures only matter to the endpoint: not gathered every tick without it.
      AgentCounters counters{summary_.intervals, summary_.late_ticks, nullptr, {}};
      std::vector<CollectorStats> stats;
      if (server_) {
        stats = collectors_.stats();
        counters.collectors = &stats;
        counters.writer = writer_.stats();
      }
      live_.onBatch(batch, &writer_, counters);
    }
    const auto now = Clock::now();
    if (topology_) topology_->afterTick(batch, now);
    const size_t jobs = batch.jobs.size();
    writer_.submit(std::move(batch));
    if (options_.on_progress && now >= next_progress_) {
      next_progress_ = now + options_.progress_every;
      const auto& events = live_.eventCounts();
      const auto stats = writer_.stats();
      options_.on_progress({summary_.intervals, summary_.late_ticks, jobs,
                            events[0] - std::min(events[0], events[2]), stats.written_batches,
                            stats.dropped_batches});
    }
    // A cycle that overran (a stopped process, a loaded host) skips the ticks it missed
    // instead of firing them back to back.
    const uint64_t skipped = schedule_->ticked(at, now, by_scrape);
    summary_.late_ticks += skipped;
    ticks_ += skipped;
  }

  const RecorderOptions& options_;
  CollectorSet& collectors_;
  DeviceTopology* topology_;
  LivePipeline& live_;
  storage::SampleWriter& writer_;
  RecorderSummary& summary_;
  MetricsServer* server_;
  const int signal_fd_;
  const uint64_t last_tick_;
  uint64_t ticks_ = 0;  // taken or skipped
  std::optional<TickSchedule> schedule_;
  collectors::Tick previous_{};
  Clock::time_point next_progress_;
};

// The final flush on a thread of its own, waited for at most STOP_TIMEOUT: on a frozen or hung
// filesystem a write does not return, and systemd would SIGKILL an agent that waits. Past the
// timeout the stop goes on and says what was not written; the thread is left with the writer
// (the process exits with it still blocked in the kernel).
void finishWriter(const std::shared_ptr<storage::SampleWriter>& writer,
                  const std::shared_ptr<const storage::WriterLock>& db_lock,
                  std::chrono::milliseconds stop_timeout, RecorderSummary& summary) {
  const auto before_stop = writer->stats();
  auto finished = std::make_shared<std::promise<bool>>();
  auto result = finished->get_future();
  // The lock goes with it: no other recorder may take the DB while this one may still write.
  std::thread finisher([writer, db_lock, finished, ended_ms = wallTimeMs()] {
    finished->set_value(writer->finish(ended_ms));
  });
  if (result.wait_for(stop_timeout) == std::future_status::ready) {
    // Joined, so that its references are gone and the DB is closed (WAL checkpointed) when
    // record() returns, not whenever the thread gets round to it.
    finisher.join();
    summary.store_ok = result.get();
    const auto stats = writer->stats();
    summary.written_batches = stats.written_batches;
    summary.dropped_batches = stats.dropped_batches;
    return;
  }
  finisher.detach();
  summary.store_ok = false;
  summary.abandoned = true;
  summary.written_batches = before_stop.written_batches;
  summary.dropped_batches = before_stop.dropped_batches;
  summary.unwritten_batches = before_stop.queue_depth;
}

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
  // Collector events wait here until the writer exists (the collectors are made first: the
  // run records their names).
  std::shared_ptr<storage::SampleWriter> writer;
  // The metrics port before the collectors: making them can take a while (the per-I/O program's
  // load parses the kernel's BTF), and a client that sees the dataloader socket appear (the
  // jobs collector's) finds the port already open.
  LiveOptions live_options = options.live;
  if (live_options.host.empty()) live_options.host = hostName();
  LivePipeline live(live_options);
  CollectorSet collectors(options.enabled_collectors, options.collector_config,
                          [&writer](storage::AgentEvent e) { writer->submitEvent(std::move(e)); });
  writer = startWriter(options, collectors.names(), wallTimeMs());
  HealthWiring health(options, *writer, live);

  std::optional<DeviceTopology> topology;
  if (options.enabled_collectors.count("diskstats") > 0 || collectors.wantsDeviceTree() ||
      health.monitor()) {
    topology.emplace(options.collector_config.root, options.device_rescan);
    topology->subscribe([&](const auto& tree) { collectors.setDeviceTree(tree); });
    if (HealthMonitor* monitor = health.monitor()) {
      topology->subscribe([monitor, &options](const auto& tree) {
        monitor->setTargets(
            health::driveTargets(*tree, options.collector_config.root.dev.string()));
      });
    }
    topology->subscribe(
        [&writer](const auto& tree) { writer->submitDevices(*tree, wallTimeMs()); });
    topology->subscribe([&live](const auto& tree) { live.setDeviceTree(tree); });
    topology->rescan();
  }

  RecorderSummary summary;
  TickLoop(options, stop_signals, collectors, topology ? &*topology : nullptr, live, *writer,
           summary)
      .run();
  // The stop's last steps (hooks, the final write) may take up to twice --stop-timeout: a
  // scrape meanwhile gets the last page from a thread of the endpoint's own, not a hang.
  if (MetricsServer* server = live.metricsServer()) {
    try {
      server->serveOnOwnThread();
    } catch (const std::exception& e) {
      spdlog::warn("the endpoint is not served while stopping: {}", e.what());
    }
  }

  common::notifyServiceManager("STOPPING=1");
  for (const auto& line : collectors.finalReports()) spdlog::info("{}", line);
  // Hooks and posts of the last events get until --stop-timeout (a hook still running then is
  // killed with what it started); then the run is closed.
  live.drain(options.stop_timeout);
  summary.health = health.stop();
  summary.incident_events = live.eventCounts();
  summary.hooks = live.hookStats();
  summary.webhook = live.webhookStats();
  summary.notifier = live.notifierStats();
  finishWriter(writer, db_lock, options.stop_timeout, summary);
  summary.collectors = collectors.stats();
  return summary;
}

}  // namespace stallwatch::agent
