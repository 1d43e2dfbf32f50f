// Stall detection and attribution for one job: pure computation over aligned per-interval
// series, so the live agent and a post-mortem on last week's DB reach the same verdicts.
//
// A stall is an interval in which the job made much less progress than its own recent
// baseline: GPU utilisation (mean over its GPUs) where it has GPUs, else steps per second
// from the dataloader socket. Baseline: the median of the trailing window's non-stalled
// intervals, so healthy jobs at 50-80 % with bursts do not trip a fixed threshold and a long
// stall does not become the new normal. Runs of stalled intervals (a one-interval gap
// bridged) shorter than min_duration are counted as blips, longer ones are incidents.
//
// Each incident is attributed by comparing every candidate cause with its own baseline:
//   checkpoint   the job's own writes jumped              (checked first: they slow its disk)
//   disk-slow    a device the job reads got slow: await and/or queue far above normal
//   io-throttled I/O pressure or D-state workers up while the job's devices answer normally
//   input-cpu    CPU pressure up / input workers saturated, storage healthy
//   not-storage  none of these: said so, and no disk is blamed
// A device is blamed only if the job's open files were seen on it (or on a device above it).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace stallwatch::correlator {

using Series = std::vector<std::optional<double>>;

struct DeviceSeries {
  std::string name;
  std::string via;  // the job's files were on VIA, a device stacked on this one
  bool job_reads = false;  // false: on the host, but the job was never seen using it
  Series r_await_ms, w_await_ms, aqu_sz;
  bool also_direct = false;  // with VIA set: files were also seen on this device itself

  bool direct() const { return via.empty() || also_direct; }
};

struct JobSeries {
  std::vector<int64_t> ts_ms;       // end of each interval
  std::vector<double> interval_s;
  uint32_t gpu_count = 0;
  Series gpu_util_percent;          // mean over the job's GPUs
  Series steps, data_wait_s, step_s;
  Series read_bytes_per_s, write_bytes_per_s, workers_cpu, d_state_threads;
  Series io_some, cpu_some;         // host pressure shares, 0..1
  std::vector<DeviceSeries> devices;
  size_t size() const { return ts_ms.size(); }
};

struct DetectorConfig {
  double stall_ratio = 0.5;       // progress below this share of the baseline is a stall
  double min_gpu_drop_points = 20;  // ... and at least this many points of GPU utilisation
  double min_duration_s = 5;      // shorter stalls are blips
  size_t baseline_intervals = 120;  // healthy intervals the progress baseline is taken over
  size_t warmup_intervals = 10;   // no verdicts before this much baseline
  // Attribution thresholds: "far above normal" is this ratio over the baseline median.
  double latency_ratio = 3.0;
  double latency_floor_ms = 1.0;  // baselines below this count as this (NVMe at 0.1 ms)
  double queue_ratio = 3.0;
  double pressure_rise = 0.15;    // absolute rise of a PSI share over its baseline
  double write_ratio = 5.0;
  double write_floor_bytes_per_s = 20e6;
};

enum class StallClass { kDiskSlow, kIoThrottled, kInputCpu, kCheckpoint, kNotStorage };
const char* toString(StallClass c);
inline constexpr int kStallClassCount = 5;

struct EvidenceItem {
  std::string signal;   // "r_await_ms loop1", "io_some", ...
  double baseline = 0;  // median over the baseline window
  double during = 0;    // median over the incident
  bool supports = false;  // crossed its threshold
};

struct Incident {
  size_t first = 0, last = 0;  // interval indices, inclusive
  int64_t start_ms = 0;        // start of the first interval
  int64_t end_ms = 0;          // end of the last
  StallClass cls = StallClass::kNotStorage;
  std::string device;           // the device the job reads that got slow
  std::string physical_device;  // the device underneath it, where they differ
  double idle_share = 0;        // share of the job's GPU (or step) capacity lost
  double gpu_seconds_lost = 0;
  double confidence = 0;
  std::vector<EvidenceItem> evidence;
};

struct Analysis {
  std::vector<Incident> incidents;
  uint64_t blips = 0;
  std::vector<bool> stalled;    // per interval
  std::vector<std::optional<double>> baseline;  // progress baseline per interval
  double gpu_seconds_total = 0;
  double gpu_seconds_lost[kStallClassCount] = {};
  std::string progress_signal;  // "gpu_util" or "steps" or "" (nothing to judge by)
};

Analysis analyzeJob(const JobSeries& series, const DetectorConfig& config = {});

// The progress baseline and the stall rule, one interval at a time: the median of the last
// baseline_intervals healthy progress values (however old), kept both in arrival order and
// sorted so that each interval costs O(baseline_intervals) at worst. analyzeJob runs it over
// a whole series; the live correlator keeps one per job and feeds it as samples arrive.
class ProgressBaseline {
 public:
  explicit ProgressBaseline(const DetectorConfig& config) : config_(config) {}
  // The baseline for the next interval; none until warmup_intervals healthy values.
  std::optional<double> current() const;
  // Judges one interval (GPU: progress is utilisation in percent) and, unless it is a stall,
  // adds it to the baseline. True: stalled.
  bool judge(std::optional<double> progress, bool gpu);

 private:
  DetectorConfig config_;
  std::deque<double> arrivals_;
  std::vector<double> sorted_;
};

// Percentile P (0..100) of the present values; nullopt if none.
std::optional<double> percentile(const Series& values, double p);

}  // namespace stallwatch::correlator
