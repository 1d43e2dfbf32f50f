// What the commands say, as records: a job's post-mortem report, a run's across nodes, and
// `top`'s screen data. The report library (report/) reads a recording (or a Prometheus server)
// and fills them, the verdicts' words included; render/ only formats them. Plain data: neither
// side needs the other's code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/analysis.h"
#include "model/fleet.h"
#include "model/limiter.h"
#include "model/recording.h"
#include "model/series.h"

namespace stallwatch::model {

// The standing verdict in words, as the correlator says it (describeLimiter, the one place they
// are made, for `jobs` too): the run's; each phase's, "it" for its span, in the order of
// JobLimits::phases (where there are none, the run's said so: the timeline's one band); each
// rank's, in the order of JobLimits::ranks.
struct LimiterWords {
  std::string run;
  std::vector<std::string> phases;
  std::vector<std::string> ranks;
};

// A device the job reads: its latency over the job's span, and the drive's recorded health.
struct DeviceRow : DeviceLatency {
  std::string health;  // the drive's verdict at the end of the job's span; "" if never read
  std::string health_evidence;  // its first counter, "ata 5 Reallocated_Sector_Ct raw 304"
  std::string served_by;        // a mount: "fuse: FUSE daemon slowfs (pid 81)"; "" for a device
};

struct JobReport {
  JobRecord job;
  JobSeries series;
  Analysis analysis;
  JobLimits limits;            // what limited the job over its run, its windows and phases
  LimiterWords limiter_words;  // LIMITS in words
  Goodput goodput;             // share of GPU (or step) capacity not lost to stalls
  std::vector<Gap> gaps;
  std::vector<DeviceRow> devices;  // the job's devices
  std::vector<RankFigures> ranks;
  // Each incident's ranks in words (correlator::rankSummary: the straggler and who waited), in
  // the order of analysis.incidents; "" for a job of one rank.
  std::vector<std::string> incident_ranks;
  // The progress judged by, per interval, where it is the least busy rank's GPU utilisation
  // (ProgressSignal::kSlowestRankGpuUtil); empty otherwise.
  Series slowest_rank_gpu_util;
  // What serves each storage target that is a mount (the recording's), by name.
  std::map<std::string, std::string> served_by;
  // Every I/O's latency over the job's span (the eBPF collector's; empty without it).
  std::vector<IoLatencySummary> io_latency;
};

// A job's standing verdict over its whole run, as `report` judges it, and in words (`jobs`).
struct JobVerdict {
  LimiterVerdict verdict;
  std::string words;
};

// The host over a range in which no job has samples: its series (devices and pressure) and
// each device's latency over it, in the order of series.devices.
struct HostReport {
  JobSeries series;
  std::vector<DeviceLatency> devices;
};

// A node of a run across nodes, as the report names it.
struct FleetReportNode {
  std::string name;  // its host, or host/file where two recordings name the same host
  std::string path;
  int64_t job_id = 0;
  std::vector<int32_t> ranks;
  uint32_t gpus = 0;
  size_t intervals = 0;
};

struct FleetReport {
  RunAcrossNodes run;
  std::vector<FleetReportNode> nodes;
  FleetAnalysis analysis;
  FleetLimiters limiters;  // in the order of NODES
  // From Prometheus: the server's values refused (not finite, negative) and slots two series
  // filled with values that disagree (kept as none).
  size_t server_values_refused = 0, server_values_disagreeing = 0;
  // From Prometheus: the step asked for (--prometheus-step) where coarser than the samples'
  // own spacing, and that spacing; a stall shorter than the step may be missed.
  int64_t step_ms = 0, data_step_ms = 0;
};

struct FleetInputs {
  std::vector<std::string> paths;     // the recordings read
  std::vector<std::string> problems;  // what could not be read, and why: said in the report
  size_t opened = 0;                  // recordings read
};

// What `top` shows at one moment (report/top_data.h reads it).
struct TopData {
  std::string host, db_path;
  int64_t now_ms = 0;
  std::vector<JobRecord> jobs;    // running first, then those that ended lately
  std::vector<JobSeries> series;  // each job's last minute, in the same order
  // What limits each job over that minute (a standing condition: not paged), in the same order;
  // none for a job with no samples in it.
  std::vector<std::optional<LimiterVerdict>> limiters;
  std::vector<StoredIncident> open;  // live incidents the agent has not closed
  std::map<std::string, std::string> served_by;
  // With no job: the host's devices and pressure over the last minute, as iostat would show.
  std::optional<JobSeries> host_series;
};

}  // namespace stallwatch::model
