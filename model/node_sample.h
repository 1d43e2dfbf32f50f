// One interval of a node's share of a run across nodes, as the fleet report judges the node:
// the job's own figures on that node and its slowest rank's. Read a row at a time (storage from
// a recording, prometheus from the scraped series) and merged onto the run's grid as it comes,
// so that no node's day is ever held whole (correlator/fleet.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "model/series.h"

namespace stallwatch::model {

struct NodeSample {
  int64_t ts_ms = 0;  // end of the interval, by the node's clock
  double interval_s = 0;
  // The job on this node: steps in the interval, mean GPU utilisation and work, data wait
  // (seconds), reads and writes (bytes/s), input workers' CPU (cores), threads in D state, and
  // the host's I/O and CPU pressure shares (0..1).
  std::optional<double> steps, gpu_util_percent, gpu_work_percent, data_wait_s, read_bytes_per_s,
      write_bytes_per_s, workers_cpu, d_state_threads, io_some, cpu_some;
  // Its slowest rank's: the least busy GPU's utilisation and work, the longest data wait. The
  // job's own where the node ran one rank.
  std::optional<double> rank_gpu_util_percent, rank_gpu_work_percent, rank_data_wait_s;
};

// What of a node's samples a reader must fill: the clock check needs only its progress
// (ts_ms, interval_s, steps, gpu_util_percent, gpu_work_percent); the merge needs all.
enum class NodeSampleFields { kProgress, kAll };

using NodeSampleSink = std::function<void(const NodeSample&)>;

// Interval I of a node's summary held whole (a recording's Detail::kNodeSummary, a node read
// from Prometheus) as a sample: its first rank standing for the slowest, as the summary keeps
// it. A series the summary does not hold reads as none.
NodeSample nodeSampleAt(const JobSeries& summary, size_t i);

}  // namespace stallwatch::model
