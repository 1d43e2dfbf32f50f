// What `stallwatch report` says about each job, as text, JSON or a self-contained HTML page,
// from the records the report library fills (model/report.h, report/job_report.h): the
// renderers format what they are given and compute no verdict.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/analysis.h"
#include "model/io_latency_histogram.h"
#include "model/limiter.h"
#include "model/report.h"

namespace stallwatch::render {

using model::DeviceRow;
using model::HostReport;
using model::JobReport;

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
std::string limiterLines(const model::JobLimits& limits, const model::LimiterWords& words);
// The headline figure and what the rest of the GPU time was lost to ("74.53 % (lost: ...)").
std::string goodputText(const model::Goodput& goodput, const model::Analysis& analysis);
std::string goodputLost(const model::Goodput& goodput, const model::Analysis& analysis);
nlohmann::json goodputJson(const model::Goodput& goodput);
std::string renderText(const std::vector<JobReport>& reports);
nlohmann::json renderJson(const std::vector<JobReport>& reports);
// HOST (may be null): the host over the range (report::buildHostReport), shown when no job has
// samples in it, so that a recording of devices alone still tells their story.
std::string renderHtml(const std::vector<JobReport>& reports, const std::string& title,
                       const HostReport* host = nullptr);
// "no job with samples in the range", and with HOST what its devices did (p50/p99 await).
std::string renderHostText(const HostReport& host);
// The same as JSON: each device's await p50/p99 (ms) over the range.
nlohmann::json hostDevicesJson(const HostReport& host);

}  // namespace stallwatch::render
