#include "correlator/fleet.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "correlator/evidence.h"
#include "correlator/fleet_clocks.h"
#include "correlator/fleet_grid.h"
#include "correlator/postmortem.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;

// Runs WORK(i) for i in 0..COUNT on THREADS threads; the first exception is rethrown.
void forEachParallel(size_t count, unsigned threads, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::exception_ptr failed;
  std::mutex failed_mutex;
  auto run = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        work(i);
      } catch (...) {
        const std::lock_guard lock(failed_mutex);
        if (!failed) failed = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::max(1u, threads) && t < count; ++t) pool.emplace_back(run);
  run();
  for (auto& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
}

// Node N's interval indices within [from_ms, to_ms] of its own clock: the intervals that end
// after FROM_MS and by TO_MS.
std::optional<std::pair<size_t, size_t>> indicesWithin(const JobSeries& s, int64_t from_ms,
                                                       int64_t to_ms) {
  const auto first = std::upper_bound(s.ts_ms.begin(), s.ts_ms.end(), from_ms);
  const auto end = std::upper_bound(s.ts_ms.begin(), s.ts_ms.end(), to_ms);
  if (first >= end) return std::nullopt;
  return std::pair{static_cast<size_t>(first - s.ts_ms.begin()),
                   static_cast<size_t>(end - s.ts_ms.begin()) - 1};
}

// Explains the job's stall INC on node N's own series.
// N: the node's index among those judged; GIVEN: among those given.
std::optional<NodeCause> explainOnNode(size_t n, size_t given, const Incident& inc,
                                       int64_t offset_ms, int64_t grid_ms, const NodeWindow& window,
                                       const DetectorConfig& cfg) {
  if (!window) return std::nullopt;
  const int64_t margin = static_cast<int64_t>(cfg.baseline_intervals) * 2 * grid_ms;
  const int64_t from = inc.start_ms + offset_ms, to = inc.end_ms + offset_ms + grid_ms / 2;
  JobSeries s = window(given, from - margin, to);
  const auto span = indicesWithin(s, from, to);
  if (!span) return std::nullopt;
  const Analysis own = analyzeJob(s, cfg);
  NodeCause cause{n, {}};
  cause.incident.first = span->first;
  cause.incident.last = span->second;
  cause.incident.start_ms = inc.start_ms;
  cause.incident.end_ms = inc.end_ms;
  attributeIncident(s, own.stalled, cfg, cause.incident);
  return cause;
}

// The class and device the job's stall is put down to: the straggler's, or what most of the
// nodes that starved alike said (a device only when they all named the same one: a shared
// mount).
void takeCause(const std::vector<NodeCause>& causes, Incident& inc) {
  if (causes.empty()) return;
  std::map<StallClass, size_t> votes;
  for (const auto& c : causes) ++votes[c.incident.cls];
  const auto top = std::max_element(
      votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  const Incident* first = nullptr;
  bool same_device = true;
  for (const auto& c : causes) {
    if (c.incident.cls != top->first) continue;
    if (!first) first = &c.incident;
    same_device = same_device && c.incident.device == first->device;
  }
  inc.cls = first->cls;
  inc.confidence = first->confidence;
  inc.device = same_device ? first->device : std::string();
  inc.physical_device = same_device ? first->physical_device : std::string();
}

std::vector<int32_t> missingRanks(const std::vector<int32_t>& ranks,
                                  std::optional<int32_t> world_size) {
  std::vector<int32_t> missing;
  if (!world_size || *world_size <= 0) return missing;
  const std::set<int32_t> held(ranks.begin(), ranks.end());
  for (int32_t r = 0; r < *world_size; ++r) {
    if (!held.count(r)) missing.push_back(r);
  }
  return missing;
}

// The job judged on the grid (F's series and node columns): its progress signal, its stalls,
// each attributed on a window of the nodes' figures (the intervals the baseline is taken over,
// and the stall's), and its progress at each interval.
void judgeOnGrid(FleetAnalysis& f, const DetectorConfig& cfg) {
  const JobSeries& s = f.series;
  const auto any = [](const Series& x) {
    return std::any_of(x.begin(), x.end(), [](const auto& v) { return v.has_value(); });
  };
  const size_t nodes_with_gpu = static_cast<size_t>(
      std::count_if(f.columns.begin(), f.columns.end(), [](const NodeColumns& c) {
        const auto& v = c.values[NodeColumns::kGpuUtil];
        return std::any_of(v.begin(), v.end(), [](float x) { return !std::isnan(x); });
      }));
  const bool gpus = s.gpu_count > 0;
  Judging judging;
  judging.signal = progressSignalFrom(any(s.steps), gpus && any(s.gpu_work_percent),
                                      gpus ? nodes_with_gpu : 0, gpus && any(s.gpu_util_percent));
  judging.progress = [&](size_t i, bool reporting) -> std::optional<double> {
    if (judging.signal != model::ProgressSignal::kSlowestRankGpuUtil)
      return progressAt(s, i, judging.signal, reporting);
    std::optional<double> slowest;
    for (const NodeColumns& c : f.columns) {
      if (const auto u = c.at(NodeColumns::kGpuUtil, i); u && (!slowest || *u < *slowest))
        slowest = u;
    }
    return slowest;
  };
  judging.attribute = [&](const std::vector<bool>& stalled, Incident& inc) {
    const size_t from = inc.first > cfg.baseline_intervals ? inc.first - cfg.baseline_intervals : 0;
    const JobSeries w = fleet::windowOf(f, from, inc.last);
    const std::vector<bool> stalled_w(stalled.begin() + static_cast<long>(from),
                                      stalled.begin() + static_cast<long>(inc.last) + 1);
    const size_t first = inc.first, last = inc.last;
    inc.first -= from;
    inc.last -= from;
    attributeIncident(w, stalled_w, cfg, inc);
    inc.first = first;
    inc.last = last;
  };
  f.analysis = analyzeJob(s, cfg, judging);
  f.progress.resize(s.size());
  bool reporting = false;
  for (size_t i = 0; i < s.size(); ++i) {
    reporting = reporting || at(s.steps, i).has_value();
    f.progress[i] = judging.progress(i, reporting);
  }
}

// One of the job's stalls explained on its nodes: which node held the others back (or which
// starved), the ranks on each side, the cause their own series give, and what the others lost
// waiting.
FleetIncident explainOnNodes(const FleetAnalysis& f, const Incident& job_inc,
                             const std::vector<FleetNode>& nodes, const NodeWindow& window,
                             const DetectorConfig& cfg) {
  FleetIncident fi;
  fi.incident = job_inc;
  Incident& inc = fi.incident;
  // The job's "ranks" are its nodes, numbered by index: name the ranks they ran instead.
  if (inc.straggler) fi.straggler_node = static_cast<size_t>(inc.straggler->rank);
  for (int32_t n : inc.ranks_starved) fi.starved_nodes.push_back(static_cast<size_t>(n));
  // Neither one node nor a set of them stood out (one node recorded, the others missing; or
  // all alike): each node's own series explains it, where they are few enough to read
  // (issue 46: a lone node's own slow disk was called "not-storage").
  constexpr size_t kExplainAllUpTo = 16;
  if (!fi.straggler_node && fi.starved_nodes.empty() && nodes.size() <= kExplainAllUpTo) {
    for (size_t n = 0; n < nodes.size(); ++n) fi.starved_nodes.push_back(n);
  }
  inc.straggler.reset();
  inc.ranks_starved.clear();
  inc.waiting_ranks.clear();
  for (size_t n = 0; n < nodes.size(); ++n) {
    const bool starved = fi.straggler_node
                             ? n == *fi.straggler_node
                             : std::count(fi.starved_nodes.begin(), fi.starved_nodes.end(), n) > 0;
    auto& into = starved ? inc.ranks_starved : inc.waiting_ranks;
    into.insert(into.end(), nodes[n].ranks.begin(), nodes[n].ranks.end());
  }
  std::vector<size_t> explain = fi.starved_nodes;
  if (fi.straggler_node) explain = {*fi.straggler_node};
  for (size_t n : explain) {
    const int64_t offset = f.clocks[n].appliedOffsetMs();
    if (auto c = explainOnNode(n, f.nodes[n], inc, offset, f.grid_ms, window, cfg))
      fi.causes.push_back(std::move(*c));
  }
  // The job's own attribution had no devices to look at: only its per-node comparisons stay.
  std::vector<EvidenceItem> per_node;
  for (auto& e : inc.evidence) {
    if (e.name.scope == model::EvidenceScope::kNode) per_node.push_back(e);
  }
  inc.evidence = std::move(per_node);
  inc.cls = StallClass::kNotStorage;
  inc.device.clear();
  inc.physical_device.clear();
  takeCause(fi.causes, inc);
  if (fi.straggler_node) {
    const FleetNode& node = nodes[*fi.straggler_node];
    // The rank that held the job back: the node's own straggler if it ran several ranks,
    // else its one rank.
    if (!fi.causes.empty() && fi.causes.front().incident.straggler) {
      inc.straggler = fi.causes.front().incident.straggler;
    } else if (node.ranks.size() == 1) {
      inc.straggler = Straggler{node.ranks.front(), node.pid, node.gpu};
    }
    inc.ranks_starved.clear();
    if (inc.straggler) {
      // Its node's other ranks waited too.
      inc.waiting_ranks.clear();
      for (const FleetNode& other : nodes) {
        for (int32_t k : other.ranks) {
          if (k != inc.straggler->rank) inc.waiting_ranks.push_back(k);
        }
      }
      std::sort(inc.waiting_ranks.begin(), inc.waiting_ranks.end());
    }
    if (!fi.causes.empty()) {
      for (const auto& e : fi.causes.front().incident.evidence) inc.evidence.push_back(e);
    }
  }
  double duration = 0, other_gpus = 0;
  for (size_t k = inc.first; k <= inc.last; ++k) duration += f.series.interval_s[k];
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!fi.straggler_node || n != *fi.straggler_node) other_gpus += nodes[n].gpu_count;
  }
  if (fi.straggler_node) {
    fi.others_waited_s = duration;
    fi.others_gpu_seconds = duration * other_gpus * inc.idle_share;
  }
  return fi;
}

}  // namespace

FleetAnalysis analyzeFleet(const std::vector<FleetNode>& given, const NodeReader& read,
                           const NodeWindow& window, std::optional<int32_t> world_size,
                           const FleetOptions& options) {
  const DetectorConfig& cfg = options.detector;
  FleetAnalysis f;
  // Pass one: every node's progress, to line up their clocks; the nodes without samples in the
  // range are not judged.
  std::vector<fleet::ClockTrack> tracks(given.size());
  forEachParallel(given.size(), options.threads,
                  [&](size_t n) { tracks[n] = fleet::readProgress(n, read); });
  std::vector<FleetNode> nodes;  // the judged, by index among them
  {
    std::vector<fleet::ClockTrack> judged;
    for (size_t n = 0; n < given.size(); ++n) {
      if (!tracks[n].count) continue;
      f.nodes.push_back(n);
      f.samples.push_back(tracks[n].count);
      nodes.push_back(given[n]);
      judged.push_back(std::move(tracks[n]));
    }
    tracks = std::move(judged);
  }
  {
    std::vector<int32_t> held;
    for (const auto& n : nodes) held.insert(held.end(), n.ranks.begin(), n.ranks.end());
    f.missing_ranks = missingRanks(held, world_size);
  }
  if (nodes.empty()) return f;
  size_t clock_bytes = 0;
  for (const auto& t : tracks) clock_bytes += t.bytes();
  f.interval_ms = fleet::medianInterval(tracks[0]);
  const fleet::ClockSignal signal = fleet::chooseClockSignal(tracks);
  f.clock_signal = fleet::nameOf(signal);
  f.clocks = fleet::checkClocks(tracks, nodes, signal, f.interval_ms);
  const fleet::GridPlacement place = fleet::placeOnGrid(tracks, f.clocks, f.interval_ms);
  tracks = {};
  // The grid: the recordings' interval, coarsened as far as the bound asks.
  const size_t fine_slots = static_cast<size_t>((place.t1 - place.t0) / f.interval_ms + 1);
  const size_t per_slot = fleet::bytesPerSlot(nodes.size());
  const size_t factor = fleet::coarsening(fine_slots, per_slot, options.max_series_bytes);
  f.grid_ms = f.interval_ms * static_cast<int64_t>(factor);
  const size_t slots =
      static_cast<size_t>((place.t1 - place.t0 + f.interval_ms / 2) / f.grid_ms + 1);
  f.series_bytes = std::max(clock_bytes, slots * per_slot);

  // Pass two: each node merged onto the grid as it is read.
  f.columns.resize(nodes.size());
  {
    fleet::JobSlots job(slots);
    std::mutex job_lock;
    std::vector<size_t> merged(nodes.size(), 0);
    forEachParallel(nodes.size(), options.threads, [&](size_t n) {
      fleet::mergeNode(f.nodes[n], read, place.shift_ms[n], place.t0, f.interval_ms, factor,
                       std::max<double>(1.0, nodes[n].gpu_count), f.columns[n], job, job_lock,
                       merged[n]);
    });
    fleet::buildSeries(f, job, nodes, place.t0, place.shown_ms);
  }

  judgeOnGrid(f, cfg);
  // The stalls alone until the nodes' standing verdicts are in (fleet_limiters).
  f.goodput = goodputOf(f.analysis, f.series, nullptr);
  for (const Incident& job_inc : f.analysis.incidents)
    f.incidents.push_back(explainOnNodes(f, job_inc, nodes, window, cfg));
  // The nodes' own series gave each stall its class (above), replacing the job-level one: the
  // GPU-seconds lost by class follow, so that the goodput's "lost:" names what the stalls say
  // (it said io-throttled beside a disk-slow stall on a two-node run).
  std::fill(std::begin(f.analysis.gpu_seconds_lost), std::end(f.analysis.gpu_seconds_lost), 0.0);
  for (const FleetIncident& fi : f.incidents)
    f.analysis.gpu_seconds_lost[static_cast<size_t>(fi.incident.cls)] +=
        fi.incident.gpu_seconds_lost;
  return f;
}

FleetAnalysis analyzeFleet(std::vector<NodeJob> nodes, const NodeWindow& window,
                           std::optional<int32_t> world_size, const DetectorConfig& config) {
  std::vector<FleetNode> given;
  for (const NodeJob& n : nodes) {
    FleetNode g{n.node, n.ranks, n.summary.gpu_count, 0, {}};
    if (!n.summary.ranks.empty()) {
      g.pid = n.summary.ranks.front().pid;
      g.gpu = n.summary.ranks.front().gpu;
    }
    given.push_back(std::move(g));
  }
  auto read = [&](size_t n, model::NodeSampleFields fields, const model::NodeSampleSink& sink) {
    JobSeries& s = nodes[n].summary;
    for (size_t i = 0; i < s.size(); ++i) sink(model::nodeSampleAt(s, i));
    // Merged: a day of a node's samples is tens of MB, and sixteen nodes' add up.
    if (fields == model::NodeSampleFields::kAll) s = JobSeries{};
  };
  FleetOptions options;
  options.detector = config;
  options.threads = 1;  // in memory: nothing to wait for
  return analyzeFleet(given, read, window, world_size, options);
}

}  // namespace stallwatch::correlator
