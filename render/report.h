// What `stallwatch report` says about each job, computed once (cli/report.cpp) and rendered as
// text, JSON or a self-contained HTML page. The renderers read these records only: commands
// wire storage and the correlator together, this folder says what they found.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "correlator/postmortem.h"
#include "model/limiter.h"
#include "storage/recording.h"

namespace stallwatch::render {

// A device the job reads: its latency over the job's span, and the drive's recorded health.
struct DeviceRow : correlator::DeviceLatency {
  std::string health;  // the drive's verdict at the end of the job's span; "" if never read
  std::string health_evidence;  // its first counter, "ata 5 Reallocated_Sector_Ct raw 304"
  std::string served_by;        // a mount: "fuse: FUSE daemon slowfs (pid 81)"; "" for a device
};

struct JobReport {
  storage::JobRecord job;
  model::JobSeries series;
  correlator::Analysis analysis;
  model::JobLimits limits;      // what limited the job over its run, its windows and phases
  correlator::Goodput goodput;  // share of GPU (or step) capacity not lost to stalls
  std::vector<correlator::Gap> gaps;
  std::vector<DeviceRow> devices;  // the job's devices
  std::vector<correlator::RankFigures> ranks;
  // What serves each storage target that is a mount (the recording's), by name.
  std::map<std::string, std::string> served_by;
  // Every I/O's latency over the job's span (the eBPF collector's; empty without it).
  std::vector<storage::IoLatencySummary> io_latency;
};

// "p50 0.16  p99 0.32  p99.9 1.68 ms" of SLOTS ("" for none).
std::string ioLatencyText(const model::IoLatencySlots& slots);

// A time as text output shows it: in the local zone (UTC with --utc), the zone said:
// "2026-11-22 03:37:19 UTC". The HTML page's times are UTC, said once in its headings (utcText).
std::string timeText(int64_t ms);
std::string utcText(int64_t ms);
std::string describeIncident(const model::Incident& inc);
nlohmann::json incidentJson(const model::Incident& inc);
// The bottleneck verdict as JSON, and as the report's lines ("  limiter     input-cpu: ...",
// its advice, its phases).
nlohmann::json limiterJson(const model::LimiterVerdict& verdict);
nlohmann::json limitsJson(const model::JobLimits& limits);
std::string limiterLines(const model::JobLimits& limits);
// The headline figure and what the rest of the GPU time was lost to ("74.53 % (lost: ...)").
std::string goodputText(const correlator::Goodput& goodput, const correlator::Analysis& analysis);
std::string goodputLost(const correlator::Goodput& goodput, const correlator::Analysis& analysis);
nlohmann::json goodputJson(const correlator::Goodput& goodput);
std::string renderText(const std::vector<JobReport>& reports);
nlohmann::json renderJson(const std::vector<JobReport>& reports);
// HOST (may be null): the host's own series (Recording::hostSeries), shown when no job has
// samples in the range, so that a recording of devices alone still tells their story.
std::string renderHtml(const std::vector<JobReport>& reports, const std::string& title,
                       const model::JobSeries* host = nullptr);
// "no job with samples in the range", and with HOST what its devices did (p50/p99 await).
std::string renderHostText(const model::JobSeries& host);
// The same as JSON: each device's await p50/p99 (ms) over the range.
nlohmann::json hostDevicesJson(const model::JobSeries& host);

}  // namespace stallwatch::render
