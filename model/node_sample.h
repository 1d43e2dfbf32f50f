// One interval of a node's share of a run across nodes, as the fleet report judges the node:
// the job's own figures on that node and its slowest rank's. Read a row at a time (storage from
// a recording, prometheus from the scraped series) and merged onto the run's grid as it comes,
// so that no node's day is ever held whole (correlator/fleet.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

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

// A figure of a NodeSample, to index it by.
enum class NodeFigure : uint8_t {
  kSteps,
  kGpuUtilPercent,
  kGpuWorkPercent,
  kDataWaitS,
  kReadBytesPerS,
  kWriteBytesPerS,
  kWorkersCpu,
  kDStateThreads,
  kIoSome,
  kCpuSome,
  kRankGpuUtilPercent,
  kRankGpuWorkPercent,
  kRankDataWaitS,
};
inline constexpr size_t kNodeFigureCount = 13;
// The member of NodeSample that FIGURE is.
std::optional<double> NodeSample::*memberOf(NodeFigure figure);

// A node's samples held at 4 bytes a value, each figure sized only when first filled: a node
// read from Prometheus, whose figures arrive a figure at a time for every node of the run, so
// that a thousand nodes' are held at once until merged (16 bytes a value as model::Series).
class NodeSampleColumns {
 public:
  size_t size() const { return ts_ms_.size(); }
  void append(int64_t ts_ms, double interval_s);
  double intervalAt(size_t i) const { return interval_s_[i]; }
  std::optional<double> at(NodeFigure figure, size_t i) const;
  void set(NodeFigure figure, size_t i, std::optional<double> value);
  // FROM's values as TO's (a node whose ranks did not report: its job's figures stand for them).
  void copy(NodeFigure from, NodeFigure to) { values_[index(to)] = values_[index(from)]; }
  NodeSample sample(size_t i) const;
  size_t bytes() const;  // what its values take

 private:
  static size_t index(NodeFigure figure) { return static_cast<size_t>(figure); }
  std::vector<int64_t> ts_ms_;
  std::vector<double> interval_s_;
  std::array<std::vector<float>, kNodeFigureCount> values_;  // NaN: none
};

// Interval I of a node's summary held whole (a recording's Detail::kNodeSummary, a node read
// from Prometheus) as a sample: its first rank standing for the slowest, as the summary keeps
// it. A series the summary does not hold reads as none.
NodeSample nodeSampleAt(const JobSeries& summary, size_t i);

}  // namespace stallwatch::model
