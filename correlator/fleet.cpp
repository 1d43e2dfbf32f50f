#include "correlator/fleet.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

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

constexpr float kNoValue = std::numeric_limits<float>::quiet_NaN();

float compact(const std::optional<double>& v) { return v ? static_cast<float>(*v) : kNoValue; }

// The clocks are checked on each node's first this many samples (4 h at 1 s, 60 h at a 15 s
// scrape): enough rhythm to line them up, in a third of a MiB a node however long the run.
constexpr size_t kClockSamples = 14'400;

// Pass one: a node's progress by its own clock, each signal the clocks may be checked by, over
// its first kClockSamples samples; its span and count over all.
struct ClockTrack {
  int64_t first_ms = 0, last_ms = 0;
  size_t count = 0;
  std::vector<int64_t> ts_ms;
  std::vector<int32_t> interval_ms;
  std::vector<float> steps_rate, gpu_work, gpu_util;
  bool steps = false, work = false, util = false;

  size_t bytes() const {
    return ts_ms.capacity() * sizeof(int64_t) + interval_ms.capacity() * sizeof(int32_t) +
           (steps_rate.capacity() + gpu_work.capacity() + gpu_util.capacity()) * sizeof(float);
  }
  const std::vector<float>& of(ClockSignal signal) const {
    switch (signal) {
      case ClockSignal::kSteps:
        return steps_rate;
      case ClockSignal::kGpuWork:
        return gpu_work;
      case ClockSignal::kGpuUtil:
        break;
    }
    return gpu_util;
  }
};

ClockTrack readProgress(size_t node, const NodeReader& read) {
  ClockTrack t;
  read(node, model::NodeSampleFields::kProgress, [&](const model::NodeSample& x) {
    if (t.count && x.ts_ms <= t.last_ms) return;  // time order, once each
    if (!t.count++) t.first_ms = x.ts_ms;
    t.last_ms = x.ts_ms;
    t.steps = t.steps || x.steps.has_value();
    t.work = t.work || x.gpu_work_percent.has_value();
    t.util = t.util || x.gpu_util_percent.has_value();
    if (t.ts_ms.size() >= kClockSamples) return;
    t.ts_ms.push_back(x.ts_ms);
    t.interval_ms.push_back(static_cast<int32_t>(std::llround(x.interval_s * 1000.0)));
    const bool rate = x.steps && x.interval_s > 0;
    t.steps_rate.push_back(rate ? static_cast<float>(*x.steps / x.interval_s) : kNoValue);
    t.gpu_work.push_back(compact(x.gpu_work_percent));
    t.gpu_util.push_back(compact(x.gpu_util_percent));
  });
  for (auto* v : {&t.steps_rate, &t.gpu_work, &t.gpu_util}) v->shrink_to_fit();
  t.ts_ms.shrink_to_fit();
  t.interval_ms.shrink_to_fit();
  return t;
}

// Steps where every node reports them (they move in lockstep across a synchronous job); else
// GPU work, which a waiting collective leaves at 0 on every node alike; else utilisation.
ClockSignal chooseClockSignal(const std::vector<ClockTrack>& tracks) {
  auto all = [&](bool ClockTrack::*has) {
    return std::all_of(tracks.begin(), tracks.end(), [&](const ClockTrack& t) { return t.*has; });
  };
  if (all(&ClockTrack::steps)) return ClockSignal::kSteps;
  if (all(&ClockTrack::work)) return ClockSignal::kGpuWork;
  return ClockSignal::kGpuUtil;
}

// A node's progress on a dense grid of GRID_MS from T0_MS by its own clock.
std::vector<float> denseProgress(const ClockTrack& t, ClockSignal signal, int64_t t0_ms,
                                 int64_t grid_ms, size_t slots) {
  std::vector<float> out(slots, kNoValue);
  const auto& values = t.of(signal);
  for (size_t i = 0; i < t.ts_ms.size(); ++i) {
    const int64_t k = (t.ts_ms[i] - t0_ms) / grid_ms;
    if (k >= 0 && static_cast<size_t>(k) < slots) out[static_cast<size_t>(k)] = values[i];
  }
  return out;
}

// The lag (in slots) at which B matches A best, and the correlation there: B[k + lag] ~ A[k].
std::pair<int64_t, double> bestLag(const std::vector<float>& a, const std::vector<float>& b,
                                   int64_t max_lag) {
  std::pair<int64_t, double> best{0, -2.0};
  const auto n = static_cast<int64_t>(a.size());
  for (int64_t lag = -max_lag; lag <= max_lag; ++lag) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    size_t count = 0;
    for (int64_t k = std::max<int64_t>(0, -lag); k < n && k + lag < n; ++k) {
      const double x = a[static_cast<size_t>(k)], y = b[static_cast<size_t>(k + lag)];
      if (std::isnan(x) || std::isnan(y)) continue;
      sx += x;
      sy += y;
      sxx += x * x;
      syy += y * y;
      sxy += x * y;
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

std::vector<ClockCheck> checkClocks(const std::vector<ClockTrack>& tracks,
                                    const std::vector<FleetNode>& nodes, ClockSignal signal,
                                    int64_t grid_ms) {
  std::vector<ClockCheck> checks(tracks.size());
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (size_t i = 0; i < tracks.size(); ++i) {
    checks[i].node = nodes[i].node;
    t0 = std::min(t0, tracks[i].ts_ms.front());
    t1 = std::max(t1, tracks[i].ts_ms.back());
  }
  if (tracks.empty()) return checks;
  const auto slots = static_cast<size_t>((t1 - t0) / grid_ms + 1);
  const std::vector<float> reference = denseProgress(tracks[0], signal, t0, grid_ms, slots);
  checks[0].checked = true;
  checks[0].match = 1.0;
  for (size_t i = 1; i < tracks.size(); ++i) {
    const std::vector<float> other = denseProgress(tracks[i], signal, t0, grid_ms, slots);
    const auto [lag, r] = bestLag(reference, other, kMaxClockLagMs / grid_ms);
    if (r < kMinClockMatch) continue;
    checks[i].checked = true;
    checks[i].match = r;
    checks[i].offset_ms = lag * grid_ms;
    checks[i].corrected = std::llabs(lag) > 1;  // within one interval: the tick phases differ
  }
  return checks;
}

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

// The job's figures per slot of the grid, summed over the nodes as each is merged.
struct JobSlots {
  explicit JobSlots(size_t slots)
      : present(slots, 0),
        util_sum(slots, 0),
        util_gpus(slots, 0),
        work_sum(slots, 0),
        work_gpus(slots, 0),
        wait_max(slots, kNone),
        read(slots, kNone),
        write(slots, kNone),
        workers(slots, kNone),
        d_state(slots, kNone),
        io_max(slots, kNone),
        cpu_max(slots, kNone) {}
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  static constexpr size_t kBytesPerSlot = sizeof(uint32_t) + 11 * sizeof(double);
  std::vector<uint32_t> present;  // nodes with a sample in the slot
  std::vector<double> util_sum, util_gpus, work_sum, work_gpus;
  std::vector<double> wait_max, read, write, workers, d_state, io_max, cpu_max;
};

// A node's samples that fall in one slot of the grid (one, or several where the grid is
// coarser than its interval): levels averaged, steps and data wait summed.
struct SlotReduction {
  struct Field {
    double sum = 0;
    uint32_t count = 0;
    void add(const std::optional<double>& v) {
      if (!v) return;
      sum += *v;
      ++count;
    }
    std::optional<double> mean() const { return count ? std::optional(sum / count) : std::nullopt; }
    std::optional<double> total() const { return count ? std::optional(sum) : std::nullopt; }
  };
  Field steps, util, work, wait, read, write, workers, d_state, io, cpu, rank_util, rank_work,
      rank_wait;
  void add(const model::NodeSample& x) {
    steps.add(x.steps);
    util.add(x.gpu_util_percent);
    work.add(x.gpu_work_percent);
    wait.add(x.data_wait_s);
    read.add(x.read_bytes_per_s);
    write.add(x.write_bytes_per_s);
    workers.add(x.workers_cpu);
    d_state.add(x.d_state_threads);
    io.add(x.io_some);
    cpu.add(x.cpu_some);
    rank_util.add(x.rank_gpu_util_percent);
    rank_work.add(x.rank_gpu_work_percent);
    rank_wait.add(x.rank_data_wait_s);
  }
};

void addInto(double& sum, const std::optional<double>& v) {
  if (v) sum = std::isnan(sum) ? *v : sum + *v;
}
void maxInto(double& m, const std::optional<double>& v) {
  if (v && (std::isnan(m) || *v > m)) m = *v;
}
std::optional<double> orNone(double v) { return std::isnan(v) ? std::nullopt : std::optional(v); }

// Pass two: node J's samples onto the grid: its columns, and its share of the job's slots
// (added under LOCK a batch of slots at a time).
void mergeNode(size_t node, const NodeReader& read, int64_t shift_ms, int64_t t0,
               int64_t interval_ms, size_t factor, double gpus, NodeColumns& columns, JobSlots& job,
               std::mutex& lock, size_t& samples) {
  const size_t slots = job.present.size();
  for (auto& c : columns.values) c.assign(slots, kNoValue);
  struct Done {
    size_t k;
    SlotReduction r;
  };
  std::vector<Done> batch;
  auto flush = [&] {
    const std::lock_guard held(lock);
    for (const Done& d : batch) {
      const SlotReduction& r = d.r;
      ++job.present[d.k];
      if (const auto u = r.util.mean()) {
        job.util_sum[d.k] += *u * gpus;
        job.util_gpus[d.k] += gpus;
      }
      if (const auto w = r.work.mean()) {
        job.work_sum[d.k] += *w * gpus;
        job.work_gpus[d.k] += gpus;
      }
      maxInto(job.wait_max[d.k], r.wait.total());
      addInto(job.read[d.k], r.read.mean());
      addInto(job.write[d.k], r.write.mean());
      addInto(job.workers[d.k], r.workers.mean());
      addInto(job.d_state[d.k], r.d_state.mean());
      maxInto(job.io_max[d.k], r.io.mean());
      maxInto(job.cpu_max[d.k], r.cpu.mean());
    }
    batch.clear();
  };
  std::optional<size_t> current;
  SlotReduction reduction;
  auto finish = [&] {
    if (!current) return;
    const size_t k = *current;
    const SlotReduction& r = reduction;
    auto& v = columns.values;
    v[NodeColumns::kGpuUtil][k] = compact(r.rank_util.mean());
    v[NodeColumns::kGpuWork][k] = compact(r.rank_work.mean());
    v[NodeColumns::kDataWait][k] = compact(r.rank_wait.total());
    v[NodeColumns::kSteps][k] = compact(r.steps.total());
    v[NodeColumns::kRead][k] = compact(r.read.mean());
    v[NodeColumns::kWrite][k] = compact(r.write.mean());
    v[NodeColumns::kWorkersCpu][k] = compact(r.workers.mean());
    v[NodeColumns::kDState][k] = compact(r.d_state.mean());
    batch.push_back({k, r});
    if (batch.size() >= 4096) flush();
  };
  int64_t last_ts = INT64_MIN;
  read(node, model::NodeSampleFields::kAll, [&](const model::NodeSample& x) {
    if (x.ts_ms <= last_ts) return;  // time order, once each
    last_ts = x.ts_ms;
    // To the nearest of the recordings' intervals (a tick a few ms early stays in its own),
    // then to the grid's slot holding it.
    const int64_t at = x.ts_ms - shift_ms - t0 + interval_ms / 2;
    if (at < 0) return;
    const auto k = static_cast<size_t>(at / interval_ms) / factor;
    if (k >= slots) return;
    ++samples;
    if (current != k) {
      finish();
      current = k;
      reduction = {};
    }
    reduction.add(x);
  });
  finish();
  flush();
}

// The run's series on the grid, with one rank per node standing for it (its series empty: the
// node's are in F.columns), from the job's slots; F.columns moved from slots to intervals.
void buildSeries(FleetAnalysis& f, const JobSlots& job, const std::vector<FleetNode>& nodes,
                 int64_t t0, int64_t shown_ms) {
  JobSeries& s = f.series;
  const size_t slots = job.present.size();
  std::vector<size_t> kept;
  for (size_t k = 0; k < slots; ++k) {
    if (job.present[k]) kept.push_back(k);
  }
  const size_t n = kept.size();
  s.ts_ms.reserve(n);
  s.interval_s.assign(n, static_cast<double>(f.grid_ms) / 1000.0);
  // Each interval ends at its last tick of the recordings' (its only one unless coarsened).
  const int64_t last_tick_ms = f.grid_ms - f.interval_ms;
  for (size_t k : kept)
    s.ts_ms.push_back(t0 + static_cast<int64_t>(k) * f.grid_ms + last_tick_ms + shown_ms);
  // Only the series merged here: the job's others stay empty (evidence::at reads them as none).
  for (Series* x :
       {&s.gpu_util_percent, &s.gpu_work_percent, &s.data_wait_s, &s.steps, &s.read_bytes_per_s,
        &s.write_bytes_per_s, &s.workers_cpu, &s.d_state_threads, &s.io_some, &s.cpu_some})
    x->assign(n, std::nullopt);
  for (size_t i = 0; i < n; ++i) {
    const size_t k = kept[i];
    if (job.util_gpus[k] > 0) s.gpu_util_percent[i] = job.util_sum[k] / job.util_gpus[k];
    if (job.work_gpus[k] > 0) s.gpu_work_percent[i] = job.work_sum[k] / job.work_gpus[k];
    s.data_wait_s[i] = orNone(job.wait_max[k]);
    s.read_bytes_per_s[i] = orNone(job.read[k]);
    s.write_bytes_per_s[i] = orNone(job.write[k]);
    s.workers_cpu[i] = orNone(job.workers[k]);
    s.d_state_threads[i] = orNone(job.d_state[k]);
    s.io_some[i] = orNone(job.io_max[k]);
    s.cpu_some[i] = orNone(job.cpu_max[k]);
    // The job's steps: the nodes' sum, scaled up where a node's sample is missing from a slot
    // (a late tick), so that a hole in one recording does not read as the job slowing down.
    double steps = 0;
    uint32_t reporting = 0;
    for (const NodeColumns& c : f.columns) {
      const float v = c.values[NodeColumns::kSteps][k];
      if (!std::isnan(v)) {
        steps += v;
        ++reporting;
      }
    }
    if (reporting && 2 * reporting >= job.present[k])
      s.steps[i] = steps * static_cast<double>(f.columns.size()) / reporting;
  }
  // The nodes' columns from slots to intervals (in place: an interval is never after its slot).
  for (NodeColumns& c : f.columns) {
    for (auto& v : c.values) {
      for (size_t i = 0; i < n; ++i) v[i] = v[kept[i]];
      v.resize(n);
      v.shrink_to_fit();
    }
  }
  for (size_t j = 0; j < f.nodes.size(); ++j) {
    const FleetNode& node = nodes[j];  // the judged, as F.columns
    model::RankSeries r;
    r.rank = static_cast<int32_t>(j);
    r.node = node.node;
    r.pid = node.pid;
    r.gpu = node.gpu;
    s.ranks.push_back(std::move(r));
    s.gpu_count += node.gpu_count;
  }
}

// The run's series over intervals FROM..TO with each node's figures as a rank: what a stall
// there is attributed on, the straggler found by.
JobSeries windowOf(const FleetAnalysis& f, size_t from, size_t to) {
  const JobSeries& s = f.series;
  JobSeries w;
  w.ts_ms.assign(s.ts_ms.begin() + static_cast<long>(from),
                 s.ts_ms.begin() + static_cast<long>(to) + 1);
  w.interval_s.assign(s.interval_s.begin() + static_cast<long>(from),
                      s.interval_s.begin() + static_cast<long>(to) + 1);
  w.gpu_count = s.gpu_count;
  std::vector<const Series*> job;
  s.forEachSeries([&](const Series& x) { job.push_back(&x); });
  size_t next = 0;
  w.forEachSeries([&](Series& x) {  // the job's own, in the one order (no ranks yet)
    const Series& src = *job[next++];
    if (!src.empty())
      x.assign(src.begin() + static_cast<long>(from), src.begin() + static_cast<long>(to) + 1);
  });
  for (size_t j = 0; j < f.columns.size(); ++j) {
    const model::RankSeries& node = s.ranks[j];
    model::RankSeries r;
    r.rank = node.rank;
    r.node = node.node;
    r.pid = node.pid;
    r.gpu = node.gpu;
    const NodeColumns& c = f.columns[j];
    r.gpu_util_percent = c.series(NodeColumns::kGpuUtil, from, to);
    r.gpu_work_percent = c.series(NodeColumns::kGpuWork, from, to);
    r.data_wait_s = c.series(NodeColumns::kDataWait, from, to);
    r.steps = c.series(NodeColumns::kSteps, from, to);
    r.read_bytes_per_s = c.series(NodeColumns::kRead, from, to);
    r.write_bytes_per_s = c.series(NodeColumns::kWrite, from, to);
    r.workers_cpu = c.series(NodeColumns::kWorkersCpu, from, to);
    r.d_state_threads = c.series(NodeColumns::kDState, from, to);
    w.ranks.push_back(std::move(r));
  }
  return w;
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

}  // namespace

std::optional<double> NodeColumns::at(Column c, size_t i) const {
  const auto& v = values[c];
  if (i >= v.size() || std::isnan(v[i])) return std::nullopt;
  return static_cast<double>(v[i]);
}

Series NodeColumns::series(Column c, size_t from, size_t to) const {
  Series out;
  out.reserve(to + 1 - from);
  for (size_t i = from; i <= to; ++i) out.push_back(at(c, i));
  return out;
}

FleetAnalysis analyzeFleet(const std::vector<FleetNode>& given, const NodeReader& read,
                           const NodeWindow& window, std::optional<int32_t> world_size,
                           const FleetOptions& options) {
  const DetectorConfig& cfg = options.detector;
  FleetAnalysis f;
  // Pass one: every node's progress, to line up their clocks; the nodes without samples in the
  // range are not judged.
  std::vector<ClockTrack> tracks(given.size());
  forEachParallel(given.size(), options.threads,
                  [&](size_t n) { tracks[n] = readProgress(n, read); });
  std::vector<FleetNode> nodes;  // the judged, by index among them
  {
    std::vector<ClockTrack> judged;
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
  {
    std::vector<int64_t> intervals(tracks[0].interval_ms.begin(), tracks[0].interval_ms.end());
    f.interval_ms = std::max<int64_t>(1, medianOf(std::move(intervals)));
  }
  const ClockSignal signal = chooseClockSignal(tracks);
  f.clock_signal = nameOf(signal);
  f.clocks = checkClocks(tracks, nodes, signal, f.interval_ms);
  // Where each node's samples fall on the common grid: by its clock corrected where it had to be,
  // and by the phase of its own ticks, so that jitter of less than half an interval never moves a
  // sample into its neighbour's slot.
  std::vector<int64_t> shift_ms(nodes.size());  // subtracted from each node's timestamps
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const ClockTrack& t = tracks[n];
    const int64_t offset = f.clocks[n].corrected ? f.clocks[n].offset_ms : 0;
    std::vector<int64_t> phases;
    for (size_t i = 0; i < t.ts_ms.size() && i < 1000; ++i)
      phases.push_back(positiveMod(t.ts_ms[i] - offset, f.interval_ms));
    shift_ms[n] = offset + medianOf(std::move(phases));
    t0 = std::min(t0, t.first_ms - shift_ms[n]);
    t1 = std::max(t1, t.last_ms - shift_ms[n]);
  }
  tracks = {};
  const int64_t shown_ms = shift_ms[0] - (f.clocks[0].corrected ? f.clocks[0].offset_ms : 0);
  // The grid: the recordings' interval, coarsened as far as the bound asks. Per slot: each
  // node's columns, the job's sums, its series and the analysis' (about 200 bytes).
  const size_t fine_slots = static_cast<size_t>((t1 - t0) / f.interval_ms + 1);
  const size_t per_slot = nodes.size() * NodeColumns::kCount * sizeof(float) +
                          JobSlots::kBytesPerSlot + 12 * sizeof(std::optional<double>) +
                          2 * sizeof(double) + 2 * sizeof(int64_t);
  size_t factor = 1;
  while (options.max_series_bytes && factor < fine_slots &&
         (fine_slots + factor - 1) / factor * per_slot > options.max_series_bytes)
    factor = std::max(factor + 1, factor * 5 / 4);
  f.grid_ms = f.interval_ms * static_cast<int64_t>(factor);
  const size_t slots = static_cast<size_t>((t1 - t0 + f.interval_ms / 2) / f.grid_ms + 1);
  f.series_bytes = std::max(clock_bytes, slots * per_slot);

  // Pass two: each node merged onto the grid as it is read.
  f.columns.resize(nodes.size());
  {
    JobSlots job(slots);
    std::mutex job_lock;
    std::vector<size_t> merged(nodes.size(), 0);
    forEachParallel(nodes.size(), options.threads, [&](size_t n) {
      mergeNode(f.nodes[n], read, shift_ms[n], t0, f.interval_ms, factor,
                std::max<double>(1.0, nodes[n].gpu_count), f.columns[n], job, job_lock, merged[n]);
    });
    buildSeries(f, job, nodes, t0, shown_ms);
  }

  // The job judged on the grid; a stall attributed on a window of the nodes' figures (the
  // intervals the baseline is taken over, and the stall's).
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
    const JobSeries w = windowOf(f, from, inc.last);
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
  {
    bool reporting = false;
    for (size_t i = 0; i < s.size(); ++i) {
      reporting = reporting || at(s.steps, i).has_value();
      f.progress[i] = judging.progress(i, reporting);
    }
  }
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
      if (auto c = explainOnNode(n, f.nodes[n], inc, offset, f.grid_ms, window, cfg))
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
    f.incidents.push_back(std::move(fi));
  }
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
