// The jobs collector's ranks: which of a synchronous job's processes belong to which rank, and
// each rank's main process and GPU (collectors/jobs/jobs.h says how a rank is found).
#include "collectors/jobs/jobs.h"

namespace stallwatch::collectors {

// Ranks: a process without RANK in its environment belongs to the rank of its parent;
// each rank's main process is its topmost one. Written when a rank appears or changes.
void JobTracker::assignRanks(Job& job) {
  if (!job.ranks_changed) return;
  bool grew = true;
  while (grew) {
    grew = false;
    for (auto& [pid, m] : job.members) {
      if (m.rank) continue;
      auto parent = job.members.find(m.stat.ppid);
      if (parent != job.members.end() && parent->second.rank) {
        m.rank = parent->second.rank;
        grew = true;
      }
    }
  }
}

void JobTracker::describeRanks(Job& job, SampleBatch& out) {
  if (!job.ranks_changed) return;
  job.ranks_changed = false;
  std::map<int32_t, RankDescription> now;
  for (const auto& [pid, m] : job.members) {
    if (!m.rank) continue;
    auto parent = job.members.find(m.stat.ppid);
    const bool top = parent == job.members.end() || parent->second.rank != m.rank;
    RankDescription& r = now[*m.rank];
    r.key = job.description.key;
    r.rank = *m.rank;
    if (top && (r.pid == 0 || pid < r.pid)) r.pid = pid;
    if (auto g = job.gpu_of_pid.find(pid); g != job.gpu_of_pid.end() && (r.gpu.empty() || top))
      r.gpu = g->second.first;
  }
  for (auto& [rank, r] : now) {
    auto was = job.ranks.find(rank);
    if (was != job.ranks.end() && was->second.pid == r.pid &&
        (was->second.gpu == r.gpu || r.gpu.empty()))
      continue;
    if (r.gpu.empty() && was != job.ranks.end()) r.gpu = was->second.gpu;
    job.ranks[rank] = r;
    out.rank_updates.push_back(r);
  }
}

}  // namespace stallwatch::collectors
