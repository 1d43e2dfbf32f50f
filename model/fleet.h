// What the post-mortem of a run across nodes found, as plain records: the nodes on one grid
// (their judged series as compact columns, their clocks checked), the run's stalls each
// explained on a node, and each node's standing verdict with what they add up to. The fleet
// correlator computes them (correlator/fleet.h, fleet_limiters.h); render/ says them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "model/analysis.h"
#include "model/incident.h"
#include "model/limiter.h"
#include "model/series.h"

namespace stallwatch::model {

// A node's series on the run's grid as it is judged by: its slowest rank's GPU utilisation,
// work and data wait, and its job's steps, reads, writes, workers' CPU and threads in D state.
// Four bytes a value (NaN: none), where model::Series takes sixteen.
struct NodeColumns {
  enum Column {
    kGpuUtil,
    kGpuWork,
    kDataWait,
    kSteps,
    kRead,
    kWrite,
    kWorkersCpu,
    kDState,
    kCount
  };
  static constexpr float kNone = std::numeric_limits<float>::quiet_NaN();
  std::array<std::vector<float>, kCount> values;

  static float compact(const std::optional<double>& v);  // none as kNone
  std::optional<double> at(Column c, size_t i) const;
  // Intervals FROM..TO (inclusive) of column C as a model::Series.
  Series series(Column c, size_t from, size_t to) const;
};

// Whether a node's clock agrees with the first node's, judged from the data: a synchronous
// job's progress rises and falls on every node at once, so the lag at which two nodes' progress
// series match best is the difference between their clocks.
struct ClockCheck {
  std::string node;
  bool checked = false;    // false: the progress did not vary enough to tell
  int64_t offset_ms = 0;   // this node's clock minus the first node's (0 unless checked)
  double match = 0;        // the correlation of the two progress series at that lag
  bool corrected = false;  // beyond one interval: its samples were shifted back by the offset

  // What its samples were shifted back by: the offset where corrected, else 0.
  int64_t appliedOffsetMs() const { return corrected ? offset_ms : 0; }
};

// A stall of the whole job, explained on a node.
struct NodeCause {
  size_t node = 0;
  Incident incident;  // attributed on that node's own series over the job's stall
};

struct FleetIncident {
  // On the job's grid. Class, device and evidence are the explaining node's (the straggler's,
  // or the most common among nodes that starved alike); the evidence starts with the per-node
  // comparisons that found the straggler. straggler: the rank that held the job back.
  // Its ranks are real ranks: the straggler, those that waited, or those that starved alike.
  Incident incident;
  std::optional<size_t> straggler_node;  // index in the nodes, when one node held the job back
  std::vector<size_t> starved_nodes;     // without one: the nodes that starved alike
  std::vector<NodeCause> causes;         // the straggler's, or every node's that starved
  double others_waited_s = 0;            // how long each other node waited: the stall's span
  double others_gpu_seconds = 0;         // their GPUs' capacity lost meanwhile
};

struct FleetAnalysis {
  // The nodes judged, as indices among those given: those with samples in the range. Every
  // other node index below (a rank of SERIES, an incident's nodes, CLOCKS) counts among these.
  std::vector<size_t> nodes;
  std::vector<size_t> samples;  // each judged node's samples read
  // On the common grid: the job's own series, and one "rank" per node (RankSeries::rank is the
  // node's index, node its host) whose series are left empty: the node's are in COLUMNS.
  JobSeries series;
  std::vector<NodeColumns> columns;
  Series progress;  // the job's progress per interval, as judged (analysis.progress_signal)
  int64_t grid_ms = 1000;
  int64_t interval_ms = 1000;  // the recordings' own; GRID_MS is a multiple where coarsened
  size_t series_bytes = 0;     // what the series on the grid took (the most at any time)
  std::string clock_signal;    // what the clocks were compared by: "steps", "gpu_work", "gpu_util"
  std::vector<ClockCheck> clocks;
  std::vector<int32_t> missing_ranks;  // of WORLD_SIZE, ranks no node's recording holds
  Analysis analysis;
  std::vector<FleetIncident> incidents;
  Goodput goodput;
};

struct FleetLimiters {
  // Each node's verdict, in the order of the nodes; none where it could not be judged.
  std::vector<std::optional<LimiterVerdict>> nodes;
  // The node whose loop waited most for input, among those whose input held them back.
  std::optional<size_t> slowest_input_node;
  // GPU-hours waiting for input across the run, by the limiter of the node that waited.
  std::array<double, kLimiterCount> wait_gpu_hours{};
  // The limiter most of the run's GPU-seconds were judged under (by the nodes' GPUs x seconds).
  std::optional<Limiter> run_limiter;
  // Not judged: the nodes' recordings in the range held more than a report judges node by node
  // (kNodeLimiterBudgetDays); how many node-days they held.
  std::optional<double> over_budget_node_days;
};

// Node-days of recordings (one-second samples) the report across nodes judges node by node:
// each costs about what the node's own report does (measured on 8 GPUs a node: ~1.2 s and
// ~100 MB a node-quarter-day, two nodes at a time; docs/MEASUREMENTS.md).
constexpr double kNodeLimiterBudgetDays = 8;

}  // namespace stallwatch::model
