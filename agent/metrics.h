// What the Prometheus endpoint shows: the sampling thread publishes a snapshot each interval
// (the latest batch's figures, the active stalls, its own counters); a scrape renders the
// newest snapshot in the text exposition format. Scrapes never touch the collectors.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/hook_runner.h"
#include "agent/metric_sink.h"
#include "agent/notifier.h"
#include "agent/webhook_sender.h"
#include "collectors/samples.h"
#include "collectors/self_process.h"
#include "correlator/live_correlator.h"
#include "storage/writer.h"

namespace stallwatch::agent {

struct CollectorStats {
  std::string name;
  uint64_t data = 0;
  uint64_t no_data = 0;
  uint64_t errors = 0;
  uint64_t skipped = 0;  // malformed lines or out-of-range values dropped
  std::chrono::nanoseconds total_time{0};
  std::chrono::nanoseconds last_time{0};
  bool last_ok = true;    // the last collection was neither an error nor without its source
  bool available = true;  // its source exists on this host (an NVIDIA driver, PSI)
  // The sampling thread's CPU inside collect(), over the CPU_COLLECTIONS whose CPU was read (one
  // in CollectorSet::kCpuEveryTicks).
  std::chrono::nanoseconds total_cpu_time{0};
  uint64_t cpu_collections = 0;
  uint64_t refused = 0;  // items not taken past a bound (processes past the jobs cap)
};

// A drive's health verdict, as the health thread last read it.
struct DriveHealthMetric {
  std::string device;
  std::string verdict;  // ok, warning, failing, worn-out, unknown, unsupported
};

// One rank of a run across nodes, over the last interval: what the fleet rules compare across
// the nodes (deploy/prometheus/stallwatch-fleet.rules.yml).
struct RankMetric {
  std::string run;  // slurm:ID, torchelastic:ID, dist:ADDR:PORT
  int32_t rank = 0;
  std::optional<double> gpu_util_percent, gpu_work_percent;
  std::optional<double> data_wait_ratio;  // of the training loop's time
  std::optional<double> steps_per_second;
};

// Every I/O's latency of one device and operation (the eBPF collector's), as a Prometheus
// histogram: cumulative counts at each bound of kIoLatencyBounds. Everyone's I/O since the agent
// started (TRAINING_JOB empty), or a followed job's own since it started, until it ends.
inline constexpr std::array<double, 17> kIoLatencyBounds = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0};
struct IoLatencyMetric {
  std::string device, op, training_job;
  uint64_t count = 0;
  double sum_seconds = 0;
  std::array<uint64_t, kIoLatencyBounds.size()> at_or_below{};  // per bound, not cumulated
};
// By device, operation and job ("" for everyone's).
using IoLatencyTotals =
    std::map<std::tuple<std::string, std::string, std::string>, IoLatencyMetric>;
// Adds an interval's rows to TOTALS: every row to its device and operation, a followed job's
// also to its own; at most MAX_SERIES histograms (a node's devices, five operations, the jobs
// it follows).
void addIoLatency(const std::vector<collectors::IoLatencySample>& rows, IoLatencyTotals& totals,
                  size_t max_series = 512);
// A job that ended: its histograms go with it.
void forgetIoLatencyOf(const std::string& job_key, IoLatencyTotals& totals);

// The jobs that are this node's share of a run across nodes, by job key: their run, for a job
// of one rank here its rank, and the run's WORLD_SIZE (from its environment). Kept from the job
// descriptions.
struct RunShare {
  std::string run;
  std::optional<int32_t> rank;
  std::optional<int32_t> world_size;
};
using RunShares = std::map<std::string, RunShare>;

struct MetricsSnapshot {
  std::string version;
  int64_t last_sample_ms = 0;
  double interval_seconds = 0;  // of the latest interval
  uint64_t intervals = 0;
  uint64_t late_ticks = 0;
  std::vector<collectors::DiskSample> disks;
  std::vector<collectors::PressureSample> pressure;
  std::vector<collectors::GpuSample> gpus;
  std::vector<collectors::JobSample> jobs;
  std::string node;               // this node's name (--node, else the host name)
  std::vector<RankMetric> ranks;  // of the jobs that are part of a run across nodes
  // The jobs that are this node's share of a run (the fleet report's way from a run to the
  // node's job series); job key -> the devices it reads, each with the device it was seen
  // through ("" when directly). Both bounded by the jobs followed and their devices.
  RunShares job_runs;
  std::map<std::string, std::set<std::pair<std::string, std::string>>> job_devices;
  std::vector<correlator::ActiveStall> stalls;
  std::vector<correlator::LiveLimiter> limiters;  // each job's verdict over its last minute
  std::array<uint64_t, model::kStallClassCount> incidents_opened{};
  std::array<double, model::kStallClassCount> gpu_seconds_lost{};  // of the incidents closed
  std::array<uint64_t, 3> incident_events{};                       // by IncidentEventKind
  std::vector<CollectorStats> collectors;
  storage::WriterStats writer;
  std::optional<HookStats> hooks;
  std::optional<WebhookStats> webhook;
  NotifierStats notifier;
  std::vector<DriveHealthMetric> health;
  std::vector<IoLatencyMetric> io_latency;
};

// PROCESS: the agent's own figures (process_*), read when a page is rendered: a scrape's cost,
// not every tick's.
std::string renderMetrics(const MetricsSnapshot& snapshot,
                          const std::optional<collectors::SelfProcess>& process = std::nullopt);
// The same page, for a server that renders one a scrape: the families' HELP and TYPE lines and
// the histograms' bounds as text are kept from one page to the next (the same text, fewer
// instructions).
namespace metrics_text {
class PageMemo;
}
class MetricsPageRenderer {
 public:
  MetricsPageRenderer();
  ~MetricsPageRenderer();
  MetricsPageRenderer(const MetricsPageRenderer&) = delete;
  MetricsPageRenderer& operator=(const MetricsPageRenderer&) = delete;
  std::string render(const MetricsSnapshot& snapshot,
                     const std::optional<collectors::SelfProcess>& process);

 private:
  std::unique_ptr<metrics_text::PageMemo> memo_;
};
// Every family of SNAPSHOT into SINK (the text page above, an OTLP export), a job's pod labels
// following its training_job.
void writeMetrics(const MetricsSnapshot& snapshot,
                  const std::optional<collectors::SelfProcess>& process, MetricSink& sink);

void noteRunShares(RunShares& shares, const collectors::SampleBatch& batch);
// The devices each followed job reads (device, via), kept from the facts of every batch; a job
// that ended is forgotten.
using JobDevices = std::map<std::string, std::set<std::pair<std::string, std::string>>>;
void noteJobDevices(JobDevices& devices, const collectors::SampleBatch& batch);
// The ranks of those jobs in BATCH: each rank's own figures for a job of several ranks here,
// the job's for a job of one.
std::vector<RankMetric> rankMetrics(const collectors::SampleBatch& batch, const RunShares& shares);

// The hand-over point between the sampling thread and the HTTP server's threads.
class MetricsBoard {
 public:
  void publish(std::shared_ptr<const MetricsSnapshot> snapshot);
  std::shared_ptr<const MetricsSnapshot> latest() const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const MetricsSnapshot> latest_;
};

}  // namespace stallwatch::agent
