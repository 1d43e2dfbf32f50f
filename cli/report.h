// What `stallwatch report` says about each job, computed once and rendered as text, JSON or
// a self-contained HTML page.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "correlator/stall_detector.h"
#include "storage/job_series.h"

namespace stallwatch::cli {

struct DeviceLatency {
  std::string name;
  std::string via;
  bool job_reads = false;
  bool also_direct = false;
  std::optional<double> r_await_p50, r_await_p99, w_await_p50, w_await_p99;
  std::string health;  // the drive's verdict at the end of the job's span; "" if never read
  std::string health_evidence;  // its first counter, "ata 5 Reallocated_Sector_Ct raw 304"
};

struct JobReport {
  storage::JobRecord job;
  model::JobSeries series;
  correlator::Analysis analysis;
  std::vector<DeviceLatency> devices;  // the job's devices
  double goodput = 1.0;                // share of GPU (or step) capacity not lost to stalls
  // Holes in the job's samples: the agent stopped, or dropped intervals it could not write.
  struct Gap {
    int64_t start_ms = 0, end_ms = 0;
    int64_t missing_intervals = 0;
  };
  std::vector<Gap> gaps;
};

std::vector<JobReport> buildReports(SQLite::Database& db, std::optional<int64_t> job_id,
                                    const storage::TimeRange& range);

std::string timeText(int64_t ms);
std::string describeIncident(const model::Incident& inc);
nlohmann::json incidentJson(const model::Incident& inc);
std::string renderText(const std::vector<JobReport>& reports);
nlohmann::json renderJson(const std::vector<JobReport>& reports);
std::string renderHtml(const std::vector<JobReport>& reports, const std::string& title);

}  // namespace stallwatch::cli
