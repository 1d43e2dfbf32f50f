#include "agent/metrics_jobs.h"

#include <set>
#include <utility>

#include "model/run.h"

namespace stallwatch::agent {

// Jobs, over the last interval.
void renderJobs(const MetricsSnapshot& s, MetricSink& w) {
  w.family("stallwatch_job_gpu_utilization_ratio", "gauge",
           "Mean utilisation of the job's GPUs over the interval.");
  for (const auto& j : s.jobs) {
    if (j.gpu_util_percent) w.sample({{"training_job", j.key}}, *j.gpu_util_percent / 100.0);
  }
  w.family("stallwatch_job_dataloader_wait_ratio", "gauge",
           "Share of the interval the job's training loop waited for data (dataloader socket).");
  for (const auto& j : s.jobs) {
    if (j.data_wait_seconds && j.step_seconds && *j.data_wait_seconds + *j.step_seconds > 0) {
      w.sample({{"training_job", j.key}},
               *j.data_wait_seconds / (*j.data_wait_seconds + *j.step_seconds));
    }
  }
  w.family("stallwatch_job_steps_per_second", "gauge",
           "Training steps per second (dataloader socket).");
  for (const auto& j : s.jobs) {
    if (j.steps && s.interval_seconds > 0)
      w.sample({{"training_job", j.key}}, static_cast<double>(*j.steps) / s.interval_seconds);
  }
  w.family("stallwatch_job_read_bytes_per_second", "gauge",
           "Bytes the job's processes read from storage per second.");
  for (const auto& j : s.jobs) {
    if (j.read_bytes_per_second) w.sample({{"training_job", j.key}}, *j.read_bytes_per_second);
  }
  w.family("stallwatch_job_uninterruptible_threads", "gauge",
           "The job's threads in uninterruptible sleep at the tick.");
  for (const auto& j : s.jobs) w.sample({{"training_job", j.key}}, j.d_state_threads);
  // The standing verdict over the job's last minute (not paged: a condition, not an incident).
  // The limiter label takes one of seven values, one series a job at a time.
  w.family("stallwatch_job_input_wait_ratio", "gauge",
           "Share of the job's last minute its training loop waited for input (the dataloader "
           "hook, else where its main thread slept).");
  for (const auto& l : s.limiters) {
    if (l.verdict.wait_source != model::WaitSource::kNone)
      w.sample({{"training_job", l.job_key}}, l.verdict.input_wait_share);
  }
  w.family("stallwatch_job_limiter", "gauge",
           "What limited the job over its last minute: 1 for the limiter named (gpu, input-cpu, "
           "input-workers, input-storage, io-throttled, host, unknown).");
  for (const auto& l : s.limiters) {
    w.sample({{"training_job", l.job_key}, {"limiter", model::toString(l.verdict.limiter)}}, 1);
  }
  w.family("stallwatch_job_speedup_on_offer", "gauge",
           "How much faster the job would step if its input kept up, over its last minute.");
  for (const auto& l : s.limiters) {
    if (l.verdict.wait_source != model::WaitSource::kNone)
      w.sample({{"training_job", l.job_key}}, l.verdict.speedup);
  }
  // What explains a stall on this node when the report reads Prometheus instead of the DB:
  // the job's own writes, workers, stopped processes, and its cgroup's limits and pressure.
  struct JobGauge {
    const char* name;
    const char* help;
    std::optional<double> (*value)(const collectors::JobSample&);
  };
  using J = collectors::JobSample;
  static const JobGauge job_gauges[] = {
      {"stallwatch_job_gpu_work_ratio",
       "Mean GPM work of the job's GPUs: the busier of tensor-core and DRAM activity.",
       [](const J& j) -> std::optional<double> {
         return j.gpu_work_percent ? std::optional(*j.gpu_work_percent / 100.0) : std::nullopt;
       }},
      {"stallwatch_job_gpus", "GPUs the job computes on.",
       [](const J& j) -> std::optional<double> { return static_cast<double>(j.gpus.size()); }},
      {"stallwatch_job_write_bytes_per_second",
       "Bytes the job's processes wrote to storage per second.",
       [](const J& j) { return j.write_bytes_per_second; }},
      {"stallwatch_job_workers_cpu_cores",
       "CPU of the job's processes other than its main one(s), in cores.",
       [](const J& j) { return j.workers_cpu_ratio; }},
      {"stallwatch_job_stopped_processes", "The job's processes stopped (T) at the tick.",
       [](const J& j) -> std::optional<double> {
         return static_cast<double>(j.stopped_processes);
       }},
      {"stallwatch_job_cgroup_cpu_throttled_ratio",
       "Share of the interval the CPU quota of the job's cgroup (or one above it) throttled it.",
       [](const J& j) { return j.cgroup_cpu_throttled_ratio; }},
      {"stallwatch_job_cgroup_read_limit_bytes_per_second",
       "The io.max read limit nearest the job's reads, on the device it limits.",
       [](const J& j) { return j.cgroup_read_limit_bytes_per_second; }},
      {"stallwatch_job_cgroup_limited_read_bytes_per_second",
       "Reads of the cgroup that io.max limit applies to, on the limited device.",
       [](const J& j) { return j.cgroup_limited_read_bytes_per_second; }},
  };
  for (const auto& g : job_gauges) {
    w.family(g.name, "gauge", g.help);
    for (const auto& j : s.jobs) {
      if (auto v = g.value(j)) w.sample({{"training_job", j.key}}, *v);
    }
  }
  w.family("stallwatch_job_cgroup_pressure_some_ratio", "gauge",
           "Share of the interval some task of the job's cgroup stalled on the resource (PSI, "
           "the highest over its cgroups).");
  for (const auto& j : s.jobs) {
    for (const auto& [resource, v] :
         {std::pair{"io", j.cgroup_io_some}, std::pair{"cpu", j.cgroup_cpu_some},
          std::pair{"memory", j.cgroup_memory_some}}) {
      if (v) w.sample({{"training_job", j.key}, {"resource", resource}}, *v);
    }
  }
  w.family("stallwatch_job_device_info", "gauge",
           "1 for each device the job reads (VIA: the device its files were seen on, when this "
           "one lies under it).");
  for (const auto& j : s.jobs) {
    const auto it = s.job_devices.find(j.key);
    if (it == s.job_devices.end()) continue;
    for (const auto& [device, via] : it->second)
      w.sample({{"training_job", j.key}, {"device", device}, {"via", via}}, 1);
  }
}

// The ranks of runs across nodes: run, rank and node labels, so that rules can compare a
// run's nodes (deploy/prometheus/stallwatch-fleet.rules.yml). Bounded: a node has as many
// ranks as GPUs, and a run's series end with it.
void renderRanks(const MetricsSnapshot& s, MetricSink& w) {
  struct Family {
    const char* name;
    const char* help;
    std::optional<double> RankMetric::*value;
    double scale;
  };
  for (const Family& f :
       {Family{"stallwatch_rank_gpu_utilization_ratio",
               "Utilisation of the rank's GPU(s) over the interval (a rank waiting inside a "
               "collective spins and reads busy).",
               &RankMetric::gpu_util_percent, 0.01},
        Family{"stallwatch_rank_gpu_work_ratio",
               "GPM work of the rank's GPU(s): the busier of tensor-core and DRAM activity, 0 "
               "while it waits inside a collective.",
               &RankMetric::gpu_work_percent, 0.01},
        Family{"stallwatch_rank_dataloader_wait_ratio",
               "Share of the rank's training loop spent waiting for data (dataloader socket).",
               &RankMetric::data_wait_ratio, 1.0},
        Family{"stallwatch_rank_steps_per_second", "The rank's training steps per second.",
               &RankMetric::steps_per_second, 1.0}}) {
    w.family(f.name, "gauge", f.help);
    for (const auto& r : s.ranks) {
      if (const auto& v = r.*(f.value))
        w.sample({{"run", r.run}, {"rank", std::to_string(r.rank)}, {"node", s.node}},
                 *v * f.scale);
    }
  }
  w.family(
      "stallwatch_run_job_info", "gauge",
      "1 for each job that is this node's share of a run across nodes: its key, the run and "
      "the node, and the run's WORLD_SIZE where its environment gave it (what the fleet report "
      "joins the job's families on).");
  for (const auto& j : s.jobs) {
    const auto it = s.job_runs.find(j.key);
    if (it == s.job_runs.end()) continue;
    const std::string world_size =
        it->second.world_size ? std::to_string(*it->second.world_size) : std::string();
    std::vector<Label> info{{"run", it->second.run}, {"node", s.node}, {"training_job", j.key}};
    if (!world_size.empty()) info.push_back({"world_size", world_size});
    w.sample(info, 1);
  }
}

void noteRunShares(RunShares& shares, const collectors::SampleBatch& batch) {
  for (const auto& job : batch.job_updates) {
    std::string run = model::runKeyOf(job.key, job.labels);
    if (job.ended_ms || run.empty()) {
      shares.erase(job.key);
    } else {
      shares[job.key] = {std::move(run), model::labelNumber(job.labels, "RANK"),
                         model::worldSizeOf(job.labels)};
    }
  }
}

std::vector<RankMetric> rankMetrics(const collectors::SampleBatch& batch, const RunShares& shares) {
  std::vector<RankMetric> out;
  auto waitRatio = [](const auto& x) -> std::optional<double> {
    if (!x.data_wait_seconds || !x.step_seconds || *x.data_wait_seconds + *x.step_seconds <= 0)
      return std::nullopt;
    return *x.data_wait_seconds / (*x.data_wait_seconds + *x.step_seconds);
  };
  auto stepsPerSecond = [&](const auto& x) -> std::optional<double> {
    if (!x.steps || batch.interval_seconds <= 0) return std::nullopt;
    return static_cast<double>(*x.steps) / batch.interval_seconds;
  };
  // Jobs of several ranks on this node: each rank's own figures.
  std::set<std::string> with_ranks;
  for (const auto& r : batch.ranks) {
    const auto share = shares.find(r.key);
    if (share == shares.end()) continue;
    with_ranks.insert(r.key);
    out.push_back({share->second.run, r.rank, r.gpu_util_percent, r.gpu_work_percent, waitRatio(r),
                   stepsPerSecond(r)});
  }
  // A job of one rank here: the job's figures are its rank's.
  for (const auto& j : batch.jobs) {
    const auto share = shares.find(j.key);
    if (share == shares.end() || !share->second.rank || with_ranks.count(j.key)) continue;
    out.push_back({share->second.run, *share->second.rank, j.gpu_util_percent, j.gpu_work_percent,
                   waitRatio(j), stepsPerSecond(j)});
  }
  return out;
}

void noteJobDevices(JobDevices& devices, const collectors::SampleBatch& batch) {
  for (const auto& f : batch.job_devices) devices[f.key].emplace(f.device, f.via);
  for (const auto& job : batch.job_updates) {
    if (job.ended_ms) devices.erase(job.key);
  }
}

}  // namespace stallwatch::agent
