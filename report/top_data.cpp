#include "report/top_data.h"

#include <algorithm>
#include <utility>

#include "correlator/limiter.h"

namespace stallwatch::report {

namespace {

constexpr int64_t kRecentMs = 60'000;  // ended jobs and open incidents shown this long

}  // namespace

model::TopData readTop(storage::Recording& recording, int64_t now_ms) {
  model::TopData d;
  d.now_ms = now_ms;
  d.db_path = recording.path();
  d.host = recording.hostName();
  d.served_by = recording.mountTargetsServedBy();
  auto jobs = recording.jobs();
  // As of NOW_MS (a past time too): started by then, and not ended a minute before it.
  std::erase_if(jobs, [&](const model::JobRecord& j) {
    return j.started_ms > now_ms || (j.ended_ms && *j.ended_ms < now_ms - kRecentMs);
  });
  for (auto& j : jobs) {
    if (j.ended_ms && *j.ended_ms > now_ms) j.ended_ms.reset();  // still running then
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
    return !a.ended_ms && b.ended_ms;  // running first
  });
  const storage::TimeRange range{now_ms - kRecentMs, now_ms};
  for (auto& job : jobs) {
    d.series.push_back(recording.jobSeries(job, range));
    const model::JobSeries& s = d.series.back();
    d.limiters.push_back(s.size() > 0 ? std::optional(correlator::judgeSpan(s, 0, s.size() - 1))
                                      : std::nullopt);
    d.jobs.push_back(std::move(job));
  }
  for (auto& inc : recording.openIncidents(now_ms)) {
    if (inc.incident.end_ms >= now_ms - kRecentMs) d.open.push_back(std::move(inc));
  }
  if (d.jobs.empty()) d.host_series = recording.hostSeries(range);
  return d;
}

}  // namespace stallwatch::report
