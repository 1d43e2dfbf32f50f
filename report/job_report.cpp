#include "report/job_report.h"

#include <map>
#include <string>
#include <utility>

#include "correlator/limiter.h"
#include "correlator/postmortem.h"
#include "correlator/stall_detector.h"

namespace stallwatch::report {

using model::DeviceRow;
using model::JobReport;

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

// What the renderers say that is worked out rather than read: the verdicts in words, each
// device's latency, each incident's ranks, the least busy rank's GPU where that is the progress.
void sayVerdicts(JobReport& r) {
  r.limiter_words.run = correlator::describeLimiter(r.limits.run);
  for (const auto& p : r.limits.phases.empty() ? std::vector{r.limits.run} : r.limits.phases)
    r.limiter_words.phases.push_back(correlator::describeLimiter(p, "it"));
  for (const auto& rank : r.limits.ranks)
    r.limiter_words.ranks.push_back(correlator::describeLimiter(rank.verdict));
  for (const auto& inc : r.analysis.incidents)
    r.incident_ranks.push_back(correlator::rankSummary(inc));
  if (r.analysis.progress_signal == model::ProgressSignal::kSlowestRankGpuUtil) {
    r.slowest_rank_gpu_util.resize(r.series.size());
    for (size_t i = 0; i < r.series.size(); ++i) {
      r.slowest_rank_gpu_util[i] =
          correlator::progressAt(r.series, i, model::ProgressSignal::kSlowestRankGpuUtil, false);
    }
  }
}

}  // namespace

std::vector<JobReport> buildJobReports(storage::Recording& recording, std::optional<int64_t> job_id,
                                       const storage::TimeRange& range) {
  std::vector<JobReport> reports;
  const auto served_by = recording.mountTargetsServedBy();
  for (auto& job : recording.jobs(job_id)) {
    JobReport r;
    r.job = std::move(job);
    // What the report needs of the recording, read before the judgement (which reads the host's
    // other devices itself, only around the incidents it finds): the series, every I/O's
    // latency over its span and the health of the drives it reads.
    r.series = recording.jobSeries(r.job, range);
    if (r.series.size() == 0) continue;
    r.served_by = served_by;
    r.io_latency = recording.ioLatency(
        r.job, r.series.ts_ms.front() - static_cast<int64_t>(r.series.interval_s.front() * 1000),
        r.series.ts_ms.back());
    std::map<std::string, storage::DriveHealthNote> health;
    for (const auto& d : r.series.devices) {
      if (!d.job_reads) continue;
      if (auto note = recording.driveHealthAt(d.name, r.series.ts_ms.back()))
        health.emplace(d.name, std::move(*note));
    }
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
    for (auto& latency : summary.devices) {
      DeviceRow row{std::move(latency), "", "", ""};
      if (auto it = served_by.find(row.name); it != served_by.end()) row.served_by = it->second;
      if (auto it = health.find(row.name); it != health.end()) {
        row.health = it->second.verdict;
        row.health_evidence = it->second.first_evidence;
      }
      r.devices.push_back(std::move(row));
    }
    sayVerdicts(r);
    reports.push_back(std::move(r));
  }
  return reports;
}

model::JobVerdict standingVerdict(storage::Recording& recording, const model::JobRecord& job) {
  model::JobVerdict out;
  model::JobSeries series = recording.jobSeries(job, {});
  if (series.size() > 0) {
    const model::Analysis analysis = correlator::analyzeJob(series);
    out.verdict = correlator::analyzeLimits(series, analysis).run;
  }
  out.words = correlator::describeLimiter(out.verdict);
  return out;
}

std::vector<model::StoredIncident> postMortemIncidents(storage::Recording& recording,
                                                       std::optional<int64_t> job_id) {
  std::vector<model::StoredIncident> out;
  for (const auto& job : recording.jobs(job_id)) {
    auto series = recording.jobSeries(job, {});
    if (series.size() == 0) continue;
    const auto analysis =
        correlator::analyzeJobOnHost(series, [&](model::JobSeries& s, const auto& windows) {
          recording.addOtherDevices(job, s, windows);
        });
    for (const auto& inc : analysis.incidents)
      out.push_back({0, job.job_id, job.label, inc, "post-mortem", 0});
  }
  return out;
}

model::HostReport buildHostReport(storage::Recording& recording, const storage::TimeRange& range) {
  model::HostReport host;
  host.series = recording.hostSeries(range);
  for (const auto& d : host.series.devices) host.devices.push_back(correlator::deviceLatency(d));
  return host;
}

}  // namespace stallwatch::report
