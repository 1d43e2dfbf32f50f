#include "cli/report.h"

namespace stallwatch::cli {

using render::DeviceRow;
using render::JobReport;

namespace {

// A report over part of a run: its incidents judged over the hour before it and the ten
// minutes after (correlator::takeIncidentsFrom), as the whole run's report judges them.
void judgeInContext(storage::Recording& recording, JobReport& r, const storage::TimeRange& range) {
  constexpr int64_t kBeforeMs = 3'600'000, kAfterMs = 600'000;
  const storage::TimeRange around{
      range.since_ms ? std::optional(*range.since_ms - kBeforeMs) : std::nullopt,
      range.until_ms ? std::optional(*range.until_ms + kAfterMs) : std::nullopt};
  model::JobSeries series = recording.jobSeries(r.job, around);
  if (series.size() == 0) return;
  const auto context =
      correlator::summarizeRecordedJob(series, [&](model::JobSeries& s, const auto& windows) {
        recording.addOtherDevices(r.job, s, windows);
      });
  correlator::takeIncidentsFrom(context.analysis, series, r.analysis, r.series);
  r.limits = correlator::analyzeLimits(r.series, r.analysis);  // outside those incidents
  r.goodput = correlator::goodputOf(r.analysis, r.series, &r.limits.run);
}

}  // namespace

std::vector<JobReport> buildReports(storage::Recording& recording, std::optional<int64_t> job_id,
                                    const storage::TimeRange& range) {
  std::vector<JobReport> reports;
  const auto served_by = recording.mountTargetsServedBy();
  for (auto& job : recording.jobs(job_id)) {
    JobReport r;
    r.job = std::move(job);
    r.series = recording.jobSeries(r.job, range);
    if (r.series.size() == 0) continue;
    auto summary =
        correlator::summarizeRecordedJob(r.series, [&](model::JobSeries& s, const auto& windows) {
          recording.addOtherDevices(r.job, s, windows);
        });
    r.analysis = std::move(summary.analysis);
    r.limits = std::move(summary.limits);
    r.goodput = summary.goodput;
    if (range.since_ms || range.until_ms) judgeInContext(recording, r, range);
    r.gaps = std::move(summary.gaps);
    r.ranks = std::move(summary.ranks);
    r.served_by = served_by;
    r.io_latency = recording.ioLatency(
        r.job, r.series.ts_ms.front() - static_cast<int64_t>(r.series.interval_s.front() * 1000),
        r.series.ts_ms.back());
    for (auto& latency : summary.devices) {
      DeviceRow row{std::move(latency), "", "", ""};
      if (auto it = served_by.find(row.name); it != served_by.end()) row.served_by = it->second;
      if (const auto note = recording.driveHealthAt(row.name, r.series.ts_ms.back())) {
        row.health = note->verdict;
        row.health_evidence = note->first_evidence;
      }
      r.devices.push_back(std::move(row));
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

}  // namespace stallwatch::cli
