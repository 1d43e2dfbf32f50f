#include "storage/runs_across_nodes.h"

#include <algorithm>
#include <climits>
#include <map>

#include "model/run.h"

namespace stallwatch::storage {
namespace {

int64_t endOf(const JobRecord& job) { return job.ended_ms.value_or(INT64_MAX); }

}  // namespace

std::string runKeyOf(const JobRecord& job) { return model::runKeyOf(job.key, job.labels); }

std::vector<RunAcrossNodes> groupRuns(const std::vector<std::vector<JobRecord>>& per_recording) {
  std::map<std::string, std::vector<NodeJobRecord>> by_key;
  for (size_t r = 0; r < per_recording.size(); ++r) {
    for (const auto& job : per_recording[r]) {
      if (auto key = runKeyOf(job); !key.empty()) by_key[key].push_back({r, job});
    }
  }
  std::vector<RunAcrossNodes> runs;
  for (auto& [key, jobs] : by_key) {
    std::sort(jobs.begin(), jobs.end(),
              [](const auto& a, const auto& b) { return a.job.started_ms < b.job.started_ms; });
    // Sweep: a job that starts before the current run's span ends joins it.
    std::vector<std::vector<NodeJobRecord>> clusters;
    int64_t reach = INT64_MIN;
    for (auto& j : jobs) {
      if (clusters.empty() || j.job.started_ms > reach) clusters.emplace_back();
      reach = clusters.back().empty() ? endOf(j.job) : std::max(reach, endOf(j.job));
      clusters.back().push_back(std::move(j));
    }
    for (auto& cluster : clusters) {
      RunAcrossNodes run;
      run.key = key;
      run.from_ms = INT64_MAX;
      run.to_ms = INT64_MIN;
      std::map<size_t, NodeJobRecord> longest;
      for (auto& j : cluster) {
        run.from_ms = std::min(run.from_ms, j.job.started_ms);
        run.to_ms = std::max(run.to_ms, endOf(j.job));
        if (!run.world_size) run.world_size = model::worldSizeOf(j.job.labels);
        auto [it, fresh] = longest.try_emplace(j.recording, j);
        if (fresh) continue;
        ++run.skipped_restarts;
        auto span = [](const JobRecord& x) { return endOf(x) - x.started_ms; };
        if (span(j.job) > span(it->second.job)) it->second = j;
      }
      for (auto& [r, j] : longest) run.jobs.push_back(std::move(j));
      runs.push_back(std::move(run));
    }
  }
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.from_ms < b.from_ms; });
  return runs;
}

}  // namespace stallwatch::storage
