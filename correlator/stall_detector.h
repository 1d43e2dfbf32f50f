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
//   disk-slow    a device the job reads got slow: await and/or queue far above normal, or the
//                99th percentile of the job's own reads (per I/O) while the average held
//   io-throttled I/O pressure or D-state workers up while the job's devices answer normally
//   input-cpu    CPU pressure up / input workers saturated, storage healthy
//   not-storage  none of these: said so, and no disk is blamed
// A device is blamed only if the job's open files were seen on it (or on a device above it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/analysis.h"
#include "model/incident.h"
#include "model/series.h"

namespace stallwatch::correlator {

// The correlator judges model's records; their names are used unqualified here.
using model::Analysis;
using model::DeviceSeries;
using model::EvidenceItem;
using model::IdleSpan;
using model::Incident;
using model::JobSeries;
using model::kStallClassCount;
using model::ProgressSignal;
using model::RankSeries;
using model::Series;
using model::StallClass;
using model::StandingSpan;
using model::Straggler;
using model::WorkSpan;

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
ProgressSignal chooseProgressSignal(const JobSeries& series);
// The rule itself, from what a job has shown: step reports, GPM work readings, how many of its
// ranks gave GPU utilisation, any GPU utilisation. The live correlator keeps these as flags.
ProgressSignal progressSignalFrom(bool steps, bool gpu_work, size_t ranks_with_gpu, bool gpu_util);
// Progress in interval I by SIGNAL. Steps: an interval with no report once the job has
// reported (REPORTING) made no steps, 0; before that, none.
std::optional<double> progressAt(const JobSeries& series, size_t i, ProgressSignal signal,
                                 bool reporting);

struct DetectorConfig {
  double stall_ratio = 0.5;         // progress below this share of the baseline is a stall
  double min_gpu_drop_points = 20;  // ... and at least this many points of GPU utilisation
  double min_work_drop_points = 1;  // ... or of GPM work (tensor or DRAM activity: a job's is low)
  // A rank starved (held a synchronous job back): its GPU's utilisation fell below this share
  // of its own baseline while another rank's stayed busy, or its data wait rose by this much.
  double rank_idle_ratio = 0.5;
  double rank_busy_ratio = 0.7;
  double rank_wait_rise = 0.3;      // share of the interval spent waiting for data
  double min_duration_s = 5;        // shorter stalls are blips
  size_t baseline_intervals = 120;  // healthy intervals the progress baseline is taken over
  size_t warmup_intervals = 10;     // no verdicts before this much baseline
  // Attribution thresholds: "far above normal" is this ratio over the baseline median.
  double latency_ratio = 3.0;
  double latency_floor_ms = 1.0;  // baselines below this count as this (NVMe at 0.1 ms)
  // The 99th percentile of the job's own reads (per I/O, from the eBPF collector) far above its
  // baseline: latency_ratio over it, the baseline floored at this (an SSD's p99 of a few ms).
  double tail_floor_ms = 5.0;
  double queue_ratio = 3.0;
  double pressure_rise = 0.15;  // absolute rise of a PSI share over its baseline
  double write_ratio = 5.0;
  double write_floor_bytes_per_s = 20e6;
  // The job's exit (issue 48): a not-storage stall from its last progress to its end is the job
  // winding down (joining its workers, flushing, logging), not a stall, if its progress stopped
  // entirely (under stopped_share of the baseline), nothing held it (hangEvidence) and it
  // lasted under exit_hold_s: what the live correlator holds such a stall for before it pages
  // it as a hang (LiveConfig::idle_open_after_s), so that both reach the same answer.
  double exit_hold_s = 120;
  double stopped_share = 0.1;
};

Analysis analyzeJob(const JobSeries& series, const DetectorConfig& config = {});

// How a job is judged where its series do not hold every rank's figures for the whole run (a
// run across nodes keeps each node's compactly and explains a stall on a window: fleet.h): the
// progress signal, progress in interval I (REPORTING: steps were reported by I), and the
// attribution of an incident found (its first and last intervals set) given the per-interval
// verdict. analyzeJob(series, config) is analyzeJob with chooseProgressSignal, progressAt and
// attributeIncident on SERIES.
struct Judging {
  ProgressSignal signal = ProgressSignal::kNone;
  std::function<std::optional<double>(size_t i, bool reporting)> progress;
  std::function<void(const std::vector<bool>& stalled, Incident& inc)> attribute;
};
Analysis analyzeJob(const JobSeries& series, const DetectorConfig& config, const Judging& judging);

// Whether the job's processes sat idle over INC: its workers' CPU and its reads near nothing
// (medians) and no thread waiting on I/O. A job winding down looks so; so does one hung with
// every thread asleep (a lock, a queue that is never fed). The post-mortem tells the two apart
// by the exit that follows; the live correlator, which cannot see the future, waits
// LiveConfig::idle_open_after_s before it calls it a hang.
bool processesIdle(const JobSeries& series, const Incident& inc);

// What says a job was held rather than winding down over INC: a process of it stopped (T), or
// threads in uninterruptible sleep (D) while it moved no bytes (reads and writes under 1 MB/s)
// for two intervals or more, stuck rather than flushing. A job that hangs at its end is a stall
// and is paged; a job winding down shows neither.
bool hangEvidence(const JobSeries& series, const Incident& inc);

// Whether the job's progress stopped entirely over INC (its median under
// config.stopped_share of the baseline INC was judged against), as at a job's exit; a
// slowdown keeps some. ANALYSIS: analyzeJob's, whose progress and baseline INC was found on.
bool progressStopped(const Analysis& analysis, const Incident& inc, const DetectorConfig& config);

// Whether the job kept working through INC as before it: its reads (over 1 MB/s before) or its
// workers' CPU (over 0.1 cores before) at half their level before or more. A job winding down
// stops both once its workers have finished the batches they had; a job still reading at its
// pace with its GPUs idle is held elsewhere, not exiting.
bool stillWorking(const JobSeries& series, const Analysis& analysis, const Incident& inc,
                  const DetectorConfig& config);

// Whether INC, as far as it has gone, can be the job's exit (the rule in DetectorConfig): a
// not-storage stall whose progress stopped, with no hang evidence, shorter than HOLD_S, and past
// its first SETTLE_S no longer working as before (stillWorking: the workers finish their
// prefetched batches in a job's first seconds of winding down). The post-mortem separates such a
// stall when the job then ended (SETTLE_S 0: judged over the whole span); the live correlator
// holds its page for as long, and an exit ends it unreported.
bool mayBeExit(const JobSeries& series, const Analysis& analysis, const Incident& inc,
               const DetectorConfig& config, double hold_s, double settle_s);

// Explains INC (its first and last intervals set) on SERIES: the cause, its evidence, and the
// straggler of a job of several ranks, each signal against its baseline over the intervals
// before INC that STALLED (analyzeJob's per-interval verdict) calls healthy. What analyzeJob
// does for every incident it finds; a report across nodes uses it to explain a window the whole
// job stalled in on the series of the node that held it back.
void attributeIncident(const JobSeries& series, const std::vector<bool>& stalled,
                       const DetectorConfig& config, Incident& inc);

// Adds the host's other devices to SERIES within WINDOWS (interval index ranges, inclusive),
// as devices the job does not read: evidence that a slow disk was the job's alone, or the
// whole host's. The post-mortem reads them from the recording, the live correlator from the
// host's recent disk samples.
using OtherDevices =
    std::function<void(JobSeries& series, const std::vector<std::pair<size_t, size_t>>& windows)>;

// Detection, then attribution with the other devices' samples around each incident (twice the
// baseline window before it): the live agent and the post-mortem make the same claim with the
// same evidence, and a week-long recording reads other disks only where there is a stall to
// explain. Detection does not look at devices, so both passes find the same incidents.
Analysis analyzeJobOnHost(JobSeries& series, const OtherDevices& other_devices,
                          const DetectorConfig& config = {});

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

// Whether INC's cause is storage and its evidence strong enough to report it at once: the
// job's reads sat at its cgroup's io.max limit, or its threads waited on I/O (D state) while a
// device it reads got slow (disk-slow), or several of them did under I/O pressure
// (io-throttled). The live correlator opens such a stall after strong_open_after_s.
bool strongStorageEvidence(const Incident& inc);

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
