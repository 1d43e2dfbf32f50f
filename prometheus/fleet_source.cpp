#include "prometheus/fleet_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "model/run.h"

namespace stallwatch::prometheus {
namespace {

// What the span and the ranks are found with: a coarse grid of about this many points, each
// looking back one grid step (max_over_time), so that nothing between two points is missed.
constexpr int64_t kDiscoveryPoints = 600;
constexpr int64_t kDefaultStepMs = 15'000;

// TEXT as a regular expression (RE2's syntax, as PromQL's =~ takes it) that matches it alone.
std::string regexEscaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

const std::string* label(const RangeSeries& s, const std::string& name) {
  const auto it = s.labels.find(name);
  return it == s.labels.end() ? nullptr : &it->second;
}

int64_t ceilTo(int64_t v, int64_t unit) { return (v + unit - 1) / unit * unit; }

// The median of V (not empty), the nodes' agreement on a figure each says for itself.
double medianOf(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Where each step of the grid FROM_MS + k * STEP_MS lies in a series built on it: a JobSeries
// holds only the steps where its job was present.
class Grid {
 public:
  // Each step is stamped SHOWN_SHIFT_MS before its time (FoundRun::shown_shift_ms).
  Grid(int64_t from_ms, int64_t step_ms, size_t steps, int64_t shown_shift_ms)
      : from_ms_(from_ms), step_ms_(step_ms), shift_ms_(shown_shift_ms), index_(steps, SIZE_MAX) {}

  // Opens a slot for the step at TS_MS in S, once.
  void open(int64_t ts_ms) {
    const auto k = step(ts_ms);
    if (!k || index_[*k] != SIZE_MAX) return;
    index_[*k] = SIZE_MAX - 1;  // ordered below: JobSeries wants its intervals in time order
  }
  // The slots, in time order: every series of S sized with them (FULL), or none, each then
  // sized when first placed into (a node's summary: a thousand nodes' unused series add up).
  void build(model::JobSeries& s, bool full) {
    for (size_t k = 0; k < index_.size(); ++k) {
      if (index_[k] != SIZE_MAX - 1) continue;
      const int64_t ts = from_ms_ + static_cast<int64_t>(k) * step_ms_ - shift_ms_;
      const double interval_s = static_cast<double>(step_ms_) / 1000.0;
      if (full) {
        index_[k] = model::appendInterval(s, ts, interval_s);
      } else {
        index_[k] = s.ts_ms.size();
        s.ts_ms.push_back(ts);
        s.interval_s.push_back(interval_s);
      }
    }
  }
  // The same for a node's summary held compact.
  void build(model::NodeSampleColumns& s) {
    for (size_t k = 0; k < index_.size(); ++k) {
      if (index_[k] != SIZE_MAX - 1) continue;
      index_[k] = s.size();
      s.append(from_ms_ + static_cast<int64_t>(k) * step_ms_ - shift_ms_,
               static_cast<double>(step_ms_) / 1000.0);
    }
  }
  // The slot of the step at TS_MS, if S has one.
  std::optional<size_t> at(int64_t ts_ms) const {
    const auto k = step(ts_ms);
    if (!k || index_[*k] >= SIZE_MAX - 1) return std::nullopt;
    return index_[*k];
  }

 private:
  std::optional<size_t> step(int64_t ts_ms) const {
    if (ts_ms < from_ms_ || (ts_ms - from_ms_) % step_ms_ != 0) return std::nullopt;
    const auto k = static_cast<size_t>((ts_ms - from_ms_) / step_ms_);
    return k < index_.size() ? std::optional(k) : std::nullopt;
  }

  int64_t from_ms_, step_ms_, shift_ms_;
  std::vector<size_t> index_;
};

// Puts R's points on the grid through GET and SET (a slot's value), each value times SCALE, and
// times the slot's INTERVAL_S where PER_INTERVAL (a rate turned into the interval's amount). Every
// figure the agents export is finite and not negative: any other value is refused and counted in
// TALLY, as is a slot that two series (two scrape jobs of one agent) fill with values that
// disagree: neither is kept.
template <typename Interval, typename Get, typename Set>
void placeWith(const RangeSeries& r, const Grid& grid, double scale, bool per_interval,
               ServerValues& tally, Interval interval_s, Get get, Set set) {
  for (size_t i = 0; i < r.ts_ms.size(); ++i) {
    const auto k = grid.at(r.ts_ms[i]);
    const double v = r.values[i];
    if (!k || std::isnan(v)) continue;
    if (!std::isfinite(v) || v < 0) {
      ++tally.refused;
      continue;
    }
    const double x = v * scale * (per_interval ? interval_s(*k) : 1.0);
    if (const std::optional<double> was = get(*k);
        was && std::abs(*was - x) > 1e-6 * std::max(1.0, std::abs(x))) {
      ++tally.disagreeing;
      set(*k, std::nullopt);
      continue;
    }
    set(*k, x);
  }
}

// Into a series of S.
void place(const RangeSeries& r, const Grid& grid, const model::JobSeries& s, model::Series& into,
           double scale, bool per_interval, ServerValues& tally) {
  if (into.size() < s.size()) into.resize(s.size());
  placeWith(
      r, grid, scale, per_interval, tally, [&](size_t k) { return s.interval_s[k]; },
      [&](size_t k) { return into[k]; }, [&](size_t k, std::optional<double> x) { into[k] = x; });
}

// The same into a node's summary held compact (4 bytes a value: two series that agree to 1e-6
// of their value agree).
void place(const RangeSeries& r, const Grid& grid, model::NodeSampleColumns& s,
           model::NodeFigure figure, double scale, bool per_interval, ServerValues& tally) {
  placeWith(
      r, grid, scale, per_interval, tally, [&](size_t k) { return s.intervalAt(k); },
      [&](size_t k) { return s.at(figure, k); },
      [&](size_t k, std::optional<double> x) { s.set(figure, k, x); });
}

// A figure of the job as the fleet report reads it: the metric, the series it fills, its scale,
// and the figure of a node's summary it is (where it is one).
struct JobFigure {
  const char* metric;
  model::Series model::JobSeries::*into;
  double scale;
  bool per_interval;
  std::optional<model::NodeFigure> in_summary = std::nullopt;
};
using F = model::NodeFigure;

// What a node is judged by in the run (the node summary's series).
constexpr JobFigure kSummaryFigures[] = {
    {"stallwatch_job_steps_per_second", &model::JobSeries::steps, 1.0, true, F::kSteps},
    {"stallwatch_job_gpu_utilization_ratio", &model::JobSeries::gpu_util_percent, 100.0, false,
     F::kGpuUtilPercent},
    {"stallwatch_job_gpu_work_ratio", &model::JobSeries::gpu_work_percent, 100.0, false,
     F::kGpuWorkPercent},
    {"stallwatch_job_dataloader_wait_ratio", &model::JobSeries::data_wait_s, 1.0, true,
     F::kDataWaitS},
    {"stallwatch_job_read_bytes_per_second", &model::JobSeries::read_bytes_per_s, 1.0, false,
     F::kReadBytesPerS},
    {"stallwatch_job_write_bytes_per_second", &model::JobSeries::write_bytes_per_s, 1.0, false,
     F::kWriteBytesPerS},
    {"stallwatch_job_workers_cpu_cores", &model::JobSeries::workers_cpu, 1.0, false,
     F::kWorkersCpu},
    {"stallwatch_job_uninterruptible_threads", &model::JobSeries::d_state_threads, 1.0, false,
     F::kDStateThreads},
};

// And what explains a stall on the node that held the run back.
constexpr JobFigure kWindowFigures[] = {
    {"stallwatch_job_stopped_processes", &model::JobSeries::stopped_processes, 1.0, false},
    {"stallwatch_job_cgroup_cpu_throttled_ratio", &model::JobSeries::cgroup_cpu_throttled, 1.0,
     false},
    {"stallwatch_job_cgroup_read_limit_bytes_per_second",
     &model::JobSeries::cgroup_read_limit_bytes_per_s, 1.0, false},
    {"stallwatch_job_cgroup_limited_read_bytes_per_second",
     &model::JobSeries::cgroup_limited_read_bytes_per_s, 1.0, false},
};

struct DeviceFigure {
  const char* metric;
  model::Series model::DeviceSeries::*into;
  double scale;
};

constexpr DeviceFigure kDiskFigures[] = {
    {"stallwatch_disk_read_await_seconds", &model::DeviceSeries::r_await_ms, 1000.0},
    {"stallwatch_disk_write_await_seconds", &model::DeviceSeries::w_await_ms, 1000.0},
    {"stallwatch_disk_queue_length", &model::DeviceSeries::aqu_sz, 1.0},
    {"stallwatch_disk_read_bytes_per_second", &model::DeviceSeries::read_bytes_per_s, 1.0},
    {"stallwatch_disk_write_bytes_per_second", &model::DeviceSeries::write_bytes_per_s, 1.0},
    {"stallwatch_disk_busy_ratio", &model::DeviceSeries::util_percent, 100.0},
};
constexpr DeviceFigure kMountFigures[] = {
    {"stallwatch_mount_read_await_seconds", &model::DeviceSeries::r_await_ms, 1000.0},
    {"stallwatch_mount_write_await_seconds", &model::DeviceSeries::w_await_ms, 1000.0},
    {"stallwatch_mount_queue_length", &model::DeviceSeries::aqu_sz, 1.0},
    {"stallwatch_mount_read_bytes_per_second", &model::DeviceSeries::read_bytes_per_s, 1.0},
};

struct RankFigure {
  const char* metric;
  model::Series model::RankSeries::*into;
  double scale;
  bool per_interval;
  const char* across;  // how a node's ranks are reduced to its slowest: min or max
  std::optional<model::NodeFigure> in_summary;  // the slowest rank's figure in a node's summary
};

constexpr RankFigure kRankFigures[] = {
    {"stallwatch_rank_gpu_utilization_ratio", &model::RankSeries::gpu_util_percent, 100.0, false,
     "min", F::kRankGpuUtilPercent},
    {"stallwatch_rank_gpu_work_ratio", &model::RankSeries::gpu_work_percent, 100.0, false, "min",
     F::kRankGpuWorkPercent},
    {"stallwatch_rank_dataloader_wait_ratio", &model::RankSeries::data_wait_s, 1.0, true, "max",
     F::kRankDataWaitS},
    {"stallwatch_rank_steps_per_second", &model::RankSeries::steps, 1.0, true, "min", std::nullopt},
};

}  // namespace

std::string FleetSource::selector(const std::string& metric, const std::string& more) const {
  std::string m = more;
  if (!selection_.matchers.empty()) m += (m.empty() ? "" : ",") + selection_.matchers;
  return metric + "{" + m + "}";
}

std::string FleetSource::jobsMatcher() const {
  std::set<std::string> keys;
  for (const RunNode& n : run_.nodes) keys.insert(n.training_job);
  if (keys.size() == 1) return "training_job=" + promqlString(*keys.begin());
  std::string any;
  for (const std::string& k : keys) any += (any.empty() ? "" : "|") + regexEscaped(k);
  return "training_job=~" + promqlString(any);
}

FleetSource::FleetSource(Client& client, RunSelection selection)
    : client_(client), selection_(std::move(selection)) {
  // A bare id, as the file-based report takes it: Slurm's or torchrun's run of that id.
  if (selection_.run.find(':') == std::string::npos) {
    run_matcher_ = "run=~" + promqlString("(slurm|torchelastic):" + regexEscaped(selection_.run));
  } else {
    run_matcher_ = "run=" + promqlString(selection_.run);
  }
  run_.run = selection_.run;
  const std::string run = run_matcher_;
  // The nodes: each (node, instance, job) that said it is part of the run, and when.
  struct Seen {
    RunNode node;
    int64_t first = INT64_MAX, last = INT64_MIN;
  };
  std::map<std::string, Seen> by_node;
  auto discoverNodes = [&](int64_t from_ms, int64_t to_ms, int64_t grid_ms) {
    std::map<std::string, Seen> found;
    for (const auto& s : client_.queryRange(
             fmt::format(
                 "max by (run, node, instance, training_job, world_size) (max_over_time({}[{}s]))",
                 selector("stallwatch_run_job_info", run), grid_ms / 1000),
             from_ms, to_ms, grid_ms)) {
      if (s.ts_ms.empty()) continue;
      const std::string node = s.label("node");
      Seen& seen = found[node];
      // A job restarted on the node under another key: the one seen longest stands for it.
      const int64_t first = s.ts_ms.front() - grid_ms, last = s.ts_ms.back();
      if (const std::string* r = label(s, "run")) run_.run = *r;
      if (seen.node.instance.empty() || last - first > seen.last - seen.first) {
        seen.node = {node, s.label("instance"), s.label("training_job"), {}, 0};
        seen.first = first;
        seen.last = last;
      }
      if (const std::string* w = label(s, "world_size"); w && !w->empty()) {
        try {
          if (auto n = model::believableWorldSize(std::stoll(*w))) run_.world_size = n;
        } catch (const std::exception&) {
        }
      }
    }
    return found;
  };
  // Found on a coarse grid over the whole search span, then again over the run's own span,
  // until the grid is a second or the span no narrower: a 60 s run found in 24 h on a 144 s
  // grid had its span, and with it the scrape interval, wrong (issue 42: a 15 s step).
  int64_t since = selection_.since_ms, until = selection_.until_ms, coarse = 1000;
  for (int pass = 0; pass < 4; ++pass) {
    const int64_t span = std::max<int64_t>(1000, until - since);
    coarse = ceilTo(std::max<int64_t>(1000, span / kDiscoveryPoints), 1000);
    by_node = discoverNodes(since, until, coarse);
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const auto& [name, seen] : by_node) {
      first = std::min(first, seen.first);
      last = std::max(last, seen.last);
    }
    if (by_node.empty() || coarse <= 1000) break;
    const int64_t narrower_since = std::max(selection_.since_ms, first - coarse);
    const int64_t narrower_until = std::min(selection_.until_ms, last + coarse);
    if (narrower_until - narrower_since >= span / 2) break;
    since = narrower_since;
    until = narrower_until;
  }
  if (by_node.empty()) return;
  // Its ranks, from every rank family (one at a time: over_time drops the names, and two
  // families' series would collide): one point a rank, over the whole span (the ranks' series
  // over time were 100 MB at a thousand nodes of 8 ranks).
  const int64_t whole_s = ceilTo(std::max<int64_t>(1000, until - since), 1000) / 1000;
  for (const RankFigure& f : kRankFigures) {
    for (const auto& s :
         client_.queryRange(fmt::format("max by (node, rank) (max_over_time({}[{}s]))",
                                        selector(f.metric, run), whole_s),
                            until, until, 1000)) {
      const auto it = by_node.find(s.label("node"));
      if (it == by_node.end()) continue;
      try {
        it->second.node.ranks.push_back(std::stoi(s.label("rank")));
      } catch (const std::exception&) {
      }
    }
  }
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (auto& [name, seen] : by_node) {
    std::sort(seen.node.ranks.begin(), seen.node.ranks.end());
    seen.node.ranks.erase(std::unique(seen.node.ranks.begin(), seen.node.ranks.end()),
                          seen.node.ranks.end());
    first = std::min(first, seen.first);
    last = std::max(last, seen.last);
    run_.nodes.push_back(std::move(seen.node));
  }
  std::stable_sort(run_.nodes.begin(), run_.nodes.end(), [](const RunNode& a, const RunNode& b) {
    const int32_t ra = a.ranks.empty() ? INT32_MAX : a.ranks.front();
    const int32_t rb = b.ranks.empty() ? INT32_MAX : b.ranks.front();
    return ra < rb;
  });
  timeRun(std::max(first, selection_.since_ms), std::min(last, selection_.until_ms));
}

// The run's span FIRST to LAST (ms) on its step's grid; the step (as given, else the samples'
// own spacing) and the agents' sampling interval.
void FleetSource::timeRun(int64_t first, int64_t last) {
  const std::string& run = run_matcher_;
  // The step: as given, else the spacing of the run's samples (the scrape interval: a finer
  // step repeats samples, a coarser one drops them), counted over up to half an hour in the
  // middle of the run, where every node runs it.
  const int64_t w = std::clamp<int64_t>((last - first) / 2 / 1000 * 1000, 1000, 1'800'000);
  const int64_t at = (first + last) / 2 / 1000 * 1000;
  run_.step_given = selection_.step_ms.has_value();
  run_.step_ms = selection_.step_ms.value_or(kDefaultStepMs);
  {  // the samples' own spacing, also where a step was given: said when it is coarser
    std::vector<double> spacing;
    for (const auto& s :
         client_.queryRange(fmt::format("count_over_time({}[{}s])",
                                        selector("stallwatch_run_job_info", run), w / 1000),
                            at, at, 1000)) {
      if (s.values.empty() || std::isnan(s.values.front())) continue;
      if (!std::isfinite(s.values.front())) {
        ++values_.refused;  // +Inf made a step of 100 ms
        continue;
      }
      if (s.values.front() >= 2) spacing.push_back(static_cast<double>(w) / s.values.front());
    }
    if (!spacing.empty()) {
      // Scrape intervals are whole seconds, or a round fraction of one.
      const double ms = medianOf(std::move(spacing));
      run_.data_step_ms = ms >= 1000 ? std::llround(ms / 1000.0) * 1000
                                     : std::max<int64_t>(100, std::llround(ms / 100.0) * 100);
      if (!selection_.step_ms) run_.step_ms = run_.data_step_ms;
    }
  }
  run_.from_ms = first / run_.step_ms * run_.step_ms;
  run_.to_ms = ceilTo(last, run_.step_ms);
  // The agents' own sampling interval, from how fast their interval counters rose over the same
  // half hour: what the series' times are shifted back by.
  std::vector<double> agent_ms;
  for (const auto& s : client_.queryRange(
           fmt::format("rate({}[{}s]) * on (instance) group_left () max by (instance) ({})",
                       selector("stallwatch_intervals_total"), w / 1000,
                       selector("stallwatch_run_job_info", run)),
           at, at, 1000)) {
    // An agent samples every 100 ms to a minute (--interval): a rate that says otherwise is
    // a bad counter, and a shift of minutes would move every stall (issue 46: 16 min early).
    if (s.values.empty() || std::isnan(s.values.front())) continue;
    const double ms = 1000.0 / s.values.front();
    if (std::isfinite(ms) && ms >= 100 && ms <= 60'000) {
      agent_ms.push_back(ms);
    } else {
      ++values_.refused;
    }
  }
  // To 10 ms: a counter's rate over a window is a few ms off the interval it counts.
  if (!agent_ms.empty())
    run_.shown_shift_ms = std::llround(medianOf(std::move(agent_ms)) / 10.0) * 10;
}

std::vector<model::NodeSampleColumns> FleetSource::summaries() {
  const size_t n = run_.nodes.size();
  std::vector<model::NodeSampleColumns> out(n);
  if (n == 0) return out;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < n; ++i) index[run_.nodes[i].node] = i;
  auto nodeOf = [&](const RangeSeries& s) -> std::optional<size_t> {
    const auto it = index.find(s.label("node"));
    if (it == index.end()) return std::nullopt;
    return it->second;
  };
  const auto steps = static_cast<size_t>((run_.to_ms - run_.from_ms) / run_.step_ms + 1);
  std::vector<Grid> grids(n, Grid(run_.from_ms, run_.step_ms, steps, run_.shown_shift_ms));
  // Each answer's series are placed as they are parsed, not held: a figure of a thousand nodes
  // was 23 MB parsed beside its 31 MB answer.
  auto each = [&](const std::string& expr, const std::function<void(RangeSeries&)>& fn) {
    client_.queryRangeEach(expr, run_.from_ms, run_.to_ms, run_.step_ms, fn);
  };
  // A node's intervals: the steps where its agent said it runs the job.
  each(fmt::format("max by (node) ({})", selector("stallwatch_run_job_info", run_matcher_)),
       [&](RangeSeries& s) {
         if (const auto k = nodeOf(s))
           for (int64_t ts : s.ts_ms) grids[*k].open(ts);
       });
  for (size_t k = 0; k < n; ++k) grids[k].build(out[k]);
  // The job's figures, joined to the nodes here by (instance, training_job), as discovered: a
  // join on the server (onRun) cost a thousand nodes' run 1.5 to 5.7 s a figure, most of it
  // for the info series' side, evaluated again at every step of every query.
  std::map<std::pair<std::string, std::string>, size_t> by_job;
  for (size_t k = 0; k < n; ++k) by_job[{run_.nodes[k].instance, run_.nodes[k].training_job}] = k;
  const std::string jobs = jobsMatcher();
  auto jobOf = [&](const RangeSeries& s) -> std::optional<size_t> {
    const auto it = by_job.find({s.label("instance"), s.label("training_job")});
    if (it == by_job.end()) return std::nullopt;
    return it->second;
  };
  for (const JobFigure& f : kSummaryFigures) {
    each(selector(f.metric, jobs), [&](RangeSeries& s) {
      if (const auto k = jobOf(s))
        place(s, grids[*k], out[*k], *f.in_summary, f.scale, f.per_interval, values_);
    });
  }
  // The node's slowest rank: reduced across its ranks by the server.
  const std::string run = run_matcher_;
  std::vector<bool> ranked(n, false);
  for (const RankFigure& f : kRankFigures) {
    if (!f.in_summary) continue;  // the job's steps stand for the node's
    each(fmt::format("{} by (node) ({})", f.across, selector(f.metric, run)), [&](RangeSeries& s) {
      const auto k = nodeOf(s);
      if (!k) return;
      ranked[*k] = true;
      place(s, grids[*k], out[*k], *f.in_summary, f.scale, f.per_interval, values_);
    });
  }
  // GPUs: the job's count where its agent said, else one a rank.
  each(selector("stallwatch_job_gpus", jobs), [&](RangeSeries& s) {
    const auto k = jobOf(s);
    if (!k) return;
    constexpr double kMaxGpusOfANode = 1024;
    for (double v : s.values) {
      if (std::isnan(v)) continue;
      if (!std::isfinite(v) || v < 0 || v > kMaxGpusOfANode) {
        ++values_.refused;  // cast to a count, -1 was 4294967295 GPUs
        continue;
      }
      run_.nodes[*k].gpus = std::max(run_.nodes[*k].gpus, static_cast<uint32_t>(v));
    }
  });
  for (size_t k = 0; k < n; ++k) {
    if (!ranked[k]) {
      // No rank series (a job without RANK in its environment): the job's figures are its own.
      out[k].copy(F::kGpuUtilPercent, F::kRankGpuUtilPercent);
      out[k].copy(F::kGpuWorkPercent, F::kRankGpuWorkPercent);
      out[k].copy(F::kDataWaitS, F::kRankDataWaitS);
    }
    if (run_.nodes[k].gpus == 0)
      run_.nodes[k].gpus = static_cast<uint32_t>(run_.nodes[k].ranks.size());
  }
  return out;
}

model::JobSeries FleetSource::window(size_t node, int64_t from_ms, int64_t to_ms) {
  model::JobSeries s;
  if (node >= run_.nodes.size()) return s;
  const RunNode& rn = run_.nodes[node];
  from_ms += run_.shown_shift_ms;  // from the times the series show to Prometheus's
  to_ms += run_.shown_shift_ms;
  from_ms = std::max(run_.from_ms, ceilTo(from_ms - run_.from_ms, run_.step_ms) + run_.from_ms);
  to_ms = std::min(run_.to_ms, to_ms / run_.step_ms * run_.step_ms);
  if (from_ms > to_ms) return s;
  const auto steps = static_cast<size_t>((to_ms - from_ms) / run_.step_ms + 1);
  Grid grid(from_ms, run_.step_ms, steps, run_.shown_shift_ms);
  const std::string instance = "instance=" + promqlString(rn.instance);
  const std::string job = instance + ",training_job=" + promqlString(rn.training_job);
  auto query = [&](const std::string& expr) {
    return client_.queryRange(expr, from_ms, to_ms, run_.step_ms);
  };
  for (const auto& r : query(selector("stallwatch_run_job_info", job))) {
    for (int64_t ts : r.ts_ms) grid.open(ts);
  }
  grid.build(s, true);
  if (s.size() == 0) return s;
  s.gpu_count = rn.gpus;
  auto fill = [&](const JobFigure& f) {
    for (const auto& r : query(selector(f.metric, job)))
      place(r, grid, s, s.*(f.into), f.scale, f.per_interval, values_);
  };
  for (const JobFigure& f : kSummaryFigures) fill(f);
  for (const JobFigure& f : kWindowFigures) fill(f);
  for (const auto& r : query(selector("stallwatch_job_cgroup_pressure_some_ratio", job))) {
    const std::string resource = r.label("resource");
    if (resource == "io") place(r, grid, s, s.cgroup_io_some, 1.0, false, values_);
    if (resource == "cpu") place(r, grid, s, s.cgroup_cpu_some, 1.0, false, values_);
    if (resource == "memory") place(r, grid, s, s.cgroup_memory_some, 1.0, false, values_);
  }
  for (const auto& r : query(selector("stallwatch_pressure_some_ratio", instance))) {
    const std::string resource = r.label("resource");
    if (resource == "io") place(r, grid, s, s.io_some, 1.0, false, values_);
    if (resource == "cpu") place(r, grid, s, s.cpu_some, 1.0, false, values_);
    if (resource == "memory") place(r, grid, s, s.memory_some, 1.0, false, values_);
  }
  // The devices the job reads first (as the recording orders them), then the host's others.
  std::set<std::pair<std::string, std::string>> reads;
  for (const auto& r : query(
           fmt::format("max by (device, via) ({})", selector("stallwatch_job_device_info", job)))) {
    reads.emplace(r.label("device"), r.label("via"));
  }
  std::vector<std::pair<std::string, std::string>> ordered(reads.begin(), reads.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    return a.second.empty() && !b.second.empty();
  });
  std::set<std::string> job_devices;
  for (const auto& [device, via] : ordered) {
    model::addDevice(s, device, via, true);
    job_devices.insert(device);
  }
  auto deviceNamed = [&](const std::string& name) -> model::DeviceSeries& {
    for (auto& d : s.devices) {
      if (d.name == name) return d;
    }
    return model::addDevice(s, name, "", false);
  };
  std::set<std::string> sampled;
  for (const auto& f : kDiskFigures) {
    for (const auto& r : query(selector(f.metric, instance))) {
      const std::string name = r.label("device");
      if (name.empty()) continue;
      sampled.insert(name);
      place(r, grid, s, deviceNamed(name).*(f.into), f.scale, false, values_);
    }
  }
  for (const auto& f : kMountFigures) {
    for (const auto& r : query(selector(f.metric, instance))) {
      const std::string name = r.label("mountpoint");
      if (name.empty()) continue;
      sampled.insert(name);
      place(r, grid, s, deviceNamed(name).*(f.into), f.scale, false, values_);
    }
  }
  // A device the job read that has no samples in the window is left out, as from a recording.
  s.devices.erase(
      std::remove_if(s.devices.begin(), s.devices.end(),
                     [&](const model::DeviceSeries& d) { return !sampled.count(d.name); }),
      s.devices.end());
  // Its ranks, where it ran several.
  if (rn.ranks.size() >= 2) {
    const std::string ranks = run_matcher_ + ",node=" + promqlString(rn.node);
    for (const RankFigure& f : kRankFigures) {
      for (const auto& r : query(selector(f.metric, ranks))) {
        try {
          model::RankSeries& rank = model::addRank(s, std::stoi(r.label("rank")));
          rank.node = rn.node;
          place(r, grid, s, rank.*(f.into), f.scale, f.per_interval, values_);
        } catch (const std::exception&) {
        }
      }
    }
  }
  return s;
}

}  // namespace stallwatch::prometheus
