// A synchronous job across nodes, from each node's own recording: the nodes lined up on one
// time grid (their clocks checked against each other from the data), judged as one job whose
// "ranks" are the nodes, and each stall explained on the series of the node that held the job
// back by the same attribution as within a node. Pure computation like the rest of the
// correlator: the nodes' samples come in through a NodeReader and NodeWindow.
//
// No node's day is held whole: each node is read twice, a row at a time (its progress, to check
// its clock; then all it is judged by, merged onto the grid as it comes), and kept as
// NodeColumns at 4 bytes a value. The nodes' figures are put back into model::Series only
// around each stall, to find the node that held the job back. A run too long or too wide for
// FleetOptions::max_series_bytes is judged on a coarser grid (docs/MEASUREMENTS.md: a day of a
// node takes about 3 MiB).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "correlator/postmortem.h"
#include "correlator/stall_detector.h"
#include "model/node_sample.h"

namespace stallwatch::correlator {

// A node of the run, as known before its samples are read.
struct FleetNode {
  std::string node;            // its host name
  std::vector<int32_t> ranks;  // the global ranks it ran; empty if its recording does not say
  uint32_t gpu_count = 0;
  uint32_t pid = 0;  // its lowest rank's main process, where known
  std::string gpu;   // its first GPU's UUID, where known
};

// Reads node NODE's samples in time order, each to SINK, filling at least FIELDS. Called twice a
// node (its progress, then all), for several nodes at once from FleetOptions::threads threads.
using NodeReader = std::function<void(size_t node, model::NodeSampleFields fields,
                                      const model::NodeSampleSink& sink)>;

// One node's recording of the job, whole in memory (a node read from Prometheus).
struct NodeJob {
  std::string node;            // its host name
  std::vector<int32_t> ranks;  // the global ranks it ran; empty if its recording does not say
  // The node's summary series (storage's Recording::Detail::kNodeSummary): the job's figures on
  // this node, and one rank standing for the node's slowest.
  JobSeries summary;
};

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

struct FleetOptions {
  DetectorConfig detector;
  // The most the run's series on the grid may take, in bytes (0: no bound). Past it the grid is
  // coarsened, a whole multiple of the recordings' interval, until they fit.
  size_t max_series_bytes = 0;
  unsigned threads = 2;  // nodes read at once
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

// Node NODE's full series (its devices, ranks and the host's other devices) from FROM_MS to
// TO_MS by its own clock, to explain a stall on. NODE: its index among the nodes given.
using NodeWindow = std::function<JobSeries(size_t node, int64_t from_ms, int64_t to_ms)>;

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

// WORLD_SIZE, when known, lets the analysis say which ranks have no recording.
FleetAnalysis analyzeFleet(const std::vector<FleetNode>& nodes, const NodeReader& read,
                           const NodeWindow& window, std::optional<int32_t> world_size = {},
                           const FleetOptions& options = {});
// The same over summaries held in memory; each is freed once merged.
FleetAnalysis analyzeFleet(std::vector<NodeJob> nodes, const NodeWindow& window,
                           std::optional<int32_t> world_size = {},
                           const DetectorConfig& config = {});

// Lags up to this far (either way) are looked for when checking the nodes' clocks.
constexpr int64_t kMaxClockLagMs = 60'000;

}  // namespace stallwatch::correlator
