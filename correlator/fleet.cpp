#include "correlator/fleet.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "correlator/evidence.h"
#include "correlator/postmortem.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;

constexpr size_t kMinClockOverlap = 30;  // intervals both nodes have, to compare clocks on
constexpr double kMinClockMatch = 0.6;   // correlation below this: the clocks cannot be told

int64_t medianOf(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

int64_t positiveMod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

// The progress a node's clock is checked by, per interval of its own series.
enum class ClockSignal { kSteps, kGpuWork, kGpuUtil };

const char* nameOf(ClockSignal s) {
  switch (s) {
    case ClockSignal::kSteps:
      return "steps";
    case ClockSignal::kGpuWork:
      return "gpu_work";
    case ClockSignal::kGpuUtil:
      return "gpu_util";
  }
  return "";
}

bool anyValue(const Series& s) {
  return std::any_of(s.begin(), s.end(), [](const auto& v) { return v.has_value(); });
}

// Steps where every node reports them (they move in lockstep across a synchronous job); else
// GPU work, which a waiting collective leaves at 0 on every node alike; else utilisation.
ClockSignal chooseClockSignal(const std::vector<NodeJob>& nodes) {
  auto all = [&](auto pick) {
    return std::all_of(nodes.begin(), nodes.end(),
                       [&](const NodeJob& n) { return anyValue(pick(n.summary)); });
  };
  if (all([](const JobSeries& s) -> const Series& { return s.steps; })) return ClockSignal::kSteps;
  if (all([](const JobSeries& s) -> const Series& { return s.gpu_work_percent; }))
    return ClockSignal::kGpuWork;
  return ClockSignal::kGpuUtil;
}

std::optional<double> clockValue(const JobSeries& s, size_t i, ClockSignal signal) {
  switch (signal) {
    case ClockSignal::kSteps: {
      const auto v = at(s.steps, i);
      return v && s.interval_s[i] > 0 ? std::optional(*v / s.interval_s[i]) : std::nullopt;
    }
    case ClockSignal::kGpuWork:
      return at(s.gpu_work_percent, i);
    case ClockSignal::kGpuUtil:
      return at(s.gpu_util_percent, i);
  }
  return std::nullopt;
}

// A node's progress on a dense grid of GRID_MS from T0_MS by its own clock.
Series denseProgress(const JobSeries& s, ClockSignal signal, int64_t t0_ms, int64_t grid_ms,
                     size_t slots) {
  Series out(slots);
  for (size_t i = 0; i < s.size(); ++i) {
    const int64_t k = (s.ts_ms[i] - t0_ms) / grid_ms;
    if (k >= 0 && static_cast<size_t>(k) < slots)
      out[static_cast<size_t>(k)] = clockValue(s, i, signal);
  }
  return out;
}

// The lag (in slots) at which B matches A best, and the correlation there: B[k + lag] ~ A[k].
std::pair<int64_t, double> bestLag(const Series& a, const Series& b, int64_t max_lag) {
  std::pair<int64_t, double> best{0, -2.0};
  const auto n = static_cast<int64_t>(a.size());
  for (int64_t lag = -max_lag; lag <= max_lag; ++lag) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    size_t count = 0;
    for (int64_t k = std::max<int64_t>(0, -lag); k < n && k + lag < n; ++k) {
      const auto& x = a[static_cast<size_t>(k)];
      const auto& y = b[static_cast<size_t>(k + lag)];
      if (!x || !y) continue;
      sx += *x;
      sy += *y;
      sxx += *x * *x;
      syy += *y * *y;
      sxy += *x * *y;
      ++count;
    }
    if (count < kMinClockOverlap) continue;
    const double c = static_cast<double>(count);
    const double vx = sxx - sx * sx / c, vy = syy - sy * sy / c;
    if (vx <= 1e-9 * c || vy <= 1e-9 * c) continue;  // flat: nothing to line up
    const double r = (sxy - sx * sy / c) / std::sqrt(vx * vy);
    if (r > best.second + 1e-9 ||
        (std::abs(r - best.second) <= 1e-9 && std::llabs(lag) < std::llabs(best.first)))
      best = {lag, r};
  }
  return best;
}

std::vector<ClockCheck> checkClocks(const std::vector<NodeJob>& nodes, ClockSignal signal,
                                    int64_t grid_ms) {
  std::vector<ClockCheck> checks(nodes.size());
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (const auto& n : nodes) {
    if (n.summary.size() == 0) continue;
    t0 = std::min(t0, n.summary.ts_ms.front());
    t1 = std::max(t1, n.summary.ts_ms.back());
  }
  for (size_t i = 0; i < nodes.size(); ++i) checks[i].node = nodes[i].node;
  if (t0 > t1 || nodes.empty()) return checks;
  const auto slots = static_cast<size_t>((t1 - t0) / grid_ms + 1);
  const Series reference = denseProgress(nodes[0].summary, signal, t0, grid_ms, slots);
  checks[0].checked = true;
  checks[0].match = 1.0;
  for (size_t i = 1; i < nodes.size(); ++i) {
    const Series other = denseProgress(nodes[i].summary, signal, t0, grid_ms, slots);
    const auto [lag, r] = bestLag(reference, other, kMaxClockLagMs / grid_ms);
    if (r < kMinClockMatch) continue;
    checks[i].checked = true;
    checks[i].match = r;
    checks[i].offset_ms = lag * grid_ms;
    checks[i].corrected = std::llabs(lag) > 1;  // within one interval: the tick phases differ
  }
  return checks;
}

void addTo(std::optional<double>& sum, const std::optional<double>& v) {
  if (v) sum = sum.value_or(0.0) + *v;
}
void maxInto(std::optional<double>& m, const std::optional<double>& v) {
  if (v && (!m || *v > *m)) m = v;
}

JobSeries mergeOnGrid(std::vector<NodeJob>& nodes, const std::vector<ClockCheck>& clocks,
                      int64_t grid_ms) {
  // Where each node's samples fall on the common grid: by its clock corrected where it had to be,
  // and by the phase of its own ticks, so that jitter of less than half an interval never moves a
  // sample into its neighbour's slot.
  std::vector<int64_t> shift_ms(nodes.size());  // subtracted from each node's timestamps
  int64_t t0 = INT64_MAX;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const JobSeries& s = nodes[n].summary;
    const int64_t offset = clocks[n].corrected ? clocks[n].offset_ms : 0;
    std::vector<int64_t> phases;
    phases.reserve(std::min<size_t>(s.size(), 1000));
    for (size_t i = 0; i < s.size() && i < 1000; ++i)
      phases.push_back(positiveMod(s.ts_ms[i] - offset, grid_ms));
    shift_ms[n] = offset + medianOf(phases);
    if (s.size()) t0 = std::min(t0, s.ts_ms.front() - shift_ms[n]);
  }
  JobSeries f;
  if (t0 == INT64_MAX) return f;
  // Slot of each node's every sample; the slots any node has, in order.
  std::vector<std::vector<int64_t>> slot_of(nodes.size());
  std::set<int64_t> slots;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const JobSeries& s = nodes[n].summary;
    for (int64_t ts : s.ts_ms) {
      const int64_t k = (ts - shift_ms[n] - t0) / grid_ms;
      slot_of[n].push_back(k);
      slots.insert(k);
    }
  }
  const int64_t shown_phase =
      shift_ms.empty() ? 0 : shift_ms[0] - (clocks[0].corrected ? clocks[0].offset_ms : 0);
  std::map<int64_t, size_t> index;
  for (int64_t k : slots) {
    index[k] = model::appendInterval(f, t0 + k * grid_ms + shown_phase,
                                     static_cast<double>(grid_ms) / 1000.0);
  }
  for (const NodeJob& n : nodes) {
    model::RankSeries& r = model::addRank(f, static_cast<int32_t>(&n - nodes.data()));
    // Only what is merged below is kept: the rest of a node's series would stay empty at 16
    // bytes a slot, 13 series of a day's slots (18 MB) a node.
    r.forEachSeries([&](model::Series& x) {
      for (const model::Series* merged :
           {&r.gpu_util_percent, &r.gpu_work_percent, &r.data_wait_s, &r.steps, &r.read_bytes_per_s,
            &r.write_bytes_per_s, &r.workers_cpu, &r.d_state_threads}) {
        if (merged == &x) return;
      }
      model::Series().swap(x);
    });
    r.node = n.node;
    if (!n.summary.ranks.empty()) {
      r.pid = n.summary.ranks.front().pid;
      r.gpu = n.summary.ranks.front().gpu;
    }
    f.gpu_count += n.summary.gpu_count;
  }
  std::vector<uint32_t> present(f.size(), 0);
  Series util_sum(f.size()), work_sum(f.size());
  std::vector<double> util_gpus(f.size(), 0), work_gpus(f.size(), 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const JobSeries& s = nodes[n].summary;
    model::RankSeries& r = f.ranks[n];
    const model::RankSeries* node_rank = s.ranks.empty() ? nullptr : &s.ranks.front();
    const double gpus = std::max<double>(1.0, s.gpu_count);
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t k = index.at(slot_of[n][i]);
      ++present[k];
      if (node_rank) {
        r.gpu_util_percent[k] = at(node_rank->gpu_util_percent, i);
        r.gpu_work_percent[k] = at(node_rank->gpu_work_percent, i);
        r.data_wait_s[k] = at(node_rank->data_wait_s, i);
      }
      r.steps[k] = at(s.steps, i);
      r.read_bytes_per_s[k] = at(s.read_bytes_per_s, i);
      r.write_bytes_per_s[k] = at(s.write_bytes_per_s, i);
      r.workers_cpu[k] = at(s.workers_cpu, i);
      r.d_state_threads[k] = at(s.d_state_threads, i);
      if (const auto u = at(s.gpu_util_percent, i)) {
        util_sum[k] = util_sum[k].value_or(0.0) + *u * gpus;
        util_gpus[k] += gpus;
      }
      if (const auto w = at(s.gpu_work_percent, i)) {
        work_sum[k] = work_sum[k].value_or(0.0) + *w * gpus;
        work_gpus[k] += gpus;
      }
      maxInto(f.data_wait_s[k], at(s.data_wait_s, i));
      addTo(f.read_bytes_per_s[k], at(s.read_bytes_per_s, i));
      addTo(f.write_bytes_per_s[k], at(s.write_bytes_per_s, i));
      addTo(f.workers_cpu[k], at(s.workers_cpu, i));
      addTo(f.d_state_threads[k], at(s.d_state_threads, i));
      maxInto(f.io_some[k], at(s.io_some, i));
      maxInto(f.cpu_some[k], at(s.cpu_some, i));
    }
    // Merged: a day of a node's samples is tens of MB, and sixteen nodes' add up.
    nodes[n].summary = JobSeries{};
  }
  // The job's steps: the nodes' sum, scaled up where a node's sample is missing from a slot
  // (a late tick), so that a hole in one recording does not read as the job slowing down.
  const double node_count = static_cast<double>(nodes.size());
  for (size_t k = 0; k < f.size(); ++k) {
    if (util_gpus[k] > 0) f.gpu_util_percent[k] = *util_sum[k] / util_gpus[k];
    if (work_gpus[k] > 0) f.gpu_work_percent[k] = *work_sum[k] / work_gpus[k];
    std::optional<double> steps;
    uint32_t reporting = 0;
    for (const auto& r : f.ranks) {
      if (r.steps[k]) {
        addTo(steps, r.steps[k]);
        ++reporting;
      }
    }
    if (steps && 2 * reporting >= present[k]) f.steps[k] = *steps * node_count / reporting;
  }
  return f;
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
std::optional<NodeCause> explainOnNode(size_t n, const Incident& inc, int64_t offset_ms,
                                       int64_t grid_ms, const NodeWindow& window,
                                       const DetectorConfig& cfg) {
  if (!window) return std::nullopt;
  const int64_t margin = static_cast<int64_t>(cfg.baseline_intervals) * 2 * grid_ms;
  const int64_t from = inc.start_ms + offset_ms, to = inc.end_ms + offset_ms + grid_ms / 2;
  JobSeries s = window(n, from - margin, to);
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

std::vector<int32_t> missingRanks(const std::vector<NodeJob>& nodes,
                                  std::optional<int32_t> world_size) {
  std::vector<int32_t> missing;
  if (!world_size || *world_size <= 0) return missing;
  std::set<int32_t> held;
  for (const auto& n : nodes) held.insert(n.ranks.begin(), n.ranks.end());
  for (int32_t r = 0; r < *world_size; ++r) {
    if (!held.count(r)) missing.push_back(r);
  }
  return missing;
}

}  // namespace

FleetAnalysis analyzeFleet(std::vector<NodeJob> nodes, const NodeWindow& window,
                           std::optional<int32_t> world_size, const DetectorConfig& cfg) {
  FleetAnalysis f;
  f.missing_ranks = missingRanks(nodes, world_size);
  if (nodes.empty()) return f;
  {
    std::vector<int64_t> intervals;
    for (double v : nodes[0].summary.interval_s) intervals.push_back(std::llround(v * 1000.0));
    f.grid_ms = std::max<int64_t>(1, intervals.empty() ? 1000 : medianOf(intervals));
  }
  const ClockSignal signal = chooseClockSignal(nodes);
  f.clock_signal = nameOf(signal);
  f.clocks = checkClocks(nodes, signal, f.grid_ms);
  std::vector<uint32_t> gpus(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) gpus[n] = nodes[n].summary.gpu_count;
  f.series = mergeOnGrid(nodes, f.clocks, f.grid_ms);  // frees each node's summary
  f.analysis = analyzeJob(f.series, cfg);
  f.goodput = goodputOf(f.analysis, f.series);
  for (const Incident& job_inc : f.analysis.incidents) {
    FleetIncident fi;
    fi.incident = job_inc;
    Incident& inc = fi.incident;
    // The job's "ranks" are its nodes, numbered by index: name the ranks they ran instead.
    if (inc.straggler) fi.straggler_node = static_cast<size_t>(inc.straggler->rank);
    for (int32_t n : inc.ranks_starved) fi.starved_nodes.push_back(static_cast<size_t>(n));
    inc.straggler.reset();
    inc.ranks_starved.clear();
    inc.waiting_ranks.clear();
    for (size_t n = 0; n < nodes.size(); ++n) {
      const bool starved =
          fi.straggler_node ? n == *fi.straggler_node
                            : std::count(fi.starved_nodes.begin(), fi.starved_nodes.end(), n) > 0;
      auto& into = starved ? inc.ranks_starved : inc.waiting_ranks;
      into.insert(into.end(), nodes[n].ranks.begin(), nodes[n].ranks.end());
    }
    std::vector<size_t> explain = fi.starved_nodes;
    if (fi.straggler_node) explain = {*fi.straggler_node};
    for (size_t n : explain) {
      const int64_t offset = f.clocks[n].corrected ? f.clocks[n].offset_ms : 0;
      if (auto c = explainOnNode(n, inc, offset, f.grid_ms, window, cfg))
        fi.causes.push_back(std::move(*c));
    }
    // The job's own attribution had no devices to look at: only its per-node comparisons stay.
    std::vector<EvidenceItem> per_node;
    for (auto& e : inc.evidence) {
      if (e.signal.find(" node ") != std::string::npos) per_node.push_back(e);
    }
    inc.evidence = std::move(per_node);
    inc.cls = StallClass::kNotStorage;
    inc.device.clear();
    inc.physical_device.clear();
    takeCause(fi.causes, inc);
    if (fi.straggler_node) {
      const NodeJob& node = nodes[*fi.straggler_node];
      // The rank that held the job back: the node's own straggler if it ran several ranks,
      // else its one rank.
      if (!fi.causes.empty() && fi.causes.front().incident.straggler) {
        inc.straggler = fi.causes.front().incident.straggler;
      } else if (node.ranks.size() == 1) {
        const auto& r = f.series.ranks[*fi.straggler_node];
        inc.straggler = Straggler{node.ranks.front(), r.pid, r.gpu};
      }
      inc.ranks_starved.clear();
      if (inc.straggler) {
        // Its node's other ranks waited too.
        inc.waiting_ranks.clear();
        for (const NodeJob& other : nodes) {
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
      if (!fi.straggler_node || n != *fi.straggler_node) other_gpus += gpus[n];
    }
    if (fi.straggler_node) {
      fi.others_waited_s = duration;
      fi.others_gpu_seconds = duration * other_gpus * inc.idle_share;
    }
    f.incidents.push_back(std::move(fi));
  }
  return f;
}

}  // namespace stallwatch::correlator
