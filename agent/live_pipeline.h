// The agent's live half, shared by `record` and `replay`: each interval's batch goes through
// the live correlator; its events are stored, handed to the notifier (hook, webhook), and
// the metrics board gets a fresh snapshot for the Prometheus endpoint. Nothing here waits on
// a hook, a webhook, a scrape or the database.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/hook_runner.h"
#include "agent/metrics.h"
#include "agent/metrics_server.h"
#include "agent/notifier.h"
#include "agent/otlp_exporter.h"
#include "agent/webhook_sender.h"
#include "collectors/devices/block_devices.h"
#include "correlator/live_correlator.h"
#include "storage/writer.h"

namespace stallwatch::agent {

struct LiveOptions {
  bool correlate = true;
  correlator::LiveConfig correlator;
  std::optional<HookConfig> hook;        // --on-incident
  std::optional<WebhookConfig> webhook;  // --webhook
  std::chrono::milliseconds repeat_window = std::chrono::minutes(10);
  std::optional<ListenAddress> listen;  // --listen
  std::optional<OtlpConfig> otlp;       // --otlp-endpoint
  bool keep_metrics = false;  // build the metrics page without an endpoint (replay --metrics-file)
  std::string host;           // the node's name on metrics and in hook payloads (--node)
};

// What the recorder knows about itself, for the endpoint.
struct AgentCounters {
  uint64_t intervals = 0;
  uint64_t late_ticks = 0;
  const std::vector<CollectorStats>* collectors = nullptr;
  storage::WriterStats writer;
};

class LivePipeline {
 public:
  // Throws std::runtime_error if --listen cannot be bound.
  explicit LivePipeline(const LiveOptions& options);
  ~LivePipeline();

  // WRITER may be null (replay without a DB).
  void onBatch(const collectors::SampleBatch& batch, storage::SampleWriter* writer,
               const AgentCounters& counters);
  void setHealth(std::vector<DriveHealthMetric> health);
  // The agent's device tree, to say what serves a mount an incident names. Sampling thread.
  void setDeviceTree(std::shared_ptr<const collectors::DeviceTree> tree) {
    tree_ = std::move(tree);
  }
  // Also tell FN about each event (replay prints them).
  void onEvent(std::function<void(const model::IncidentEvent&)> fn) { on_event_ = std::move(fn); }

  // Lets hooks and webhook posts still queued finish within MAX; hooks still running then are
  // killed with their process trees (the stop deadline is a deadline).
  void drain(std::chrono::milliseconds max);
  // A reload (SIGHUP): the hook, the webhook and the correlator's timing from OPTIONS, from the
  // next event on; what is queued for the old hook and webhook still goes out (bounded by their
  // timeouts). The endpoint's address and the node's name need a restart: said if they differ.
  void reconfigure(const LiveOptions& options);

  std::optional<HookStats> hookStats() const;
  std::optional<WebhookStats> webhookStats() const;
  NotifierStats notifierStats() const { return notifier_.stats(); }
  const std::array<uint64_t, 3>& eventCounts() const { return events_; }
  std::optional<int> metricsPort() const;
  // The endpoint (--listen), for its owner's loop to serve; null without one.
  MetricsServer* metricsServer() { return server_.get(); }
  // The metrics page as of the last batch (empty before the first, or with neither --listen nor
  // keep_metrics).
  std::string metricsPage() const;

 private:
  LiveOptions options_;
  correlator::LiveCorrelator correlator_;
  std::unique_ptr<HookRunner> hooks_;
  std::unique_ptr<WebhookSender> webhook_;
  // Replaced by a reload, still delivering what they had queued.
  std::vector<std::unique_ptr<HookRunner>> retired_hooks_;
  std::vector<std::unique_ptr<WebhookSender>> retired_webhooks_;
  Notifier notifier_;
  MetricsBoard board_;
  std::unique_ptr<MetricsServer> server_;
  std::unique_ptr<OtlpExporter> otlp_;  // after the board it reads, stopped before it
  std::array<uint64_t, model::kStallClassCount> opened_{};
  std::array<double, model::kStallClassCount> lost_{};  // GPU-seconds of closed incidents
  std::array<uint64_t, 3> events_{};
  std::mutex health_mutex_;  // set by the health thread, read by the sampling thread
  std::vector<DriveHealthMetric> health_;
  std::function<void(const model::IncidentEvent&)> on_event_;
  RunShares run_shares_;
  JobDevices job_devices_;
  std::shared_ptr<const collectors::DeviceTree> tree_;
  IoLatencyTotals io_latency_;  // everyone's since start, each followed job's while it runs
};

}  // namespace stallwatch::agent
