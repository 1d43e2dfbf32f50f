#include "correlator/fleet_grid.h"

#include <algorithm>
#include <cmath>

namespace stallwatch::correlator::fleet {
namespace {

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

}  // namespace

JobSlots::JobSlots(size_t slots)
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

size_t bytesPerSlot(size_t nodes) {
  return nodes * NodeColumns::kCount * sizeof(float) + JobSlots::kBytesPerSlot +
         12 * sizeof(std::optional<double>) + 2 * sizeof(double) + 2 * sizeof(int64_t);
}

size_t coarsening(size_t fine_slots, size_t per_slot, size_t max_bytes) {
  size_t factor = 1;
  while (max_bytes && factor < fine_slots &&
         (fine_slots + factor - 1) / factor * per_slot > max_bytes)
    factor = std::max(factor + 1, factor * 5 / 4);
  return factor;
}

void mergeNode(size_t node, const NodeReader& read, int64_t shift_ms, int64_t t0,
               int64_t interval_ms, size_t factor, double gpus, NodeColumns& columns, JobSlots& job,
               std::mutex& lock, size_t& samples) {
  const size_t slots = job.present.size();
  for (auto& c : columns.values) c.assign(slots, NodeColumns::kNone);
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
    v[NodeColumns::kGpuUtil][k] = NodeColumns::compact(r.rank_util.mean());
    v[NodeColumns::kGpuWork][k] = NodeColumns::compact(r.rank_work.mean());
    v[NodeColumns::kDataWait][k] = NodeColumns::compact(r.rank_wait.total());
    v[NodeColumns::kSteps][k] = NodeColumns::compact(r.steps.total());
    v[NodeColumns::kRead][k] = NodeColumns::compact(r.read.mean());
    v[NodeColumns::kWrite][k] = NodeColumns::compact(r.write.mean());
    v[NodeColumns::kWorkersCpu][k] = NodeColumns::compact(r.workers.mean());
    v[NodeColumns::kDState][k] = NodeColumns::compact(r.d_state.mean());
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

}  // namespace stallwatch::correlator::fleet
