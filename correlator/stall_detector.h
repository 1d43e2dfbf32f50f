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

// One rank of a synchronous multi-GPU job: its processes' figures and its GPU's.
struct RankSeries {
  int32_t rank = 0;
  uint32_t pid = 0;
  std::string gpu;  // UUID
  Series gpu_util_percent, gpu_work_percent;
  Series steps, data_wait_s;
  Series read_bytes_per_s, write_bytes_per_s, workers_cpu, d_state_threads;

  // Every per-interval series of the rank: the one list of them.
  template <typename Fn>
  void forEachSeries(Fn fn) {
    for (Series* x : {&gpu_util_percent, &gpu_work_percent, &steps, &data_wait_s, &read_bytes_per_s,
                      &write_bytes_per_s, &workers_cpu, &d_state_threads}) {
      fn(*x);
    }
  }
};

struct JobSeries {
  std::vector<int64_t> ts_ms;       // end of each interval
  std::vector<double> interval_s;
  uint32_t gpu_count = 0;
  Series gpu_util_percent;          // mean over the job's GPUs
  Series gpu_work_percent;          // mean GPM work (gpuWorkPercent) over the job's GPUs
  Series steps, data_wait_s, step_s;
  Series read_bytes_per_s, write_bytes_per_s, workers_cpu, d_state_threads;
  Series io_some, cpu_some;         // host pressure shares, 0..1
  std::vector<DeviceSeries> devices;
  std::vector<RankSeries> ranks;    // two or more, or none
  size_t size() const { return ts_ms.size(); }

  // Every per-interval series (the job's, its devices', its ranks'), for code that cuts or
  // trims them all alike; ts_ms and interval_s are not Series and are left to the caller.
  template <typename Fn>
  void forEachSeries(Fn fn) {
    for (Series* x : {&gpu_util_percent, &gpu_work_percent, &steps, &data_wait_s, &step_s, &read_bytes_per_s,
                      &write_bytes_per_s, &workers_cpu, &d_state_threads, &io_some, &cpu_some}) {
      fn(*x);
    }
    for (auto& d : devices) {
      for (Series* x : {&d.r_await_ms, &d.w_await_ms, &d.aqu_sz}) fn(*x);
    }
    for (auto& r : ranks) r.forEachSeries(fn);
  }
};

// What a job's progress is judged by, best first:
//   steps                  steps per second from the dataloader hook, summed over ranks;
//   gpu_work               GPM work of its GPUs, the busier of tensor-core and DRAM
//                          activity: a collective that spins while it waits for another
//                          rank keeps SMs occupied (utilisation ~100 %, SM activity ~18 %
//                          on an H200) but moves no data and runs no tensor op (both 0);
//   gpu_util_slowest_rank  without GPM, for jobs of several ranks: the utilisation of the
//                          least busy rank's GPU (a synchronous job moves at its pace; the
//                          others' waiting kernels read as busy);
//   gpu_util               the mean utilisation of its GPUs (one GPU).
enum class ProgressSignal { kNone, kSteps, kGpuWork, kSlowestRankGpuUtil, kGpuUtil };
const char* toString(ProgressSignal signal);  // "steps", "gpu_work", ..., "" for none
ProgressSignal chooseProgressSignal(const JobSeries& series);
// The rule itself, from what a job has shown: step reports, GPM work readings, how many of its
// ranks gave GPU utilisation, any GPU utilisation. The live correlator keeps these as flags.
ProgressSignal progressSignalFrom(bool steps, bool gpu_work, size_t ranks_with_gpu, bool gpu_util);
// Progress in interval I by SIGNAL. Steps: an interval with no report once the job has
// reported (REPORTING) made no steps, 0; before that, none.
std::optional<double> progressAt(const JobSeries& series, size_t i, ProgressSignal signal, bool reporting);

struct DetectorConfig {
  double stall_ratio = 0.5;       // progress below this share of the baseline is a stall
  double min_gpu_drop_points = 20;  // ... and at least this many points of GPU utilisation
  double min_work_drop_points = 1;  // ... or of GPM work (tensor or DRAM activity: a job's is low)
  // A rank starved (held a synchronous job back): its GPU's utilisation fell below this share
  // of its own baseline while another rank's stayed busy, or its data wait rose by this much.
  double rank_idle_ratio = 0.5;
  double rank_busy_ratio = 0.7;
  double rank_wait_rise = 0.3;  // share of the interval spent waiting for data
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

// The rank that held a synchronous job back.
struct Straggler {
  int32_t rank = 0;
  uint32_t pid = 0;
  std::string gpu;
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
  // Jobs of several ranks: the one that starved while the others waited for it, or none
  // when every rank starved alike (ranks_starved then lists them).
  std::optional<Straggler> straggler;
  std::vector<int32_t> waiting_ranks;
  std::vector<int32_t> ranks_starved;
};

struct Analysis {
  std::vector<Incident> incidents;
  uint64_t blips = 0;
  std::vector<bool> stalled;    // per interval
  std::vector<std::optional<double>> baseline;  // progress baseline per interval
  double gpu_seconds_total = 0;
  double gpu_seconds_lost[kStallClassCount] = {};
  std::string progress_signal;  // toString(ProgressSignal): "" when there is nothing to judge by
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
  // Judges one interval (a stall also needs progress MIN_DROP below the baseline, in the
  // signal's units) and, unless it is a stall, adds it to the baseline. True: stalled.
  bool judge(std::optional<double> progress, double min_drop);

 private:
  DetectorConfig config_;
  std::deque<double> arrivals_;
  std::vector<double> sorted_;
};

// One line on the ranks of a several-rank job's incident, "" for a one-rank job: "rank 1
// (pid 1234, GPU-5c1c2662) starved: disk-slow loop0 (on vda), await_ms loop0 0.6 -> 38.1;
// rank 0 waited", or "ranks 0, 1 starved alike: no single straggler".
std::string rankSummary(const Incident& incident);
// The rank as a metric or alert label: the straggler's number, "all" when every rank starved
// alike, "" for a one-rank job. One value per incident, so the label stays bounded.
std::string stallRankLabel(const Incident& incident);

// The smallest drop below the baseline that counts as a stall for SIGNAL.
double minDrop(ProgressSignal signal, const DetectorConfig& config);

// Percentile P (0..100) of the present values; nullopt if none.
std::optional<double> percentile(const Series& values, double p);

}  // namespace stallwatch::correlator
