#include "correlator/straggler.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "correlator/evidence.h"

namespace stallwatch::correlator {

using evidence::at;
using evidence::Check;
using evidence::compare;
using evidence::waitShareAt;
using Metric = model::EvidenceMetric;
using Scope = model::EvidenceScope;

// The signals findStraggler adds for each rank ("NAME rank N"): not what decided the class.
constexpr Metric kPerRankSignals[] = {Metric::kGpuUtilPercent, Metric::kDataWaitShare,
                                      Metric::kCgroupReadShareOfIoMax, Metric::kDStateThreads,
                                      Metric::kCgroupCpuThrottledShare};

// A rank's cgroup reading at this share of its io.max limit or more is held by it.
constexpr double kRankAtLimitShare = 0.8;

// Which rank held a synchronous job back during the incident. A starving rank's GPU goes
// idle while the others spin inside the collective that waits for it (their utilisation stays
// high), and its data wait rises while theirs does not. One starving rank is the straggler;
// several (a shared disk got slow for all) are said as such, with no single straggler.
// Returns the straggler's index in s.ranks.
std::optional<size_t> findStraggler(const JobSeries& s, const DetectorConfig& cfg,
                                    const std::vector<size_t>& base, Incident& inc) {
  struct Judged {
    bool idle = false, busy = false, waits = false;
  };
  std::vector<Judged> judged(s.ranks.size());
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    const RankSeries& rank = s.ranks[r];
    // Across nodes each "rank" stands for a node (its slowest rank): named by its host.
    const Scope scope = rank.node.empty() ? Scope::kRank : Scope::kNode;
    const std::string who = rank.node.empty() ? std::to_string(rank.rank) : rank.node;
    Check util = compare(
        {Metric::kGpuUtilPercent, scope, who, ""}, base, inc.first, inc.last,
        [&](size_t i) { return at(rank.gpu_util_percent, i); }, true, 1.0, 0, 0);
    if (util.item.baseline > 0) {
      judged[r].idle = util.item.during < cfg.rank_idle_ratio * util.item.baseline &&
                       util.item.baseline - util.item.during >= cfg.min_gpu_drop_points;
      judged[r].busy = util.item.during >= cfg.rank_busy_ratio * util.item.baseline;
    }
    util.item.supports = judged[r].idle;
    add(util);
    const Check wait = compare(
        {Metric::kDataWaitShare, scope, who, ""}, base, inc.first, inc.last,
        [&](size_t i) { return waitShareAt(rank.data_wait_s, s.interval_s, i); }, false,
        cfg.rank_wait_rise, 0, 0);
    if (wait.share_of_intervals > 0 || wait.item.during > 0) {
      judged[r].waits = wait.item.supports;
      add(wait);
    }
  }
  // Each rank's own evidence, beside the GPU and wait signals, which fail where ranks share a
  // GPU (both idle alike) or do not report: its cgroup's reads at their io.max limit, its
  // threads waiting on I/O, its CPU quota throttling it.
  std::vector<size_t> with_evidence;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    const RankSeries& rank = s.ranks[r];
    const Scope scope = rank.node.empty() ? Scope::kRank : Scope::kNode;
    const std::string who = rank.node.empty() ? std::to_string(rank.rank) : rank.node;
    bool own = false;
    auto limitShare = [&](size_t i) -> std::optional<double> {
      const auto got = at(rank.cgroup_limited_read_bytes_per_s, i);
      const auto limit = at(rank.cgroup_read_limit_bytes_per_s, i);
      if (!got || !limit || *limit <= 0) return std::nullopt;
      return *got / *limit;
    };
    Check limit = compare({Metric::kCgroupReadShareOfIoMax, scope, who, ""}, base, inc.first,
                          inc.last, limitShare, false, 0.3, 0, kRankAtLimitShare);
    if (limit.share_of_intervals > 0 || limit.item.during > 0) {
      add(limit);
      own = own || limit.item.supports;
    }
    const Check dstate = compare(
        {Metric::kDStateThreads, scope, who, ""}, base, inc.first, inc.last,
        [&](size_t i) { return at(rank.d_state_threads, i); }, false, 1.0, 0, 1.0);
    if (dstate.item.during > 0 || dstate.item.baseline > 0) {
      add(dstate);
      own = own || dstate.item.supports;
    }
    const Check throttled = compare(
        {Metric::kCgroupCpuThrottledShare, scope, who, ""}, base, inc.first, inc.last,
        [&](size_t i) { return at(rank.cgroup_cpu_throttled, i); }, false, cfg.pressure_rise, 0, 0);
    if (throttled.item.during > 0) {
      add(throttled);
      own = own || throttled.item.supports;
    }
    if (own) with_evidence.push_back(r);
  }
  // A rank that starves reports its data wait only when the batch finally comes (a blocked
  // loop sends nothing), so early in a stall there may be no wait figures at all: then the
  // GPUs' idling decides. Either is enough. Where the ranks' own evidence singles one out, it
  // decides: "starved alike" only when the evidence is alike.
  std::vector<size_t> starved;
  if (with_evidence.size() == 1) {
    starved = with_evidence;
  } else {
    for (size_t r = 0; r < s.ranks.size(); ++r) {
      const bool others_busy = std::any_of(judged.begin(), judged.end(), [&](const Judged& j) {
        return &j != &judged[r] && j.busy;
      });
      if (judged[r].waits || (judged[r].idle && others_busy)) starved.push_back(r);
    }
  }
  if (starved.size() == 1) {
    const RankSeries& st = s.ranks[starved.front()];
    inc.straggler = Straggler{st.rank, st.pid, st.gpu};
    for (const RankSeries& r : s.ranks) {
      if (r.rank != st.rank) inc.waiting_ranks.push_back(r.rank);
    }
    return starved.front();
  }
  // Every rank (or several) starved alike, or none stood out: no single straggler.
  if (starved.size() > 1) {
    for (size_t r : starved) inc.ranks_starved.push_back(s.ranks[r].rank);
  } else {
    for (const RankSeries& r : s.ranks) inc.ranks_starved.push_back(r.rank);
  }
  return std::nullopt;
}

JobSeries throughRank(const JobSeries& s, const RankSeries& r) {
  JobSeries v;
  v.ts_ms = s.ts_ms;
  v.interval_s = s.interval_s;
  v.gpu_count = s.gpu_count;
  v.io_some = s.io_some;
  v.cpu_some = s.cpu_some;
  // The job's cgroup figures: the cgroup nearest its limit is the starving rank's, where the
  // ranks have one each.
  v.cgroup_io_some = s.cgroup_io_some;
  v.cgroup_cpu_some = s.cgroup_cpu_some;
  v.cgroup_memory_some = s.cgroup_memory_some;
  v.cgroup_cpu_throttled = s.cgroup_cpu_throttled;
  v.cgroup_limited_read_bytes_per_s = s.cgroup_limited_read_bytes_per_s;
  v.cgroup_read_limit_bytes_per_s = s.cgroup_read_limit_bytes_per_s;
  v.cgroup_limits = s.cgroup_limits;
  v.cgroup_read_limit = s.cgroup_read_limit;
  // Its own cgroup's figures where the ranks have their own (the job's are the nearest-limit
  // cgroup's, which may be another rank's).
  auto any = [](const Series& x) {
    return std::any_of(x.begin(), x.end(), [](const auto& value) { return value.has_value(); });
  };
  if (any(r.cgroup_read_limit_bytes_per_s) || any(r.cgroup_io_some)) {
    v.cgroup_limited_read_bytes_per_s = r.cgroup_limited_read_bytes_per_s;
    v.cgroup_read_limit_bytes_per_s = r.cgroup_read_limit_bytes_per_s;
    v.cgroup_cpu_throttled = r.cgroup_cpu_throttled;
    v.cgroup_io_some = r.cgroup_io_some;
  }
  v.neighbour_io = s.neighbour_io;
  v.sleep_wchan = s.sleep_wchan;
  v.devices = s.devices;
  v.write_bytes_per_s = r.write_bytes_per_s;
  v.read_bytes_per_s = r.read_bytes_per_s;
  v.d_state_threads = r.d_state_threads;
  v.workers_cpu = r.workers_cpu;
  v.main_cpu = r.main_cpu;
  v.stopped_processes = r.stopped_processes;
  v.workers = r.workers;
  return v;
}

std::string rankSummary(const Incident& inc) {
  auto list = [](const std::vector<int32_t>& ranks) {
    std::string out;
    for (int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
  };
  if (!inc.straggler) {
    if (inc.ranks_starved.empty()) return {};
    return (inc.ranks_starved.size() == 1 ? "rank " : "ranks ") + list(inc.ranks_starved) +
           " starved alike: no single straggler";
  }
  const Straggler& st = *inc.straggler;
  std::string out = "rank " + std::to_string(st.rank) + " (pid " + std::to_string(st.pid) +
                    (st.gpu.empty() ? "" : ", " + st.gpu.substr(0, 12)) +
                    ") starved: " + toString(inc.cls);
  if (!inc.device.empty()) {
    out +=
        " " + inc.device + (inc.physical_device.empty() ? "" : " (on " + inc.physical_device + ")");
  }
  // The first signal that decided the class, not a per-rank one.
  for (const auto& e : inc.evidence) {
    const bool per_rank = std::any_of(
        std::begin(kPerRankSignals), std::end(kPerRankSignals),
        [&](Metric metric) { return e.name.scope == Scope::kRank && e.name.metric == metric; });
    if (!e.supports || per_rank) {
      continue;
    }
    char figures[96];
    std::snprintf(figures, sizeof figures, " %.3g -> %.3g", e.baseline, e.during);
    out += ", " + e.signal + figures;
    break;
  }
  if (!inc.waiting_ranks.empty()) {
    out += "; rank" + std::string(inc.waiting_ranks.size() == 1 ? " " : "s ") +
           list(inc.waiting_ranks) + " waited";
  }
  return out;
}

std::string stallRankLabel(const Incident& inc) {
  if (inc.straggler) return std::to_string(inc.straggler->rank);
  return inc.ranks_starved.empty() ? "" : "all";
}

}  // namespace stallwatch::correlator
