#include "agent/live_pipeline.h"

#include <spdlog/spdlog.h>

#include <ctime>

#include "agent/incident_payload.h"
#include "collectors/self_process.h"

namespace stallwatch::agent {

LivePipeline::LivePipeline(const LiveOptions& options)
    : options_(options),
      correlator_(options.correlator),
      hooks_(options.hook ? std::make_unique<HookRunner>(*options.hook) : nullptr),
      webhook_(options.webhook ? std::make_unique<WebhookSender>(*options.webhook) : nullptr),
      notifier_(options.host, options.repeat_window, hooks_.get(), webhook_.get()) {
  if (options.listen) server_ = std::make_unique<MetricsServer>(*options.listen, board_);
  if (options.otlp) {
    const auto self = collectors::readSelfProcess();
    const double started = self && self->start_time_seconds ? *self->start_time_seconds
                                                            : static_cast<double>(::time(nullptr));
    otlp_ = std::make_unique<OtlpExporter>(
        *options.otlp, board_,
        OtlpResource{options.host, STALLWATCH_VERSION, static_cast<int64_t>(started * 1e9)});
  }
}

LivePipeline::~LivePipeline() = default;

void LivePipeline::reconfigure(const LiveOptions& options) {
  if (options.otlp.has_value() != options_.otlp.has_value() ||
      (options.otlp && options.otlp->endpoint != options_.otlp->endpoint)) {
    spdlog::warn("reload: --otlp-endpoint takes a restart; kept as it was");
  }
  if (options.listen.has_value() != options_.listen.has_value() ||
      (options.listen && (options.listen->host != options_.listen->host ||
                          options.listen->port != options_.listen->port)) ||
      options.host != options_.host) {
    spdlog::warn("reload: --listen and --node take a restart; kept as they were");
  }
  // The old hook and webhook deliver what they queued on their own threads, and go with the
  // pipeline: the sampling thread does not wait for them.
  if (hooks_) retired_hooks_.push_back(std::move(hooks_));
  if (webhook_) retired_webhooks_.push_back(std::move(webhook_));
  hooks_ = options.hook ? std::make_unique<HookRunner>(*options.hook) : nullptr;
  webhook_ = options.webhook ? std::make_unique<WebhookSender>(*options.webhook) : nullptr;
  notifier_.setTargets(hooks_.get(), webhook_.get(), options.repeat_window);
  correlator_.setConfig(options.correlator);
  options_.hook = options.hook;
  options_.webhook = options.webhook;
  options_.repeat_window = options.repeat_window;
  options_.correlator = options.correlator;
  options_.correlate = options.correlate;
  // Said at warn: an operator's action, seen whatever the log level it set.
  spdlog::warn("reload: hook {}, webhook {}, incidents open after {} s and close after {} s",
               hooks_ ? "on" : "off", webhook_ ? "on" : "off", options.correlator.open_after_s,
               options.correlator.close_after_s);
}

namespace {

// "fuse: FUSE daemon s3fs (pid 812)" for the mount an incident names (the device, else the one
// under it); "" for a block device.
std::string servedBy(const collectors::DeviceTree& tree, const model::Incident& i) {
  for (const std::string* name : {&i.device, &i.physical_device}) {
    const collectors::BlockDevice* d = name->empty() ? nullptr : tree.find(*name);
    if (d && !d->served_by.empty())
      return std::string(collectors::toString(d->kind)) + ": " + d->served_by;
  }
  return {};
}

}  // namespace

void LivePipeline::onBatch(const collectors::SampleBatch& batch, storage::SampleWriter* writer,
                           const AgentCounters& counters) {
  if (options_.correlate) {
    for (auto& e : correlator_.onBatch(batch)) {
      ++events_[static_cast<size_t>(e.kind)];
      if (e.kind == model::IncidentEventKind::kOpen) ++opened_[static_cast<size_t>(e.incident.cls)];
      if (e.kind == model::IncidentEventKind::kClose)
        lost_[static_cast<size_t>(e.incident.cls)] += e.incident.gpu_seconds_lost;
      if (tree_) e.served_by = servedBy(*tree_, e.incident);
      const std::string summary = incidentSummary(e, options_.host);
      if (e.kind == model::IncidentEventKind::kClose) {
        spdlog::info("{}", summary);
      } else {
        spdlog::warn("{}", summary);
      }
      if (on_event_) on_event_(e);
      const bool notified = (hooks_ || webhook_) && notifier_.notify(e);
      if (writer) writer->submitIncidentEvent({std::move(e), notified});
    }
  }
  noteRunShares(run_shares_, batch);
  noteJobDevices(job_devices_, batch);
  if (!server_ && !otlp_ && !options_.keep_metrics) return;
  addIoLatency(batch.io_latency, io_latency_);
  for (const auto& u : batch.job_updates) {
    if (u.ended_ms) forgetIoLatencyOf(u.key, io_latency_);
  }
  auto s = std::make_shared<MetricsSnapshot>();
  s->version = STALLWATCH_VERSION;
  s->last_sample_ms = batch.wall_time_ms;
  s->interval_seconds = batch.interval_seconds;
  s->intervals = counters.intervals;
  s->late_ticks = counters.late_ticks;
  s->disks = batch.disks;
  s->pressure = batch.pressure;
  s->gpus = batch.gpus;
  s->jobs = batch.jobs;
  s->node = options_.host;
  s->ranks = rankMetrics(batch, run_shares_);
  s->job_runs = run_shares_;
  s->job_devices = job_devices_;
  s->stalls = correlator_.active();
  s->limiters = correlator_.limiters();
  for (const auto& [key, m] : io_latency_) s->io_latency.push_back(m);
  s->incidents_opened = opened_;
  s->gpu_seconds_lost = lost_;
  s->incident_events = events_;
  if (counters.collectors) s->collectors = *counters.collectors;
  s->writer = counters.writer;
  s->hooks = hookStats();
  s->webhook = webhookStats();
  s->notifier = notifier_.stats();
  {
    std::lock_guard lock(health_mutex_);
    s->health = health_;
  }
  board_.publish(std::move(s));
}

std::string LivePipeline::metricsPage() const {
  const auto latest = board_.latest();
  return latest ? renderMetrics(*latest, collectors::readSelfProcess()) : std::string();
}

void LivePipeline::setHealth(std::vector<DriveHealthMetric> health) {
  std::lock_guard lock(health_mutex_);
  health_ = std::move(health);
}

void LivePipeline::drain(std::chrono::milliseconds max) {
  const auto deadline = std::chrono::steady_clock::now() + max;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  // Hooks past the deadline are killed with what they started, so that a stop ends on time
  // and the summary counts them.
  for (auto& retired : retired_hooks_) retired->stop(left());
  if (hooks_) hooks_->stop(left());
  if (webhook_) webhook_->waitIdle(std::max(left(), std::chrono::milliseconds(0)));
}

std::optional<HookStats> LivePipeline::hookStats() const {
  return hooks_ ? std::optional<HookStats>(hooks_->stats()) : std::nullopt;
}

std::optional<WebhookStats> LivePipeline::webhookStats() const {
  return webhook_ ? std::optional<WebhookStats>(webhook_->stats()) : std::nullopt;
}

std::optional<int> LivePipeline::metricsPort() const {
  return server_ ? std::optional<int>(server_->port()) : std::nullopt;
}

}  // namespace stallwatch::agent
