// The recording agent: every interval, run each enabled collector into one batch and hand it
// to the writer thread. Ticks come from the monotonic clock; the wall clock only stamps rows.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/health_monitor.h"
#include "agent/live_pipeline.h"
#include "agent/metrics.h"
#include "collectors/registry.h"

namespace stallwatch::agent {

// What the agent has done so far, for the terminal's status line and the service manager.
struct RecorderProgress {
  uint64_t intervals = 0;
  uint64_t late_ticks = 0;
  size_t jobs = 0;  // followed at the last tick
  uint64_t incidents_open = 0;
  uint64_t written_batches = 0, dropped_batches = 0;
};

struct RecorderOptions {
  std::filesystem::path db_path;
  std::optional<gid_t> db_group;  // --db-group: the DB and its folder readable by this group
  std::chrono::nanoseconds interval = std::chrono::seconds(1);
  std::optional<std::chrono::nanoseconds> duration;  // none: until a stop signal
  collectors::CollectorConfig collector_config;
  std::set<std::string> enabled_collectors;  // names from collectors::collectorTable()
  size_t queue_capacity = 600;
  std::chrono::milliseconds retain = std::chrono::hours(24 * 14);  // zero: keep everything
  std::chrono::milliseconds flush_interval = std::chrono::seconds(5);
  // How long a stop waits for the final write before it gives up on the DB's disk.
  std::chrono::milliseconds stop_timeout = std::chrono::seconds(5);
  // The device tree is rescanned when diskstats' device set or the mount table changes, and
  // at least this often (identity, loop backing files). A rescan costs ~4.5 ms.
  std::chrono::seconds device_rescan = std::chrono::seconds(600);
  LiveOptions live;                                     // its host is filled in by record()
  std::optional<HealthConfig> health = HealthConfig{};  // none: no drive health thread
  std::shared_ptr<health::DriveReader> drive_reader;    // null: the native readers
  // SIGHUP (when in the signal set): what can change without a restart, read again (the
  // config file: hooks, webhook, the correlator's timing, log level). None keeps the settings
  // in force (the reload said why). Called on the sampling thread between ticks.
  std::function<std::optional<LiveOptions>()> reload;
  // Called on the sampling thread every progress_every with the figures so far; none unset.
  std::function<void(const RecorderProgress&)> on_progress;
  std::chrono::milliseconds progress_every = std::chrono::seconds(5);
};

struct RecorderSummary {
  uint64_t intervals = 0;
  uint64_t late_ticks = 0;       // ticks skipped because a cycle overran the interval
  uint64_t ticks_by_scrape = 0;  // taken when a scrape of /metrics came (TickSchedule)
  uint64_t written_batches = 0;
  uint64_t dropped_batches = 0;
  std::vector<CollectorStats> collectors;
  std::array<uint64_t, 3> incident_events{};
  std::optional<HookStats> hooks;
  std::optional<WebhookStats> webhook;
  NotifierStats notifier;
  std::optional<HealthStats> health;
  bool store_ok = true;
  // The final flush did not end within stop_timeout (a frozen or hung DB disk): these
  // intervals were still queued and are lost; the run is not closed in the DB.
  bool abandoned = false;
  uint64_t unwritten_batches = 0;
};

// Records until the duration passes or one of STOP_SIGNALS arrives. The caller must have
// blocked STOP_SIGNALS in every thread (sigprocmask before starting any), so that they are
// taken here (signalfd) and the last interval is flushed. Throws storage::StoreError
// when the DB cannot be opened, std::runtime_error when --listen cannot be bound.
RecorderSummary record(const RecorderOptions& options, const sigset_t& stop_signals);

// This host's name as runs, hooks and webhooks give it ("unknown" if it has none).
std::string hostName();

}  // namespace stallwatch::agent
